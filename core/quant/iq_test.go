package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

// quantTypesFiles are the llama-quantize outputs of ../shared/testdata/quant-types and
// the types each holds whose quantizer minfer has (the IQ mixes also hold Q6_K, and
// IQ4_NL for the qwen3 tensors whose rows are not a multiple of 256).
var quantTypesFiles = []struct {
	file  string
	types []Type
}{
	{"q4_1", []Type{Q4_1, Q6_K}},
	{"q5_1", []Type{Q5_1, Q6_K}},
	{"q2_k", []Type{Q2_K, Q3_K, Q4_0, Q6_K}},
	{"q3_k_m", []Type{Q3_K, Q4_K, Q5_0, Q5_K, Q6_K}},
	{"q5_k_m", []Type{Q5_1, Q5_K, Q6_K, Q8_0}},
	{"iq4_nl", []Type{IQ4_NL, Q6_K}},
	{"iq4_xs", []Type{IQ4_XS, IQ4_NL, Q6_K}},
	{"iq3_s", []Type{IQ3_S, IQ4_NL, Q6_K}},
}

// quantTypesRMSE bounds the relative RMS error of each type's dequantized tensors
// against their F16 sources, 1.2× the worst measured (Q4_1 0.079, Q5_1 0.038, Q2_K 0.299,
// Q3_K 0.152, Q4_0 0.086, Q4_K 0.071, Q5_0 0.043, Q5_K 0.036, Q6_K 0.018, Q8_0 0.0053,
// IQ4_NL 0.077, IQ4_XS 0.077, IQ3_S 0.168): a wrong layout or codebook entry gives
// errors several times larger.
var quantTypesRMSE = map[Type]float64{
	Q4_1: 0.095, Q5_1: 0.046, Q2_K: 0.36, Q3_K: 0.18, Q4_0: 0.10, Q4_K: 0.086, Q5_0: 0.052,
	Q5_K: 0.044, Q6_K: 0.022, Q8_0: 0.0064, IQ4_NL: 0.092, IQ4_XS: 0.093, IQ3_S: 0.20,
}

// TestQuantTypesMatchLlamaQuantize re-quantizes the F16 tensors of the synthetic models
// and wants llama-quantize's bytes (no importance matrix) for every tensor of the listed
// types that has a quantizer, and every tensor's dequantized values near its F16 source;
// every listed type must be seen in at least one of the two families.
func TestQuantTypesMatchLlamaQuantize(t *testing.T) {
	srcs := map[string]*miniGGUF{}
	for _, fam := range []string{"llama", "qwen3"} {
		src, err := readMiniGGUF(testpath.Path(t, "models", "synthetic", "synth-"+fam+"-f16.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		srcs[fam] = src
	}
	for _, tc := range quantTypesFiles {
		t.Run(tc.file, func(t *testing.T) {
			seen, rmse := map[Type]int{}, map[Type]float64{}
			for _, fam := range []string{"llama", "qwen3"} {
				dst, err := readMiniGGUF(testpath.Path(t, "quant-types", "synth-"+fam+"-"+tc.file+".gguf"))
				if err != nil {
					t.Fatal(err)
				}
				for name, qt := range dst.tensors {
					st := srcs[fam].tensors[name]
					if qt.typ == F32 || st.typ != F16 {
						continue
					}
					listed := false
					for _, typ := range tc.types {
						listed = listed || typ == qt.typ
					}
					if !listed {
						t.Errorf("%s %s: type %s not in the list", fam, name, qt.typ)
						continue
					}
					x := make([]float32, len(st.data)/2)
					F16RowToF32(x, st.data)
					y := make([]float32, len(x))
					if err := Dequantize(qt.typ, y, qt.data); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					var se, ss float64
					for i := range x {
						se += float64(x[i]-y[i]) * float64(x[i]-y[i])
						ss += float64(x[i]) * float64(x[i])
					}
					if r := math.Sqrt(se / ss); r > quantTypesRMSE[qt.typ] {
						t.Errorf("%s %s (%s): dequantized relative RMSE %.4f, want ≤ %.4f", fam, name, qt.typ, r, quantTypesRMSE[qt.typ])
					}
					rmse[qt.typ] = max(rmse[qt.typ], math.Sqrt(se/ss))
					seen[qt.typ]++
					if tr, _ := qt.typ.Lookup(); tr.Quantize == nil {
						continue // dequantized only (no quantizer)
					}
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
						t.Errorf("%s %s (%s): %d of %d bytes differ from llama-quantize", fam, name, qt.typ, diff, len(got))
					}
				}
			}
			for _, typ := range tc.types {
				if seen[typ] == 0 {
					t.Errorf("no %s tensor compared", typ)
				}
			}
			t.Logf("compared tensors per type: %v; worst relative RMSE %v", seen, rmse)
		})
	}
}

// TestIQ4Levels decodes hand-built IQ4 blocks: every nibble value maps to its level,
// IQ4_XS group scales unpack from both scale fields.
func TestIQ4Levels(t *testing.T) {
	want := []float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	t.Run("IQ4_NL", func(t *testing.T) {
		b := append(f16b(0.5), make([]byte, 16)...)
		for j := 0; j < 16; j++ {
			b[2+j] = byte(j) | byte(15-j)<<4
		}
		got := make([]float32, 32)
		if err := Dequantize(IQ4_NL, got, b); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 16; j++ {
			if got[j] != 0.5*want[j] || got[16+j] != 0.5*want[15-j] {
				t.Fatalf("values %d, %d: got %v, %v, want %v, %v", j, 16+j, got[j], got[16+j], 0.5*want[j], 0.5*want[15-j])
			}
		}
	})
	t.Run("IQ4_XS", func(t *testing.T) {
		b := make([]byte, iq4XSBytes)
		copy(b, f16b(0.25))
		// group g gets ls = 2g+1 (low nibble) | (g%4)<<4 (high bits): scale ls-32.
		var sh uint16
		for g := 0; g < 8; g++ {
			ls := 2*g + 1 | (g%4)<<4
			b[4+g/2] |= byte(ls&0xf) << (4 * (g % 2))
			sh |= uint16(ls>>4) << (2 * g)
			for j := 0; j < 16; j++ {
				b[8+16*g+j] = byte((j+g)%16) | byte(j)<<4
			}
		}
		b[2], b[3] = byte(sh), byte(sh>>8)
		got := make([]float32, QK_K)
		if err := Dequantize(IQ4_XS, got, b); err != nil {
			t.Fatal(err)
		}
		for g := 0; g < 8; g++ {
			s := float32(2*g+1|(g%4)<<4) - 32
			for j := 0; j < 16; j++ {
				lo, hi := 0.25*s*want[(j+g)%16], 0.25*s*want[j]
				if got[32*g+j] != lo || got[32*g+16+j] != hi {
					t.Fatalf("group %d value %d: got %v, %v, want %v, %v", g, j, got[32*g+j], got[32*g+16+j], lo, hi)
				}
			}
		}
	})
}

// TestIQ4RoundTrip: the quantizer's output dequantizes close to its input on Gaussian
// rows (relative RMS error measured 0.077 for IQ4_NL and 0.076 for IQ4_XS).
func TestIQ4RoundTrip(t *testing.T) {
	for _, typ := range []Type{IQ4_NL, IQ4_XS} {
		t.Run(typ.String(), func(t *testing.T) {
			x := randNormal(uint64(typ)+300, 16*QK_K, 0.05)
			q := make([]byte, mustRowBytes(t, typ, len(x)))
			if err := Quantize(typ, q, x); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, len(x))
			if err := Dequantize(typ, y, q); err != nil {
				t.Fatal(err)
			}
			var se, ss float64
			for i := range x {
				se += float64(x[i]-y[i]) * float64(x[i]-y[i])
				ss += float64(x[i]) * float64(x[i])
			}
			t.Logf("relative RMSE %.4f", math.Sqrt(se/ss))
			if r := math.Sqrt(se / ss); r > 0.09 || r == 0 {
				t.Errorf("relative RMSE %.4f, want (0, 0.09]", r)
			}
		})
	}
}

// TestIQDotsMatchDequantized: the IQ dot kernels on rows of llama-quantize's files (and
// IQ4_NL and MXFP4 rows of an odd block count, which take the kernel's scalar tail) agree with the
// float64 dot of the dequantized rows to float32 rounding (within 1e-5 of Σ|w·x|, as
// TestVecDotMatchesDequantized).
func TestIQDotsMatchDequantized(t *testing.T) {
	type row struct {
		name string
		typ  Type
		w    []byte
		n    int
	}
	var rows []row
	for _, f := range []string{"iq4_nl", "iq4_xs", "iq3_s"} {
		g, err := readMiniGGUF(testpath.Path(t, "quant-types", "synth-llama-"+f+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		qt := g.tensors["blk.0.ffn_down.weight"]
		n := int(qt.dims[0])
		rb := mustRowBytes(t, qt.typ, n)
		for r := 0; r < 4; r++ {
			rows = append(rows, row{f + "/row" + itoa(r+1), qt.typ, qt.data[r*rb : (r+1)*rb], n})
		}
	}
	for _, typ := range []Type{IQ4_NL, MXFP4} {
		for _, nb := range []int{1, 3, 25} {
			n := 32 * nb
			w := make([]byte, mustRowBytes(t, typ, n))
			if err := Quantize(typ, w, randNormal(uint64(nb), n, 0.02)); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row{typ.String() + "/blocks" + itoa(nb), typ, w, n})
		}
	}
	for i, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			tr, _ := r.typ.Lookup()
			x := make([]byte, mustRowBytes(t, tr.VecDotType, r.n))
			if err := FromFloat(tr.VecDotType, x, randNormal(uint64(i)+40, r.n, 1.5)); err != nil {
				t.Fatal(err)
			}
			wf, xf := make([]float32, r.n), make([]float32, r.n)
			if err := Dequantize(r.typ, wf, r.w); err != nil {
				t.Fatal(err)
			}
			if err := Dequantize(tr.VecDotType, xf, x); err != nil {
				t.Fatal(err)
			}
			var want, mag float64
			for j := range wf {
				want += float64(wf[j]) * float64(xf[j])
				mag += math.Abs(float64(wf[j]) * float64(xf[j]))
			}
			got, err := VecDot(r.typ, r.n, r.w, x)
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(float64(got) - want); d > 1e-5*mag || mag == 0 {
				t.Errorf("VecDot = %v, want %v (Σ|w·x| %v, error %.2g)", got, want, mag, d/mag)
			}
		})
	}
}

// TestMXFP4 decodes a hand-built block (every code, scale 2^(e-127) with the levels'
// E2M1 values: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) and round-trips Gaussian
// rows (relative RMS error measured 0.117: the top level is 1.5·2^floor(log2 amax), so
// a block's largest values clip).
func TestMXFP4(t *testing.T) {
	e2m1 := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}
	for _, e := range []uint8{0, 1, 2, 127, 130, 254} {
		b := make([]byte, mxfp4Bytes)
		b[0] = e
		for j := 0; j < 16; j++ {
			b[1+j] = byte(j) | byte(15-j)<<4
		}
		got := make([]float32, 32)
		if err := Dequantize(MXFP4, got, b); err != nil {
			t.Fatal(err)
		}
		scale := float32(math.Ldexp(1, int(e)-127))
		for j := 0; j < 16; j++ {
			if got[j] != e2m1[j]*scale || got[16+j] != e2m1[15-j]*scale {
				t.Fatalf("e=%d values %d, %d: got %v, %v, want %v, %v", e, j, 16+j, got[j], got[16+j], e2m1[j]*scale, e2m1[15-j]*scale)
			}
		}
	}
	x := randNormal(77, 16*QK_K, 0.05)
	q := make([]byte, mustRowBytes(t, MXFP4, len(x)))
	if err := Quantize(MXFP4, q, x); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(MXFP4, y, q); err != nil {
		t.Fatal(err)
	}
	var se, ss float64
	for i := range x {
		se += float64(x[i]-y[i]) * float64(x[i]-y[i])
		ss += float64(x[i]) * float64(x[i])
	}
	t.Logf("relative RMSE %.4f", math.Sqrt(se/ss))
	if r := math.Sqrt(se / ss); r > 0.14 || r == 0 {
		t.Errorf("relative RMSE %.4f, want (0, 0.14]", r)
	}
}

// TestIQRandomBlocksDot: on random blocks of every IQ format (every codebook entry,
// sign pattern and scale reachable) each dot kernel agrees with the float64 dot of the
// dequantized rows to float32 rounding.
func TestIQRandomBlocksDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, typ := range []Type{IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_NL, IQ4_XS, MXFP4} {
		t.Run(typ.String(), func(t *testing.T) {
			tr, _ := typ.Lookup()
			for rep := 0; rep < 20; rep++ {
				n := QK_K * (1 + rep%5)
				w := randomRow(rng, typ, n)
				x := randomRow(rng, tr.VecDotType, n)
				wf, xf := make([]float32, n), make([]float32, n)
				if err := Dequantize(typ, wf, w); err != nil {
					t.Fatal(err)
				}
				if err := Dequantize(tr.VecDotType, xf, x); err != nil {
					t.Fatal(err)
				}
				var want, mag float64
				for j := range wf {
					want += float64(wf[j]) * float64(xf[j])
					mag += math.Abs(float64(wf[j]) * float64(xf[j]))
				}
				got, err := VecDot(typ, n, w, x)
				if err != nil {
					t.Fatal(err)
				}
				if d := math.Abs(float64(got) - want); d > 1e-5*mag || mag == 0 {
					t.Fatalf("n=%d: VecDot = %v, want %v (Σ|w·x| %v, error %.2g)", n, got, want, mag, d/mag)
				}
			}
		})
	}
}

// TestIQCodebookBlocks decodes hand-built blocks whose values follow from the format
// description: with every index, sign and scale field zero, each value is the first
// codebook entry's magnitude times d·(0.5+0)·f (IQ2: 8·d/8 = d; IQ3_XXS: 4·d/4 = d;
// IQ3_S: d·1·1 = d; IQ1_S: d·1·(level+δ)); then one field at a time set.
func TestIQCodebookBlocks(t *testing.T) {
	dec := func(t *testing.T, typ Type, b []byte) []float32 {
		t.Helper()
		y := make([]float32, QK_K)
		if err := Dequantize(typ, y, b); err != nil {
			t.Fatal(err)
		}
		return y
	}
	block := func(typ Type) []byte {
		b := make([]byte, typ.BlockBytes())
		copy(b, f16b(1))
		return b
	}
	check := func(t *testing.T, y []float32, want func(j int) float32) {
		t.Helper()
		for j, v := range y {
			if w := want(j); v != w {
				t.Fatalf("value %d: got %v, want %v", j, v, w)
			}
		}
	}
	t.Run("IQ2_XXS", func(t *testing.T) {
		b := block(IQ2_XXS)
		// group 1: scale 3 ((0.5+3)/4 = 0.875 per unit), run 0 sign field 1 (value 32
		// negative and, for the even count, value 39), run 1 index 1 (0x...082b: value 40
		// is 43, 41 is 8).
		b[2+8+1] = 1
		binary.LittleEndian.PutUint32(b[2+8+4:], 3<<28|1)
		check(t, dec(t, IQ2_XXS, b), func(j int) float32 {
			switch {
			case j < 32 || j >= 64:
				return 1
			case j == 32 || j == 39:
				return -7
			case j == 40:
				return 0.875 * 43
			}
			return 7
		})
	})
	t.Run("IQ2_S", func(t *testing.T) {
		b := block(IQ2_S)
		b[74] = 0x50       // group 0: first half scale 0, second 5 ((0.5+5)/4 per unit)
		b[34+2] = 0x81     // run 2 (values 16-23): values 16 and 23 negative, no parity
		b[66] = 1 << 4     // run 2 index bit 8: entry 256
		e := iq2SGrid[256] // checked against its bytes below
		if e&0xff == 0 || e>>56 == 0 {
			t.Fatalf("entry 256 = %#x", e)
		}
		check(t, dec(t, IQ2_S, b), func(j int) float32 {
			switch {
			case j < 16 || j >= 32:
				return 1
			case j < 24:
				v := 5.5 / 4 * float32(e>>(8*(j-16))&0xff)
				if j == 16 || j == 23 {
					v = -v
				}
				return v
			}
			return 5.5 / 4 * 8
		})
	})
	t.Run("IQ3_XXS", func(t *testing.T) {
		b := block(IQ3_XXS)
		binary.LittleEndian.PutUint32(b[66+4*7:], 1<<28|3<<7) // group 7: scale 1, values 232, 233 negative
		check(t, dec(t, IQ3_XXS, b), func(j int) float32 {
			switch {
			case j < 224:
				return 1
			case j == 232 || j == 233:
				return -3
			}
			return 3 // 4·(0.5+1)/2
		})
	})
	t.Run("IQ1_S", func(t *testing.T) {
		b := block(IQ1_S)
		binary.LittleEndian.PutUint16(b[34+2*2:], 0x8000|2<<12) // group 2: scale 5, δ negative
		e := iq1SGrid[0]
		check(t, dec(t, IQ1_S, b), func(j int) float32 {
			lvl := float32(int8(e >> (8 * (j % 8))))
			if j/32 == 2 {
				return 5 * (lvl - 0.125)
			}
			return lvl + 0.125
		})
	})
	t.Run("IQ1_M", func(t *testing.T) {
		b := make([]byte, IQ1_M.BlockBytes())
		h := F32ToF16(2)
		for i := 0; i < 4; i++ {
			b[49+2*i] = byte(h>>(4*i)&0xf) << 4
		}
		binary.LittleEndian.PutUint16(b[48+2*1:], binary.LittleEndian.Uint16(b[48+2*1:])|3<<6|1<<9) // group 3: scales 7, 3
		b[32+2*3] = 0x80                                                                            // group 3, run 1: δ negative
		e := iq1SGrid[0]
		check(t, dec(t, IQ1_M, b), func(j int) float32 {
			lvl := float32(int8(e >> (8 * (j % 8))))
			if j/32 != 3 {
				return 2 * (lvl + 0.125)
			}
			s := float32(7)
			if j%32 >= 16 {
				s = 3
			}
			if j%32/8 == 1 {
				return 2 * s * (lvl - 0.125)
			}
			return 2 * s * (lvl + 0.125)
		})
	})
}
