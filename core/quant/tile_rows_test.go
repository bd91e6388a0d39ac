package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotTileOneRowMatchesVecDot: with one activation row (decoding) DotTile runs two
// weight rows per kernel call on CPUs with AVX-512 VNNI; every result must still have
// the bits of VecDot and of the pure-Go definition, for even and odd row counts, rows
// that end in a partial group of eight blocks, and padded strides.
func TestDotTileOneRowMatchesVecDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, typ := range []Type{Q8_0, Q4_0, Q5_0} {
		tr, _ := typ.Lookup()
		goDot := simdKernels[typ][1]
		for _, sh := range []struct{ n, rows int }{{32, 2}, {64, 3}, {896, 16}, {928, 7}, {4864, 5}} {
			t.Run(typ.String()+"/"+itoa(sh.n)+"x"+itoa(sh.rows), func(t *testing.T) {
				wb := mustRowBytes(t, typ, sh.n)
				xb := mustRowBytes(t, tr.VecDotType, sh.n)
				tl := &Tile{N: sh.n, Rows: sh.rows, NX: 1, WStride: wb + 7, XStride: xb, OutStride: sh.rows}
				tl.W = make([]byte, sh.rows*tl.WStride)
				for r := 0; r < sh.rows; r++ {
					copy(tl.W[r*tl.WStride:], randomRow(rng, typ, sh.n))
				}
				tl.X = randomRow(rng, tr.VecDotType, sh.n)
				tl.Out = make([]float32, sh.rows)
				if err := DotTile(typ, tl); err != nil {
					t.Fatal(err)
				}
				for r := 0; r < sh.rows; r++ {
					w := tl.W[r*tl.WStride:]
					got := tl.Out[r]
					if want := tr.VecDot(sh.n, w, tl.X); math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("row %d: got %v, want VecDot's %v", r, got, want)
					}
					if want := goDot(sh.n, w, tl.X); math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("row %d: got %v, want the pure-Go dot's %v", r, got, want)
					}
				}
			})
		}
	}
}
