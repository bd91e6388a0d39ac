// Package backendtest is a conformance suite any core/backend.Backend can run from its
// tests: every op on random inputs against a straightforward float64 reference with
// per-op (and per weight type) tolerances, the recorded-error contract, and the row
// identity contract (an nt-row call equals nt 1-row calls bit for bit, up to the
// backend's Caps.IdentityRows).
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func() backend.Backend { return cpu.New(cpu.Options{}) })
//	}
//
// Inputs come from a fixed seed, so failures reproduce. The references compute in
// float64 from the exact values the backend was given (dequantized weights, unrounded
// activations), so tolerances cover the backend's own rounding: activation quantization
// in MatMul, F16/Q8_0 K/V in attention, float32 arithmetic elsewhere.
package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// Options tune a run. The zero value is the default suite.
type Options struct {
	// Seed of the random inputs (0 means a fixed default).
	Seed uint64
	// Types are the weight types MatMul and Embed are tested with; nil means every type
	// core/quant can quantize and dot (WeightTypes).
	Types []quant.Type
	// MaxIdentityNT is the largest nt the row-identity checks use; 0 means 64 (capped by
	// the backend's Caps.IdentityRows when that is non-zero).
	MaxIdentityNT int
}

func (o Options) seed() uint64 {
	if o.Seed == 0 {
		return 0x6d696e666572 // "minfer"
	}
	return o.Seed
}

func (o Options) types() []quant.Type {
	if o.Types != nil {
		return o.Types
	}
	return WeightTypes()
}

// WeightTypes lists the types with a reference quantizer, a dequantizer and a dot
// product in core/quant: the weight types a backend's MatMul must support.
func WeightTypes() []quant.Type {
	var out []quant.Type
	for _, t := range quant.Types() {
		tr, _ := t.Lookup()
		if tr.Quantize != nil && tr.Dequant != nil && tr.VecDot != nil {
			out = append(out, t)
		}
	}
	return out
}

// Tolerance bounds |got − want| ≤ Abs + Rel·scale, where scale is stated per op.
type Tolerance struct {
	Abs, Rel float64
}

// MatMulTolerance is MatMul's bound per weight type, with scale = ‖w_row‖₂·‖x_row‖₂
// (Cauchy–Schwarz: the largest the dot could be). The error is the activation
// conversion (F16 rounding, 8-bit quantization per 32- or 256-value block) plus float32
// accumulation; weights are exact (the reference uses their dequantized values). The
// bounds are ~4× the worst error the CPU backend shows on the suite's inputs (σ_w = 0.5,
// σ_x = 1): F32 2e-8, F16 3e-5, Q8_0/Q8_1 9e-4, Q8_K 1.3e-3, BF16 2.7e-4.
func MatMulTolerance(t quant.Type) Tolerance {
	tr, _ := t.Lookup()
	switch tr.VecDotType {
	case quant.F32:
		return Tolerance{Abs: 1e-6, Rel: 1e-6}
	case quant.F16:
		return Tolerance{Abs: 1e-6, Rel: 2e-4}
	case quant.BF16:
		return Tolerance{Abs: 1e-6, Rel: 2e-3}
	case quant.Q8_K:
		return Tolerance{Abs: 1e-5, Rel: 6e-3}
	}
	return Tolerance{Abs: 1e-5, Rel: 4e-3} // Q8_0, Q8_1
}

// Fixed op tolerances (scale: the op's documented magnitude; see each check).
var (
	// RMSNorm/HeadNorm: scale = |want|.
	NormTolerance = Tolerance{Abs: 1e-6, Rel: 1e-5}
	// SwiGLU: scale = |want|.
	SwiGLUTolerance = Tolerance{Abs: 1e-6, Rel: 1e-5}
	// RoPE: scale = max |x| of the head. theta is a float32 recurrence in ggml (and so
	// in a faithful backend); its relative error grows with the pair index.
	RoPETolerance = Tolerance{Abs: 1e-6, Rel: 2e-4}
	// Attention with an F16 cache: scale = max |v|. K, V and (in ggml's kernel) the V
	// accumulator are F16; the CPU backend's worst is 6e-4 (Q8_0 cache: 4.6e-3).
	AttnF16Tolerance = Tolerance{Abs: 1e-5, Rel: 3e-3}
	// Attention with a Q8_0 cache: scale = max |v|.
	AttnQ8Tolerance = Tolerance{Abs: 1e-5, Rel: 2.5e-2}
)

func (tol Tolerance) ok(got, want, scale float64) bool {
	if math.IsNaN(got) != math.IsNaN(want) {
		return false
	}
	return math.Abs(got-want) <= tol.Abs+tol.Rel*scale
}

// Run runs the whole suite with default options.
func Run(t *testing.T, newBackend func() backend.Backend) {
	RunOptions(t, newBackend, Options{})
}

// RunOptions runs the whole suite.
func RunOptions(t *testing.T, newBackend func() backend.Backend, opts Options) {
	t.Run("Embed", func(t *testing.T) { testEmbed(t, newBackend, opts) })
	t.Run("MatMul", func(t *testing.T) { testMatMul(t, newBackend, opts) })
	t.Run("RMSNorm", func(t *testing.T) { testRMSNorm(t, newBackend, opts) })
	t.Run("HeadNorm", func(t *testing.T) { testHeadNorm(t, newBackend, opts) })
	t.Run("Elementwise", func(t *testing.T) { testElementwise(t, newBackend, opts) })
	t.Run("TopK", func(t *testing.T) { testTopK(t, newBackend, opts) })
	t.Run("RowStats", func(t *testing.T) { testRowStats(t, newBackend, opts) })
	t.Run("Attention", func(t *testing.T) { testAttention(t, newBackend, opts) })
	t.Run("MultiAttention", func(t *testing.T) { testMultiAttention(t, newBackend, opts) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, newBackend) })
	t.Run("RowIdentity", func(t *testing.T) { RowIdentity(t, newBackend, opts) })
}

// --- helpers shared by the checks ---

// env bundles a backend with the test and a random source.
type env struct {
	t   *testing.T
	b   backend.Backend
	rng *rand.Rand
}

func newEnv(t *testing.T, newBackend func() backend.Backend, seed uint64) *env {
	t.Helper()
	b := newBackend()
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &env{t: t, b: b, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (e *env) normals(n int, sigma float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(e.rng.NormFloat64() * sigma)
	}
	return out
}

func (e *env) f32(vals []float32) backend.Buffer {
	e.t.Helper()
	buf, err := e.b.NewF32(len(vals))
	if err != nil {
		e.t.Fatalf("NewF32(%d): %v", len(vals), err)
	}
	e.b.WriteF32(buf, 0, vals)
	return buf
}

func (e *env) zeros(n int) backend.Buffer {
	e.t.Helper()
	buf, err := e.b.NewF32(n)
	if err != nil {
		e.t.Fatalf("NewF32(%d): %v", n, err)
	}
	return buf
}

func (e *env) i32(vals []int32) backend.Buffer {
	e.t.Helper()
	buf, err := e.b.NewI32(len(vals))
	if err != nil {
		e.t.Fatalf("NewI32(%d): %v", len(vals), err)
	}
	e.b.WriteI32(buf, 0, vals)
	return buf
}

func (e *env) read(buf backend.Buffer, n int) []float32 {
	e.t.Helper()
	out := make([]float32, n)
	if err := e.b.ReadF32(buf, 0, out); err != nil {
		e.t.Fatalf("ReadF32: %v", err)
	}
	return out
}

// Weight is a random weight: its raw bytes and the exact values they decode to.
type Weight struct {
	Type       quant.Type
	Rows, Cols int
	Data       []byte
	Values     []float32 // Rows·Cols dequantized values
}

// RandomWeight quantizes Gaussian values (σ) to t with core/quant's reference quantizer.
func RandomWeight(rng *rand.Rand, t quant.Type, rows, cols int, sigma float64) (*Weight, error) {
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * sigma)
	}
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	data := make([]byte, rb*rows)
	for r := range rows {
		if err := quant.Quantize(t, data[r*rb:(r+1)*rb], src[r*cols:(r+1)*cols]); err != nil {
			return nil, err
		}
	}
	vals := make([]float32, rows*cols)
	if err := quant.Dequantize(t, vals, data); err != nil {
		return nil, err
	}
	return &Weight{Type: t, Rows: rows, Cols: cols, Data: data, Values: vals}, nil
}

func (e *env) weight(name string, t quant.Type, rows, cols int, sigma float64) (*Weight, backend.Weight) {
	e.t.Helper()
	w, err := RandomWeight(e.rng, t, rows, cols, sigma)
	if err != nil {
		e.t.Fatalf("random %s weight %d×%d: %v", t, rows, cols, err)
	}
	bw, err := e.b.NewWeight(name, t, rows, cols, w.Data)
	if err != nil {
		e.t.Fatalf("NewWeight(%s %d×%d): %v", t, rows, cols, err)
	}
	return w, bw
}

// vector makes an F32 1×n weight.
func (e *env) vector(name string, vals []float32) backend.Weight {
	e.t.Helper()
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		bits := math.Float32bits(v)
		data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	}
	w, err := e.b.NewWeight(name, quant.F32, 1, len(vals), data)
	if err != nil {
		e.t.Fatalf("NewWeight(%s): %v", name, err)
	}
	return w
}

func (e *env) sync() {
	e.t.Helper()
	if err := e.b.Sync(); err != nil {
		e.t.Fatalf("Sync: %v", err)
	}
}

// check compares got with want element-wise; scale(i) gives each element's scale.
func check(t *testing.T, what string, got []float32, want []float64, tol Tolerance, scale func(i int) float64) {
	t.Helper()
	bad := 0
	for i := range want {
		if !tol.ok(float64(got[i]), want[i], scale(i)) {
			if bad < 5 {
				t.Errorf("%s[%d]: got %g, want %g (±%g)", what, i, got[i], want[i], tol.Abs+tol.Rel*scale(i))
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d values out of tolerance", what, bad, len(want))
	}
}

func absScale(want []float64) func(int) float64 {
	return func(i int) float64 { return math.Abs(want[i]) }
}

func name(format string, args ...any) string { return fmt.Sprintf(format, args...) }
