package cpu

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

func TestCpuinfoCores(t *testing.T) {
	tests := []struct {
		name, in string
		want     int
	}{
		{"two sockets, hyper-threads", "processor: 0\nphysical id: 0\ncore id: 0\n\nprocessor: 1\nphysical id: 0\ncore id: 0\n\n" +
			"processor: 2\nphysical id: 1\ncore id: 0\n\nprocessor: 3\nphysical id: 1\ncore id: 1\n", 3},
		{"no topology lines", "processor: 0\nmodel name: x\n\nprocessor: 1\n", 0},
		{"empty", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cpuinfoCores([]byte(tc.in)); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSysfsCores(t *testing.T) {
	dir := t.TempDir()
	cpus := []struct {
		name        string
		pkg, core   string
		online      string
		hasTopology bool
	}{
		{"cpu0", "0", "0", "", true},
		{"cpu1", "0", "0", "1", true}, // hyper-thread sibling of cpu0
		{"cpu2", "0", "1", "1", true},
		{"cpu3", "0", "2", "0", true}, // offline
		{"cpu4", "", "", "", false},   // no topology
	}
	for _, c := range cpus {
		d := filepath.Join(dir, c.name)
		if err := os.MkdirAll(filepath.Join(d, "topology"), 0o755); err != nil {
			t.Fatal(err)
		}
		if c.online != "" {
			os.WriteFile(filepath.Join(d, "online"), []byte(c.online+"\n"), 0o644)
		}
		if c.hasTopology {
			os.WriteFile(filepath.Join(d, "topology", "core_id"), []byte(c.core+"\n"), 0o644)
			os.WriteFile(filepath.Join(d, "topology", "physical_package_id"), []byte(c.pkg+"\n"), 0o644)
		}
	}
	if got := sysfsCores(dir); got != 2 {
		t.Errorf("got %d cores, want 2", got)
	}
	if n := PhysicalCores(); n < 1 {
		t.Errorf("PhysicalCores() = %d, want ≥ 1", n)
	}
}

func TestPoolChunks(t *testing.T) {
	for _, threads := range []int{1, 2, 5} {
		p := newPool(threads)
		for _, tc := range []struct{ total, chunk int }{{0, 4}, {1, 4}, {10, 3}, {1000, 7}, {5, 0}} {
			var hits = make([]atomic.Int32, tc.total)
			p.chunks(tc.total, tc.chunk, func(w, lo, hi int) {
				if w < 0 || w >= threads {
					t.Errorf("worker %d of %d", w, threads)
				}
				for i := lo; i < hi; i++ {
					hits[i].Add(1)
				}
			})
			for i := range hits {
				if got := hits[i].Load(); got != 1 {
					t.Fatalf("threads=%d total=%d chunk=%d: item %d done %d times, want 1", threads, tc.total, tc.chunk, i, got)
				}
			}
		}
		p.close()
	}
}

// TestReduce16 pins the _mm512_reduce_add_ps tree: each value is a distinct power of
// two, so any other pairing would round differently.
func TestReduce16(t *testing.T) {
	var v [16]float32
	for i := range v {
		v[i] = float32(math.Ldexp(1, 30*(i%2)-i))
	}
	h := [8]float32{}
	for i := range h {
		h[i] = v[i+8] + v[i]
	}
	want := ((h[4] + h[0]) + (h[6] + h[2])) + ((h[5] + h[1]) + (h[7] + h[3]))
	if got := reduce16(&v); got != want {
		t.Errorf("got %g, want %g", got, want)
	}
}

// TestFloatDotsAgainstFloat64 checks the ggml-order float dots against exact float64
// sums within float32 accumulation error.
func TestFloatDotsAgainstFloat64(t *testing.T) {
	for _, n := range []int{16, 64, 96, 172, 896} {
		x := make([]float32, n)
		y := make([]float32, n)
		x16 := make([]uint16, n)
		y16 := make([]uint16, n)
		var want, want16, norm float64
		for i := range x {
			x[i] = float32(math.Sin(float64(i)*1.3)) * 2
			y[i] = float32(math.Cos(float64(i)*0.7)) - 0.3
			x16[i], y16[i] = quant.F32ToF16(x[i]), quant.F32ToF16(y[i])
			want += float64(x[i]) * float64(y[i])
			want16 += float64(quant.F16ToF32(x16[i])) * float64(quant.F16ToF32(y16[i]))
			norm += math.Abs(float64(x[i]) * float64(y[i]))
		}
		tol := 1e-6 * norm
		check := func(name string, got float32, want float64) {
			if math.Abs(float64(got)-want) > tol {
				t.Errorf("n=%d %s: got %g, want %g", n, name, got, want)
			}
		}
		check("dotVecF32", dotVecF32(x, y), want)
		check("dotVecF16", dotVecF16(x16, y16), want16)
		if n%16 == 0 {
			check("dotLanes16F32", dotLanes16F32(x, y), want)
			check("dotLanes16F16", dotLanes16F16(x16, y16), want16)
		}
	}
}

func TestVExpf(t *testing.T) {
	for x := float32(-87); x < 88; x += 0.37 { // normal results
		got := float64(vExpf(x))
		want := math.Exp(float64(x))
		if math.Abs(got-want) > 3e-7*want {
			t.Fatalf("vExpf(%g) = %g, want %g (> 2.5 ulp)", x, got, want)
		}
	}
	if got := vExpf(200); !math.IsInf(float64(got), 1) {
		t.Errorf("vExpf(200) = %g, want +Inf", got)
	}
	if got := vExpf(-200); got != 0 {
		t.Errorf("vExpf(-200) = %g, want 0", got)
	}
	if got := vExpf(float32(math.NaN())); got == got {
		t.Errorf("vExpf(NaN) = %g, want NaN", got)
	}
}

// TestRoPECache checks the float32 theta recurrence against float64 within its known
// drift, and that freq factors divide theta.
func TestRoPECache(t *testing.T) {
	r := backend.RoPE{Mode: backend.RoPENeoX, Dims: 64, Base: 1e6, FreqScale: 0.5, FreqFactors: make([]float32, 32)}
	for i := range r.FreqFactors {
		r.FreqFactors[i] = float32(1 + i%4)
	}
	cache := make([]float32, 64)
	for _, p := range []int32{0, 1, 17, 500} {
		ropeCache(cache, p, r)
		for i := range 32 {
			theta := float64(p) * math.Pow(1e6, -2*float64(i)/64) * 0.5 / float64(r.FreqFactors[i])
			if d := math.Abs(float64(cache[2*i]) - math.Cos(theta)); d > 1e-4*(1+theta) {
				t.Fatalf("pos %d pair %d: cos %g, want %g", p, i, cache[2*i], math.Cos(theta))
			}
			if d := math.Abs(float64(cache[2*i+1]) - math.Sin(theta)); d > 1e-4*(1+theta) {
				t.Fatalf("pos %d pair %d: sin %g, want %g", p, i, cache[2*i+1], math.Sin(theta))
			}
		}
	}
}

func TestFreeAndClose(t *testing.T) {
	b := New(Options{Threads: 2})
	buf, _ := b.NewF32(4)
	b.Free(buf)
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("WriteF32 after Free: no panic")
			}
		}()
		b.WriteF32(buf, 0, []float32{1})
	}()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err == nil {
		t.Errorf("Sync after Close: got nil error")
	}
	if _, err := b.NewWeight("w", quant.F32, 1, 1, make([]byte, 4)); err == nil {
		t.Errorf("NewWeight after Close: got nil error")
	}
}

// TestMisalignedWeight: F32 data at an odd address is copied, not misread.
func TestMisalignedWeight(t *testing.T) {
	b := New(Options{Threads: 1})
	defer b.Close()
	raw := make([]byte, 1+8)
	for i, v := range []float32{1.5, -2} {
		bits := math.Float32bits(v)
		raw[1+4*i], raw[2+4*i], raw[3+4*i], raw[4+4*i] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	}
	w, err := b.NewWeight("w", quant.F32, 1, 2, raw[1:])
	if err != nil {
		t.Fatal(err)
	}
	if got := w.(*Weight).f32; got[0] != 1.5 || got[1] != -2 {
		t.Errorf("got %v, want [1.5 -2]", got)
	}
}

// TestAVX512MatchesGo: the AVX-512 kernels give the Go definitions' bits.
func TestAVX512MatchesGo(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	floatKernelsMatchGo(t, "AVX-512")
}

// floatKernelsMatchGo: the float dispatchers, on the SIMD path this CPU (or the test)
// selected, give the Go definitions' bits.
func floatKernelsMatchGo(t *testing.T, path string) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{16, 64, 80, 128, 176, 896} {
		for trial := range 20 {
			w := make([]float32, 4*n)
			x := make([]float32, n)
			w16 := make([]uint16, 4*n)
			x16 := make([]uint16, n)
			for i := range w {
				w[i] = float32(rng.NormFloat64() * math.Ldexp(1, trial%7-3))
				w16[i] = quant.F32ToF16(w[i])
			}
			for i := range x {
				x[i] = float32(rng.NormFloat64())
				x16[i] = quant.F32ToF16(x[i])
			}
			eq := func(name string, got, want float32) {
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("n=%d trial %d %s: %s %g, Go %g", n, trial, name, path, got, want)
				}
			}
			eq("lanes16F32", dotLanes16F32(w[:n], x), dotLanes16F32Go(w[:n], x))
			eq("lanes16F16", dotLanes16F16(w16[:n], x16), dotLanes16F16Go(w16[:n], x16))
			eq("vecF16", dotVecF16(w16[:n], x16), dotVecF16Go(w16[:n], x16))
			eq("vecF32", dotVecF32(w[:n], x), dotVecF32Go(w[:n], x))
			var four [4]float32
			dotLanes16F16x4(four[:], w16, x16)
			for i := range 4 {
				eq("lanes16F16x4", four[i], dotLanes16F16Go(w16[i*n:(i+1)*n], x16))
			}
			acc := make([]float32, n)
			accGo := make([]float32, n)
			for i := range acc {
				acc[i] = quant.F16ToF32(x16[i])
				accGo[i] = acc[i]
			}
			s := float32(rng.Float64())
			madF16(acc, w16[:n], s)
			scaleF16(acc, 0.37)
			for i := range accGo {
				accGo[i] = f16Round(fma32(quant.F16ToF32(w16[i]), s, accGo[i]))
				accGo[i] = f16Round(accGo[i] * 0.37)
			}
			for i := range acc {
				eq("madF16+scaleF16", acc[i], accGo[i])
			}
		}
	}
}

// TestSwiGLUAVX512MatchesGo: the AVX-512 silu gives the Go emulation's bits, over the
// whole float range including the exp overflow/underflow branches.
func TestSwiGLUAVX512MatchesGo(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	swigluMatchesGo(t, "AVX-512", swigluAVX512)
}

func swigluMatchesGo(t *testing.T, path string, swiglu func(dst, x, gate *float32, n int)) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 4096
	x := make([]float32, n)
	g := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Ldexp(1, i%9-2))
		g[i] = float32(rng.NormFloat64())
	}
	x[0], x[1], x[2], x[3] = 150, -150, 0, float32(math.Copysign(0, -1))
	for i := range 1000 { // a sweep through exp's subnormal and overflow ranges
		x[4+i] = -190 + 0.38*float32(i)
	}
	got := make([]float32, n)
	swiglu(&got[0], &x[0], &g[0], n)
	for i := range x {
		want := vSilu(x[i]) * g[i]
		if math.Float32bits(got[i]) != math.Float32bits(want) {
			t.Fatalf("x=%g g=%g: %s %g, Go %g", x[i], g[i], path, got[i], want)
		}
	}
}

// TestF16VectorWeight: a norm weight stored as F16 acts as its F32 values.
func TestF16VectorWeight(t *testing.T) {
	b := New(Options{Threads: 1})
	defer b.Close()
	const n = 64
	f32b := make([]byte, 4*n)
	f16b := make([]byte, 2*n)
	x := make([]float32, n)
	for i := range n {
		h := quant.F32ToF16(float32(i)*0.03 - 0.7)
		v := quant.F16ToF32(h)
		bits := math.Float32bits(v)
		f32b[4*i], f32b[4*i+1], f32b[4*i+2], f32b[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
		f16b[2*i], f16b[2*i+1] = byte(h), byte(h>>8)
		x[i] = float32(math.Sin(float64(i)))
	}
	w32, err := b.NewWeight("n32", quant.F32, 1, n, f32b)
	if err != nil {
		t.Fatal(err)
	}
	w16, err := b.NewWeight("n16", quant.F16, 1, n, f16b)
	if err != nil {
		t.Fatal(err)
	}
	xb, _ := b.NewF32(n)
	b.WriteF32(xb, 0, x)
	d32, _ := b.NewF32(n)
	d16, _ := b.NewF32(n)
	b.RMSNorm(d32, xb, w32, 1, 1e-6)
	b.RMSNorm(d16, xb, w16, 1, 1e-6)
	b.AddBias(d16, w16, 1)
	b.AddBias(d32, w32, 1)
	got, want := make([]float32, n), make([]float32, n)
	if err := b.ReadF32(d16, 0, got); err != nil {
		t.Fatal(err)
	}
	b.ReadF32(d32, 0, want)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("value %d: F16 weight %g, F32 weight %g", i, got[i], want[i])
		}
	}
}

// TestRepackedQ4_0Weight: a Q4_0 weight kept repacked gives the bits of the same weight
// in the GGUF layout in MatMul (one row, a few rows, a prompt's rows; a row length
// with a partial group of eight blocks and a row count that is not a multiple of four)
// and in Embed.
func TestRepackedQ4_0Weight(t *testing.T) {
	b := New(Options{Threads: 2})
	defer b.Close()
	rng := rand.New(rand.NewPCG(51, 52))
	for _, sh := range []struct{ rows, cols int }{{70, 928}, {36, 256}} {
		nb := sh.cols / 32
		data := make([]byte, sh.rows*nb*18)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		for blk := 0; blk < sh.rows*nb; blk++ {
			h := quant.F32ToF16(float32(rng.NormFloat64()) / 64)
			data[blk*18], data[blk*18+1] = byte(h), byte(h>>8)
		}
		weights := make([]backend.Weight, 2)
		for i, on := range []bool{false, true} {
			restore := SetRepack(on)
			w, err := b.NewWeight("w", quant.Q4_0, sh.rows, sh.cols, data)
			restore()
			if err != nil {
				t.Fatal(err)
			}
			if got := w.(*Weight).repacked; got != on {
				t.Fatalf("repacked = %v, want %v", got, on)
			}
			weights[i] = w
		}
		for _, nt := range []int{1, 3, 9, 17} {
			x := make([]float32, nt*sh.cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			xb, _ := b.NewF32(len(x))
			b.WriteF32(xb, 0, x)
			var outs [2][]float32
			for i, w := range weights {
				d, _ := b.NewF32(nt * sh.rows)
				b.MatMul(d, w, xb, nt)
				outs[i] = make([]float32, nt*sh.rows)
				if err := b.ReadF32(d, 0, outs[i]); err != nil {
					t.Fatal(err)
				}
			}
			for i := range outs[0] {
				if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
					t.Fatalf("%d×%d, nt=%d: out[%d] = %v repacked, %v in the GGUF layout", sh.rows, sh.cols, nt, i, outs[1][i], outs[0][i])
				}
			}
		}
		ids, _ := b.NewI32(3)
		b.WriteI32(ids, 0, []int32{0, 5, int32(sh.rows - 1)})
		var rows [2][]float32
		for i, w := range weights {
			d, _ := b.NewF32(3 * sh.cols)
			b.Embed(d, w, ids, 3)
			rows[i] = make([]float32, 3*sh.cols)
			if err := b.ReadF32(d, 0, rows[i]); err != nil {
				t.Fatal(err)
			}
		}
		for i := range rows[0] {
			if math.Float32bits(rows[0][i]) != math.Float32bits(rows[1][i]) {
				t.Fatalf("%d×%d: Embed value %d = %v repacked, %v in the GGUF layout", sh.rows, sh.cols, i, rows[1][i], rows[0][i])
			}
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestNoRepackSwitch: MINFER_NO_REPACK=1 keeps Q4_0 weights in the file's layout on
// every CPU; unset, the CPU's choice (core/quant's RepackUsed) stands.
func TestNoRepackSwitch(t *testing.T) {
	const n = 4096
	if got, want := repackWeights(quant.Q4_0, n), quant.RepackUsed(quant.Q4_0, n); got != want {
		t.Errorf("unset: repack %v, want the CPU's choice %v", got, want)
	}
	t.Setenv("MINFER_NO_REPACK", "1")
	if repackWeights(quant.Q4_0, n) {
		t.Error("MINFER_NO_REPACK=1: Q4_0 weights still repacked")
	}
}
