package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// TestAttendF16ZMatchesLoop: the AVX-512 attention in passes (one head, and up to four
// heads sharing a KV head) gives ggml's one-key-at-a-time loop's bits, for scores that rise (rescaling), fall and repeat, and for keys
// whose maximum rises by less than an ulp of exp (a rescale factor of exactly 1).
func TestAttendF16ZMatchesLoop(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	attendF16ZMatchesLoop(t)
}

func attendF16ZMatchesLoop(t *testing.T) {
	b := New(Options{Threads: 1})
	defer b.Close()
	for _, hd := range []int{64, 128} {
		kvx, err := b.NewKV(backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: hd, Ctx: 300, Type: backend.KVF16})
		if err != nil {
			t.Fatal(err)
		}
		kv := kvx.(*KV)
		rng := rand.New(rand.NewPCG(uint64(hd), 7))
		q := make([]float32, hd)
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		for pos := range 300 {
			k, v := make([]float32, hd), make([]float32, hd)
			grow := float32(pos%7) * 0.3 // keys that raise the maximum now and then
			for j := range k {
				k[j] = float32(rng.NormFloat64())*0.5 + grow*q[j]*0.1
				v[j] = float32(rng.NormFloat64())
			}
			if pos%50 == 49 {
				copy(k, q) // a repeated maximum
				for j := range k {
					k[j] = k[j] * (1 + 1e-4*float32(pos%3))
				}
			}
			kv.store(0, 0, pos, k, v)
		}
		q16 := make([]uint16, hd)
		for j, x := range q {
			q16[j] = quant.F32ToF16(x)
		}
		sc := b.workerScratch(0, hd)
		for _, p := range []int{0, 1, 2, 7, 63, 64, 150, 299} {
			for _, scale := range []float32{0.125, 1, 3} {
				got, want := make([]float32, hd), make([]float32, hd)
				acc := make([]float32, hd)
				kv.attendF16Z(got, q, acc, sc, 0, 0, p, scale)
				clear(acc)
				kv.attendF16Loop(want, q16, acc, 0, 0, p, scale, false)
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
						t.Fatalf("hd %d p %d scale %g: out[%d] = %g, want %g (the loop's bits)", hd, p, scale, j, got[j], want[j])
					}
				}
			}
		}
		if hd == 64 && useAVX512 {
			// Up to four heads at once (AVX-512 only): each head's bits equal the loop's.
			qs := make([][]float32, 4)
			for j := range qs {
				qs[j] = make([]float32, hd)
				for i := range qs[j] {
					qs[j][i] = q[(i+7*j)%hd] * float32(1+j)
				}
			}
			for nh := 1; nh <= 4; nh++ {
				for _, p := range []int{0, 5, 64, 299} {
					outs := make([][]float32, nh)
					for j := range outs {
						outs[j] = make([]float32, hd)
					}
					kv.attendF16Z4(outs, qs[:nh], sc, 0, 0, p, 0.125)
					for j := range nh {
						q16 := make([]uint16, hd)
						for i, x := range qs[j] {
							q16[i] = quant.F32ToF16(x)
						}
						want, acc := make([]float32, hd), make([]float32, hd)
						kv.attendF16Loop(want, q16, acc, 0, 0, p, 0.125, false)
						for i := range want {
							if math.Float32bits(outs[j][i]) != math.Float32bits(want[i]) {
								t.Fatalf("%d heads, head %d, p %d: out[%d] = %g, want %g (the loop's bits)", nh, j, p, i, outs[j][i], want[i])
							}
						}
					}
				}
			}
		}
		b.Free(kvx)
	}
}

// BenchmarkAttendF16: one token's attention over 64 cached positions at Qwen2.5-0.5B's
// shape (14 query heads on 2 KV heads of 64), head by head and four heads at a time.
func BenchmarkAttendF16(b *testing.B) {
	if !useAVX512 {
		b.Skip("no AVX-512")
	}
	be := New(Options{Threads: 1})
	defer be.Close()
	const hd, heads, kvHeads, p = 64, 14, 2, 63
	kvx, err := be.NewKV(backend.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, Ctx: 128, Type: backend.KVF16})
	if err != nil {
		b.Fatal(err)
	}
	kv := kvx.(*KV)
	rng := rand.New(rand.NewPCG(1, 2))
	row := func() []float32 {
		r := make([]float32, hd)
		for i := range r {
			r[i] = float32(rng.NormFloat64())
		}
		return r
	}
	for h := range kvHeads {
		for pos := 0; pos <= p; pos++ {
			kv.store(0, h, pos, row(), row())
		}
	}
	q, out := make([][]float32, heads), make([][]float32, heads)
	for h := range q {
		q[h], out[h] = row(), make([]float32, hd)
	}
	sc := be.workerScratch(0, hd)
	b.Run("one", func(b *testing.B) {
		for range b.N {
			for h := range heads {
				acc := sc.acc[:hd]
				clear(acc)
				kv.attendF16Z(out[h], q[h], acc, sc, 0, h/7, p, 0.125)
			}
		}
	})
	b.Run("four", func(b *testing.B) {
		for range b.N {
			for kvh := range kvHeads {
				kv.attendF16Z4(out[7*kvh:7*kvh+4], q[7*kvh:7*kvh+4], sc, 0, kvh, p, 0.125)
				kv.attendF16Z4(out[7*kvh+4:7*kvh+7], q[7*kvh+4:7*kvh+7], sc, 0, kvh, p, 0.125)
			}
		}
	})
}

// TestFma32OneIsAdd: fma32(s, 1, v) == s + v for float32 s, v (what softmaxF16 relies
// on), over random values of every exponent gap and the corner cases.
func TestFma32OneIsAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	vals := []float32{0, 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, math.SmallestNonzeroFloat32, 0x1p-126, 1 + 0x1p-23, 0x1p24}
	for range 200000 {
		vals = append(vals, math.Float32frombits(rng.Uint32()))
	}
	for i, s := range vals {
		for _, v := range []float32{vals[(i*7+1)%len(vals)], vals[(i*13+5)%len(vals)], s * 0x1p-29, -s * 0x1p-30, s * (1 + 0x1p-23)} {
			got, want := fma32(s, 1, v), s+v
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
				t.Fatalf("fma32(%g, 1, %g) = %g, want %g", s, v, got, want)
			}
		}
	}
}

// TestRoPENeoXAVX512MatchesGo: the vector neox rotation gives ropeHead's bits.
func TestRoPENeoXAVX512MatchesGo(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	ropeNeoXMatchesGo(t, ropeNeoXAVX512)
}

func ropeNeoXMatchesGo(t *testing.T, rope func(v, c, s *float32, half int)) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ hd, dims int }{{64, 64}, {128, 128}, {128, 64}, {80, 16}} {
		r := backend.RoPE{Mode: backend.RoPENeoX, Dims: c.dims, Base: 1e6, FreqScale: 1}
		cache := make([]float32, c.dims)
		half := c.dims / 2
		cs, sn := make([]float32, half), make([]float32, half)
		for _, p := range []int32{0, 1, 17, 4095} {
			ropeCache(cache, p, r)
			for i := range half {
				cs[i], sn[i] = cache[2*i], cache[2*i+1]
			}
			for range 20 {
				got, want := make([]float32, c.hd), make([]float32, c.hd)
				for i := range got {
					got[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()*4))
				}
				copy(want, got)
				rope(&got[0], &cs[0], &sn[0], half)
				ropeHead(want, cache, backend.RoPENeoX, c.dims)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("hd %d dims %d pos %d: v[%d] = %g, want ropeHead's %g", c.hd, c.dims, p, i, got[i], want[i])
					}
				}
			}
		}
	}
}
