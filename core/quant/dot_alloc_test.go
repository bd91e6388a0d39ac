package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestVecDotNoAlloc: a dot product is the innermost operation of every matmul; it must
// not allocate (an escaping accumulator once cost 12 % of a forward in malloc and GC).
func TestVecDotNoAlloc(t *testing.T) {
	const n = 512
	for _, typ := range dotTypes {
		tr, _ := typ.Lookup()
		t.Run(typ.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 3))
			w := randomRow(rng, typ, n)
			x := randomRow(rng, tr.VecDotType, n)
			got := testing.AllocsPerRun(50, func() { sink = tr.VecDot(n, w, x) })
			if got != 0 {
				t.Errorf("VecDot(%s) allocations per call: got %v, want 0", typ, got)
			}
		})
	}
}

// TestDotTileNoAlloc: after the first call has sized the scratch, DotTile allocates
// nothing, for one activation row (decode) and for many (prompts), on rows in ggml's
// layout and repacked.
func TestDotTileNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	const n = 512
	type variant struct {
		typ      Type
		repacked bool // rows repacked (RepackRows), 15 of them (an odd row, a partial four)
	}
	variants := []variant{{Q4_0, true}}
	for _, typ := range dotTypes {
		variants = append(variants, variant{typ, false})
	}
	for _, v := range variants {
		typ, rows := v.typ, 16
		if v.repacked {
			rows = 15
		}
		tr, _ := typ.Lookup()
		for _, nx := range []int{1, 2, 17} {
			t.Run(fmt.Sprintf("%s/repacked=%v/nx=%d", typ, v.repacked, nx), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(4, 4))
				rb, _ := typ.RowBytes(n)
				xb, _ := tr.VecDotType.RowBytes(n)
				tl := &Tile{N: n, W: randomRow(rng, typ, n*rows), WStride: rb, Rows: rows,
					X: randomRow(rng, tr.VecDotType, n*nx), XStride: xb, NX: nx,
					Out: make([]float32, nx*rows), OutStride: rows, Repacked: v.repacked}
				if v.repacked {
					w := make([]byte, len(tl.W))
					if err := RepackRows(typ, w, tl.W, rows, n); err != nil {
						t.Fatal(err)
					}
					tl.W = w
				}
				if err := DotTile(typ, tl); err != nil {
					t.Fatal(err)
				}
				got := testing.AllocsPerRun(20, func() { _ = DotTile(typ, tl) })
				if got != 0 {
					t.Errorf("DotTile(%s, %d activation rows) allocations per call: got %v, want 0", typ, nx, got)
				}
			})
		}
	}
}
