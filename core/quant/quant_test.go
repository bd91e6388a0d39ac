package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

func randNormal(seed uint64, n int, scale float32) []float32 {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * scale
	}
	return x
}

func roundTrip(t *testing.T, typ Type, x []float32) []float32 {
	t.Helper()
	nb, err := typ.RowBytes(len(x))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]byte, nb)
	if err := Quantize(typ, q, x); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(typ, y, q); err != nil {
		t.Fatal(err)
	}
	return y
}

// TestRoundTripBlockBounds checks per-value error bounds that follow from each format's
// definition: for a block of absolute maximum amax (or range max-min), the error of every
// value is at most the stated fraction of the quantization step, plus the binary16
// rounding of the stored scale (2^-11 relative, times the largest level).
func TestRoundTripBlockBounds(t *testing.T) {
	const eps16 = 1.0 / 2048
	tests := []struct {
		typ   Type
		bound func(blk []float32) float32 // largest allowed |x - x'| in the block
	}{
		{F32, func([]float32) float32 { return 0 }},
		{Q8_0, func(b []float32) float32 { _, a := absMax(b); return a/127*(0.5+127*eps16) + 1e-30 }},
		{Q8_1, func(b []float32) float32 { _, a := absMax(b); return a/127*(0.5+127*eps16) + 1e-30 }},
		// Q4_0/Q5_0 map -amax... exactly and clamp +amax to the last level: one whole step.
		{Q4_0, func(b []float32) float32 { _, a := absMax(b); return a/8*(1+8*eps16) + 1e-30 }},
		{Q5_0, func(b []float32) float32 { _, a := absMax(b); return a/16*(1+16*eps16) + 1e-30 }},
		{Q4_1, func(b []float32) float32 {
			mn, mx := minMax(b)
			return (mx-mn)/15*(0.5+15*eps16) + abs32(mn)*eps16 + 1e-30
		}},
		{Q5_1, func(b []float32) float32 {
			mn, mx := minMax(b)
			return (mx-mn)/31*(0.5+31*eps16) + abs32(mn)*eps16 + 1e-30
		}},
		{Q8_K, func(b []float32) float32 { _, a := absMax(b); return a / 127 * 0.5001 }},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			x := randNormal(uint64(tt.typ)+10, 8192, 1)
			y := roundTrip(t, tt.typ, x)
			bs := tt.typ.BlockSize()
			if bs == 1 {
				bs = 32
			}
			for i := 0; i < len(x); i += bs {
				bound := tt.bound(x[i : i+bs])
				for j := i; j < i+bs; j++ {
					if e := abs32(x[j] - y[j]); e > bound {
						t.Fatalf("value %d: got %v, want %v ± %v (error %v)", j, y[j], x[j], bound, e)
					}
				}
			}
		})
	}
}

// TestRoundTripRMSE bounds the relative RMS error (‖x−x'‖/‖x‖) on Gaussian data. The
// bounds are 1.2-1.4× the values measured with these (ggml-exact) reference quantizers:
// Q4_0 0.087, Q4_1 0.078, Q5_0 0.043, Q5_1 0.038, Q2_K 0.296, Q3_K 0.156, Q4_K 0.070,
// Q5_K 0.037, Q6_K 0.018.
func TestRoundTripRMSE(t *testing.T) {
	tests := []struct {
		typ  Type
		want float64
	}{
		{F16, 3e-4}, {BF16, 2.5e-3}, {Q8_0, 0.006}, {Q8_1, 0.006}, {Q8_K, 0.009},
		{Q4_0, 0.12}, {Q4_1, 0.10}, {Q5_0, 0.06}, {Q5_1, 0.05},
		{Q2_K, 0.40}, {Q3_K, 0.21}, {Q4_K, 0.10}, {Q5_K, 0.05}, {Q6_K, 0.025},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			x := randNormal(uint64(tt.typ)+100, 16*QK_K, 0.05)
			y := roundTrip(t, tt.typ, x)
			var se, ss float64
			for i := range x {
				d := float64(x[i] - y[i])
				se += d * d
				ss += float64(x[i]) * float64(x[i])
			}
			got := math.Sqrt(se / ss)
			if got > tt.want || got == 0 && tt.typ != F32 {
				t.Errorf("relative RMSE = %.4f, want (0, %.4f]", got, tt.want)
			}
			t.Logf("relative RMSE %.4f", got)
		})
	}
}

func TestZeroBlocks(t *testing.T) {
	for _, typ := range []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K} {
		t.Run(typ.String(), func(t *testing.T) {
			y := roundTrip(t, typ, make([]float32, QK_K))
			for i, v := range y {
				if v != 0 || math.IsNaN(float64(v)) {
					t.Fatalf("value %d of an all-zero row: got %v, want 0", i, v)
				}
			}
		})
	}
}

func f16b(f float32) []byte { h := F32ToF16(f); return []byte{byte(h), byte(h >> 8)} }

// TestKnownBlocks decodes hand-built blocks and compares with values worked out from the
// format description, element by element.
func TestKnownBlocks(t *testing.T) {
	t.Run("Q4_0", func(t *testing.T) {
		b := f16b(0.5)
		for j := 0; j < 16; j++ {
			b = append(b, byte(j)|byte(15-j)<<4)
		}
		want := make([]float32, 32)
		for j := 0; j < 16; j++ {
			want[j] = float32(j-8) * 0.5
			want[j+16] = float32(7-j) * 0.5
		}
		checkDequant(t, Q4_0, b, want)
	})
	t.Run("Q8_0", func(t *testing.T) {
		b := f16b(-0.25)
		want := make([]float32, 32)
		for j := 0; j < 32; j++ {
			q := int8(j*9 - 128)
			b = append(b, byte(q))
			want[j] = float32(q) * -0.25
		}
		checkDequant(t, Q8_0, b, want)
	})
	t.Run("Q5_0", func(t *testing.T) {
		b := f16b(2)
		b = binary.LittleEndian.AppendUint32(b, 0xA5C3_0F01) // fifth bits
		for j := 0; j < 16; j++ {
			b = append(b, byte(j)|byte(j)<<4)
		}
		want := make([]float32, 32)
		for j := 0; j < 32; j++ {
			hi := (0xA5C3_0F01 >> j) & 1
			want[j] = float32(int(j%16)|int(hi)<<4-16) * 2
		}
		checkDequant(t, Q5_0, b, want)
	})
	t.Run("Q4_1", func(t *testing.T) {
		b := append(f16b(0.5), f16b(-3)...)
		for j := 0; j < 16; j++ {
			b = append(b, byte(j)|byte(15-j)<<4)
		}
		want := make([]float32, 32)
		for j := 0; j < 16; j++ {
			want[j] = float32(j)*0.5 - 3
			want[j+16] = float32(15-j)*0.5 - 3
		}
		checkDequant(t, Q4_1, b, want)
	})
	t.Run("Q4_K", func(t *testing.T) {
		// Group g (0..7) has scale g+1 and min g; d = 1, dmin = 0.5; every byte 0x21
		// holds level 1 for the even group of its 64-value chunk and 2 for the odd one.
		b := append(f16b(1), f16b(0.5)...)
		var sc [12]byte
		for g := 0; g < 8; g++ {
			if g < 4 {
				sc[g], sc[g+4] = byte(g+1), byte(g)
			} else {
				sc[g+4] = byte(g+1) | byte(g)<<4
			}
		}
		b = append(b, sc[:]...)
		b = append(b, bytes.Repeat([]byte{0x21}, 128)...)
		want := make([]float32, 256)
		for e := range want {
			g := e / 32
			want[e] = float32(g+1)*float32(1+g%2) - 0.5*float32(g)
		}
		checkDequant(t, Q4_K, b, want)
	})
	t.Run("Q6_K", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		b := make([]byte, q6_KBytes)
		for i := range b[:208] {
			b[i] = byte(rng.Uint32())
		}
		copy(b[208:], f16b(0.25))
		want := make([]float32, 256)
		for e := range want {
			n, r := e/128, e%128
			quarter, l := r/32, r%32
			qlb := b[n*64+l+(quarter&1)*32]
			lo := qlb & 0xf
			if quarter >= 2 {
				lo = qlb >> 4
			}
			hi := (b[128+n*32+l] >> (2 * quarter)) & 3
			sc := int8(b[192+n*8+l/16+2*quarter])
			want[e] = 0.25 * float32(sc) * float32(int(lo|hi<<4)-32)
		}
		checkDequant(t, Q6_K, b, want)
	})
	t.Run("Q3_K", func(t *testing.T) {
		// All levels 2 with the high bit set (value 2), scale s_g = g - 8 (6-bit codes g+24).
		b := bytes.Repeat([]byte{0xff}, 32)              // hmask: every high bit set
		b = append(b, bytes.Repeat([]byte{0xaa}, 64)...) // qs: level 2 everywhere
		var sc [12]byte
		for g := 0; g < 16; g++ {
			code := byte(g + 24)
			if g < 8 {
				sc[g] |= code & 0xf
			} else {
				sc[g-8] |= (code & 0xf) << 4
			}
			sc[8+g%4] |= (code >> 4) << (2 * (g / 4))
		}
		b = append(b, sc[:]...)
		b = append(b, f16b(0.5)...)
		want := make([]float32, 256)
		for e := range want {
			want[e] = 0.5 * float32(e/16-8) * 2
		}
		checkDequant(t, Q3_K, b, want)
	})
}

func checkDequant(t *testing.T, typ Type, block []byte, want []float32) {
	t.Helper()
	if len(block) != typ.BlockBytes() {
		t.Fatalf("test block is %d bytes, want %d", len(block), typ.BlockBytes())
	}
	got := make([]float32, len(want))
	if err := Dequantize(typ, got, block); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("value %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

// TestMatchesLlamaQuantize re-quantizes the F16 tensors of the synthetic models with our
// reference quantizers and compares with the bytes llama-quantize wrote (no imatrix),
// then checks each quantized tensor's dequantized values against the F16 source.
func TestMatchesLlamaQuantize(t *testing.T) {
	for _, fam := range []string{"llama", "qwen2", "qwen3"} {
		src, err := readMiniGGUF(testpath.Path(t, "models", "synthetic", "synth-"+fam+"-f16.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"q8_0", "q4_0", "q4_k_m", "q6_k"} {
			t.Run(fam+"-"+q, func(t *testing.T) {
				dst, err := readMiniGGUF(testpath.Path(t, "models", "synthetic", "synth-"+fam+"-"+q+".gguf"))
				if err != nil {
					t.Fatal(err)
				}
				seen := map[Type]int{}
				for name, qt := range dst.tensors {
					st := src.tensors[name]
					if qt.typ == F32 || st.typ != F16 {
						continue
					}
					n := len(st.data) / 2
					x := make([]float32, n)
					F16RowToF32(x, st.data)
					got := make([]byte, len(qt.data))
					if err := Quantize(qt.typ, got, x); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if !bytes.Equal(got, qt.data) {
						diff := 0
						for i := range got {
							if got[i] != qt.data[i] {
								diff++
							}
						}
						t.Errorf("%s (%s): %d of %d bytes differ from llama-quantize", name, qt.typ, diff, len(got))
					}
					y := make([]float32, n)
					if err := Dequantize(qt.typ, y, qt.data); err != nil {
						t.Fatal(err)
					}
					var se, ss float64
					for i := range x {
						se += float64(x[i]-y[i]) * float64(x[i]-y[i])
						ss += float64(x[i]) * float64(x[i])
					}
					if r := math.Sqrt(se / ss); r > rmseBound[qt.typ] {
						t.Errorf("%s (%s): dequantized relative RMSE %.4f, want ≤ %.4f", name, qt.typ, r, rmseBound[qt.typ])
					}
					seen[qt.typ]++
				}
				t.Logf("compared tensors per type: %v", seen)
			})
		}
	}
}

var rmseBound = map[Type]float64{Q8_0: 0.006, Q4_0: 0.12, Q5_0: 0.06, Q4_K: 0.10, Q6_K: 0.025}
