package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotTilePrep: tiles over activation rows prepared once (TilePrep, in two ranges as
// two workers would) give the same bits as tiles that prepare their own, for every type
// with a tile kernel, odd and even row counts and several chunks of weight rows; the
// kernels write only their own outputs (the stride's padding and the row after the last
// stay untouched: an odd count's missing partner row is never stored).
func TestDotTilePrep(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	var p TilePrep
	for _, typ := range []Type{Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, Q4_1} {
		tr, _ := typ.Lookup()
		for _, sh := range []struct{ n, rows, nx int }{{512, 12, 2}, {768, 9, 17}, {1024, 11, 32}, {256, 5, 1}, {512, 8, 7}, {256, 16, 3}} {
			t.Run(typ.String()+"/"+itoa(sh.n)+"x"+itoa(sh.rows)+"x"+itoa(sh.nx), func(t *testing.T) {
				wb := mustRowBytes(t, typ, sh.n)
				xb := mustRowBytes(t, tr.VecDotType, sh.n)
				w := make([]byte, sh.rows*wb)
				for r := 0; r < sh.rows; r++ {
					copy(w[r*wb:], randomRow(rng, typ, sh.n))
				}
				xs := xb + 4
				x := make([]byte, sh.nx*xs)
				for i := 0; i < sh.nx; i++ {
					copy(x[i*xs:], randomRow(rng, tr.VecDotType, sh.n))
				}
				stride := sh.rows + 3
				want := make([]float32, sh.nx*stride)
				if err := DotTile(typ, &Tile{N: sh.n, W: w, WStride: wb, Rows: sh.rows, X: x, XStride: xs, NX: sh.nx, Out: want, OutStride: stride}); err != nil {
					t.Fatal(err)
				}
				if !p.Reset(typ, sh.n, sh.nx) {
					if hasTileZ && typ != Q4_1 && sh.nx >= 16 {
						t.Fatalf("Reset(%s, %d, %d) = false, want a prepared shape", typ, sh.n, sh.nx)
					}
					return
				}
				mid := sh.nx / 2 &^ 1
				for _, rg := range [][2]int{{0, mid}, {mid, sh.nx}} {
					if rg[0] == rg[1] {
						continue
					}
					if err := p.PrepareRows(x[rg[0]*xs:], xs, rg[0], rg[1]); err != nil {
						t.Fatal(err)
					}
				}
				got := make([]float32, (sh.nx+1)*stride) // a row beyond the tile
				for i := range got {
					got[i] = -7 // padding sentinel
				}
				for lo := 0; lo < sh.rows; lo += 4 { // chunks of four weight rows
					hi := min(lo+4, sh.rows)
					tl := &Tile{N: sh.n, W: w[lo*wb:], WStride: wb, Rows: hi - lo, X: x, XStride: xs, NX: sh.nx, Out: got[lo:], OutStride: stride, Prep: &p}
					if err := DotTile(typ, tl); err != nil {
						t.Fatal(err)
					}
				}
				for i := 0; i <= sh.nx; i++ {
					for r := 0; r < stride; r++ {
						g, wnt := got[i*stride+r], float32(-7)
						if i < sh.nx && r < sh.rows {
							wnt = want[i*stride+r]
						}
						if math.Float32bits(g) != math.Float32bits(wnt) {
							t.Fatalf("out[%d][%d] = %v, want %v", i, r, g, wnt)
						}
					}
				}
			})
		}
	}
}

func TestTilePrepErrors(t *testing.T) {
	var p TilePrep
	if err := p.PrepareRows(make([]byte, 1000), 34, 0, 2); err == nil {
		t.Error("PrepareRows before Reset: got nil error")
	}
	if !p.Reset(Q8_0, 64, 5) {
		t.Skip("no tile kernels on this CPU")
	}
	x := make([]byte, 5*68)
	for name, rg := range map[string][3]int{"odd lo": {1, 3, 68}, "empty": {2, 2, 68}, "beyond": {0, 6, 68}, "odd hi inside": {0, 3, 68}, "small stride": {0, 2, 60}} {
		if err := p.PrepareRows(x, rg[2], rg[0], rg[1]); err == nil {
			t.Errorf("%s: got nil error", name)
		}
	}
	if err := p.PrepareRows(x[:100], 68, 0, 2); err == nil {
		t.Error("short x: got nil error")
	}
	if err := p.PrepareRows(x, 68, 0, 5); err != nil {
		t.Fatalf("whole range: %v", err)
	}
	tl := &Tile{N: 64, W: make([]byte, 2*68), WStride: 68, Rows: 2, X: x, XStride: 68, NX: 4, Out: make([]float32, 8), OutStride: 2, Prep: &p}
	if err := DotTile(Q8_0, tl); err == nil {
		t.Error("Prep for 5 rows on a 4-row tile: got nil error")
	}
	tl.NX = 5
	tl.Out = make([]float32, 10)
	if err := DotTile(Q4_0, tl); err == nil {
		t.Error("Q8_0 Prep on a Q4_0 tile: got nil error")
	}
}
