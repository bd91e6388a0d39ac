package quant

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSIMDMatchesGo runs every SIMD kernel and its pure-Go definition on random blocks
// of many lengths (whole 8-block groups and every tail length) and wants identical bits,
// and identical integer block sums for the K-quant kernels.
func TestSIMDMatchesGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/F16C on this CPU: only the pure-Go kernels run")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for typ, k := range simdKernels {
		tr, _ := typ.Lookup()
		bs := max(tr.BlockSize, 32)
		for nb := 1; nb <= 40; nb++ {
			n := nb * bs
			for rep := 0; rep < 5; rep++ {
				w := randomRow(rng, typ, n)
				x := randomRow(rng, tr.VecDotType, n)
				got, want := k[0](n, w, x), k[1](n, w, x)
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%s n=%d: SIMD %v (%#x), pure Go %v (%#x)", typ, n, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		}
	}
}

// TestFromFloatSIMDMatchesGo compares the SIMD activation quantizers with the pure-Go
// ones byte for byte on random rows with zero blocks, exact ties, and blocks whose
// largest magnitude occurs with both signs.
func TestFromFloatSIMDMatchesGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/F16C on this CPU")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	tests := []struct {
		typ       Type
		simd, ref func([]byte, []float32)
	}{
		{Q8_0, fromFloatQ8_0SIMD, fromFloatQ8_0},
		{Q8_K, fromFloatQ8_KSIMD, quantizeQ8_K},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			for rep := 0; rep < 50; rep++ {
				n := QK_K * (1 + rng.IntN(6))
				x := randNormal(rng.Uint64(), n, float32(math.Pow(2, float64(rng.IntN(20)-10))))
				switch rep % 5 {
				case 1: // a zero block
					clear(x[:QK_K])
				case 2: // amax 127 in every block, so the scale is ±1 and k+0.5 is a tie
					for i := range x {
						x[i] = float32(rng.IntN(254)-127) + 0.5
						if i%32 == 0 {
							x[i] = 127
						}
					}
				case 3: // largest magnitude with both signs, the negative one first
					x[5], x[9] = -50, 50
				case 4:
					x[7], x[3] = -50, 50
				}
				got := make([]byte, mustRowBytes(t, tt.typ, n))
				want := make([]byte, len(got))
				tt.simd(got, x)
				tt.ref(want, x)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("rep %d, byte %d: SIMD %#x, pure Go %#x", rep, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestRowsAVX2MatchVecDot runs the AVX2 row loops of DotTile (the tile kernels of CPUs
// without AVX-512, called here directly whatever the CPU) and wants VecDot's bits for
// every weight row and activation row, at every block count up to 20, with output and
// activation strides wider than a row (1-5 weight rows: the two-weight-row kernels of
// Q4_0/Q5_0 and their odd last row, the four-weight-row one-activation-row kernels and
// the rows after the last four).
func TestRowsAVX2MatchVecDot(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/F16C on this CPU")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	type kernels struct {
		rows, rows4w    rowsFunc
		rows4           rows4Func
		rows4x2, rows4p rows4x2Func
	}
	// rows4w = rows: the one-row kernel for every weight row.
	for name, k := range map[string]kernels{
		"Q8_0": {rowsQ8_0AVX2, rowsQ8_0AVX2, rows4Q8_0AVX2, nil, nil}, "Q8_0/prepared": {rowsQ8_0AVX2, rows4wQ8_0AVX2, rows4Q8_0AVX2, nil, rows4pQ8_0AVX2},
		"Q4_0": {rowsQ4_0AVX2, rows4wQ4_0AVX2, rows4Q4_0AVX2, rows4x2Q4_0AVX2, nil}, "Q4_0/rows4": {rowsQ4_0AVX2, rowsQ4_0AVX2, rows4Q4_0AVX2, nil, nil},
		"Q5_0": {rowsQ5_0AVX2, rows4wQ5_0AVX2, rows4Q5_0AVX2, rows4x2Q5_0AVX2, nil}, "Q5_0/rows4": {rowsQ5_0AVX2, rowsQ5_0AVX2, rows4Q5_0AVX2, nil, nil},
	} {
		typ := map[string]Type{"Q8_0": Q8_0, "Q4_0": Q4_0, "Q5_0": Q5_0}[strings.Split(name, "/")[0]]
		tr, _ := typ.Lookup()
		for nb := 1; nb <= 20; nb++ {
			n, rows, nx := 32*nb, 1+nb%5, 1+nb%7 // 1-7 activation rows: groups of four and the rest
			rb := mustRowBytes(t, typ, n)
			xb := mustRowBytes(t, tr.VecDotType, n)
			xs, os := xb+q8_0Bytes, rows+3
			tl := &Tile{N: n, W: randomRow(rng, typ, n*rows), WStride: rb, Rows: rows,
				X: randomRow(rng, tr.VecDotType, (n+qk)*nx), XStride: xs, NX: nx,
				Out: make([]float32, nx*os), OutStride: os}
			tileRowsAVX2(tl, k.rows, k.rows4w, k.rows4, k.rows4x2, k.rows4p)
			for x := 0; x < nx; x++ {
				for r := 0; r < rows; r++ {
					want := simdKernels[typ][1](n, tl.W[r*rb:], tl.X[x*xs:])
					if got := tl.Out[x*os+r]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%s n=%d row %d act %d: %v, VecDot %v", name, n, r, x, got, want)
					}
				}
			}
		}
	}
}

// TestRowsKAVX2MatchVecDot runs the AVX2 K-quant row loops of DotTile (the Q4_K and
// Q6_K tile kernels of CPUs without AVX-512, called here directly whatever the CPU) and
// wants the pure-Go dot's bits for every pair: 1-6 super-blocks, 1-5 weight rows, 1-9
// activation rows (groups of four and the rest), strides wider than a row.
func TestRowsKAVX2MatchVecDot(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/F16C on this CPU")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, c := range []struct {
		typ   Type
		rows4 rows4Func
		dot   func(int, []byte, []byte) float32
	}{{Q4_K, rows4Q4_KAVX2, dotQ4_KSIMD}, {Q6_K, rows4Q6_KAVX2, dotQ6_KSIMD}} {
		for nb := 1; nb <= 6; nb++ {
			n, rows, nx := QK_K*nb, 1+nb%5, 3+nb
			rb := mustRowBytes(t, c.typ, n)
			xb := mustRowBytes(t, Q8_K, n)
			ws, xs, os := rb+5, xb+q8_KBytes+3, rows+3
			tl := &Tile{N: n, W: make([]byte, rows*ws), WStride: ws, Rows: rows,
				X: make([]byte, nx*xs), XStride: xs, NX: nx, Out: make([]float32, nx*os), OutStride: os}
			for r := 0; r < rows; r++ {
				copy(tl.W[r*ws:], randomRow(rng, c.typ, n))
			}
			for x := 0; x < nx; x++ {
				copy(tl.X[x*xs:], randomRow(rng, Q8_K, n))
			}
			tileRowsKAVX2(tl, c.rows4, c.dot)
			for x := 0; x < nx; x++ {
				for r := 0; r < rows; r++ {
					want := simdKernels[c.typ][1](n, tl.W[r*ws:], tl.X[x*xs:])
					if got := tl.Out[x*os+r]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%s n=%d row %d act %d: %v, pure-Go dot %v", c.typ, n, r, x, got, want)
					}
				}
			}
		}
	}
}

// TestTileUnpackedAVX2MatchesVecDot runs the unpacked Q4_0/Q5_0 tiles of CPUs without
// AVX-512 (called directly whatever the CPU) on shapes that take several unpacking
// passes (4864 columns: 26 weight rows a pass), an odd last weight row and activation
// rows after the last group of four, and wants the pure-Go dot's bits for every pair.
func TestTileUnpackedAVX2MatchesVecDot(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/F16C on this CPU")
	}
	rng := rand.New(rand.NewPCG(17, 18))
	for _, c := range []struct {
		typ Type
		k   *unpackedKernels
	}{{Q4_0, &unpackedQ4_0}, {Q5_0, &unpackedQ5_0}} {
		for _, sh := range []struct{ n, rows, nx int }{{4864, 61, 10}, {896, 6, 8}, {32, 3, 13}} {
			t.Run(c.typ.String()+"/"+itoa(sh.n)+"x"+itoa(sh.rows)+"x"+itoa(sh.nx), func(t *testing.T) {
				rb := mustRowBytes(t, c.typ, sh.n)
				xb := mustRowBytes(t, Q8_0, sh.n)
				ws, xs, os := rb+3, xb+5, sh.rows+2
				tl := &Tile{N: sh.n, W: make([]byte, sh.rows*ws), WStride: ws, Rows: sh.rows,
					X: make([]byte, sh.nx*xs), XStride: xs, NX: sh.nx, Out: make([]float32, sh.nx*os), OutStride: os}
				for r := 0; r < sh.rows; r++ {
					copy(tl.W[r*ws:], randomRow(rng, c.typ, sh.n))
				}
				for x := 0; x < sh.nx; x++ {
					copy(tl.X[x*xs:], randomRow(rng, Q8_0, sh.n))
				}
				tileUnpackedAVX2(tl, c.k)
				for x := 0; x < sh.nx; x++ {
					for r := 0; r < sh.rows; r++ {
						want := simdKernels[c.typ][1](sh.n, tl.W[r*ws:], tl.X[x*xs:])
						if got := tl.Out[x*os+r]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("row %d act %d: %v, pure-Go dot %v", r, x, got, want)
						}
					}
				}
			})
		}
	}
}
