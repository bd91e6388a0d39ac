package quant

import (
	"math"
	"testing"
)

var dotTypes = []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, IQ3_S, MXFP4}

// dotInputs quantizes a random weight row with the reference quantizer and an activation
// row with the CPU activation quantizer, as the CPU backend does.
func dotInputs(t testing.TB, typ Type, n int, seed uint64) (w, x []byte) {
	t.Helper()
	tr, _ := typ.Lookup()
	wf := randNormal(seed, n, 0.02)
	xf := randNormal(seed+1, n, 1.5)
	w = make([]byte, mustRowBytes(t, typ, n))
	x = make([]byte, mustRowBytes(t, tr.VecDotType, n))
	if err := Quantize(typ, w, wf); err != nil {
		t.Fatal(err)
	}
	if err := FromFloat(tr.VecDotType, x, xf); err != nil {
		t.Fatal(err)
	}
	return w, x
}

func mustRowBytes(t testing.TB, typ Type, n int) int {
	nb, err := typ.RowBytes(n)
	if err != nil {
		t.Fatal(err)
	}
	return nb
}

// TestVecDotMatchesDequantized compares every kernel with the float64 dot of the
// dequantized rows. The kernels sum exact integers per block and scale in float32, so
// they agree to float32 rounding: within 1e-5 of Σ|w·x| (measured ≤ 2e-7).
func TestVecDotMatchesDequantized(t *testing.T) {
	for _, typ := range dotTypes {
		for _, n := range []int{256, 768, 4864} {
			t.Run(typ.String()+"/"+itoa(n), func(t *testing.T) {
				tr, _ := typ.Lookup()
				w, x := dotInputs(t, typ, n, uint64(n)+uint64(typ)*7)
				wf, xf := make([]float32, n), make([]float32, n)
				if err := Dequantize(typ, wf, w); err != nil {
					t.Fatal(err)
				}
				if err := Dequantize(tr.VecDotType, xf, x); err != nil {
					t.Fatal(err)
				}
				var want, mag float64
				for i := range wf {
					want += float64(wf[i]) * float64(xf[i])
					mag += math.Abs(float64(wf[i]) * float64(xf[i]))
				}
				got, err := VecDot(typ, n, w, x)
				if err != nil {
					t.Fatal(err)
				}
				tol := 1e-5 * mag
				if typ == Q4_1 || typ == Q5_1 {
					// Q8_1 stores s = d·Σq in binary16: the kernel's m·s term carries
					// that rounding (2^-11 relative), as in ggml.
					wb := typ.BlockBytes()
					for b := 0; b < n/32; b++ {
						tol += math.Abs(float64(f16At(w[b*wb+2:])*f16At(x[b*36+2:]))) / 2048
					}
				}
				if d := math.Abs(float64(got) - want); d > tol || mag == 0 {
					t.Errorf("VecDot = %v, want %v (Σ|w·x| %v, error %.2g)", got, want, mag, d/mag)
				}
			})
		}
	}
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

func TestVecDotErrors(t *testing.T) {
	w := make([]byte, 34)
	if _, err := VecDot(Q8_0, 33, w, w); err == nil {
		t.Error("VecDot with n not a multiple of 32: got nil error")
	}
	if _, err := VecDot(Q8_0, 64, w, w); err == nil {
		t.Error("VecDot with short rows: got nil error")
	}
	if _, err := VecDot(IQ2_XXS, 256, w, w); err == nil {
		t.Error("VecDot of a type without kernel: got nil error")
	}
	if err := FromFloat(Q4_0, w, make([]float32, 32)); err == nil {
		t.Error("FromFloat(Q4_0): got nil error")
	}
}

// TestFromFloatQ8 checks the x86 activation quantizer's rounding: scale 127/amax and
// ties to even, where the reference quantizer rounds ties away from zero.
func TestFromFloatQ8(t *testing.T) {
	x := make([]float32, 32)
	x[0] = 127
	x[1] = 2.5  // tie: 2 (even), reference gives 3
	x[2] = -3.5 // tie: -4 (even), reference gives -4
	x[3] = 0.5  // tie: 0, reference gives 1
	x[4] = -126.49
	for _, typ := range []Type{Q8_0, Q8_1} {
		t.Run(typ.String(), func(t *testing.T) {
			off := 2
			if typ == Q8_1 {
				off = 4
			}
			got := make([]byte, typ.BlockBytes())
			if err := FromFloat(typ, got, x); err != nil {
				t.Fatal(err)
			}
			want := []int8{127, 2, -4, 0, -126}
			for i, w := range want {
				if q := int8(got[off+i]); q != w {
					t.Errorf("q[%d] = %d, want %d", i, q, w)
				}
			}
			if d := f16At(got); d != 1 {
				t.Errorf("d = %v, want 1", d)
			}
			if typ == Q8_1 {
				if s := f16At(got[2:]); s != 127+2-4+0-126 {
					t.Errorf("s = %v, want %v", s, 127+2-4+0-126)
				}
			}
			ref := make([]byte, typ.BlockBytes())
			if err := Quantize(typ, ref, x); err != nil {
				t.Fatal(err)
			}
			if int8(ref[off+1]) != 3 || int8(ref[off+3]) != 1 {
				t.Errorf("reference quantizer ties: got %d %d, want 3 1", int8(ref[off+1]), int8(ref[off+3]))
			}
		})
	}
}
