package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotTileMatchesVecDot checks that every tile result has exactly VecDot's bits, for
// shapes with odd counts and strides larger than a row.
func TestDotTileMatchesVecDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, typ := range dotTypes {
		tr, _ := typ.Lookup()
		shapes := []struct{ n, rows, nx int }{{256, 1, 1}, {512, 7, 3}, {768, 13, 9}, {2304, 5, 17}}
		if tr.BlockSize == 32 {
			// Rows that end in a partial group of eight blocks (29 and 2 blocks); steps
			// of sixteen, four, two and one weight rows (37 = 16+16+4+1, 23 = 16+4+2+1).
			shapes = append(shapes, struct{ n, rows, nx int }{928, 6, 5}, struct{ n, rows, nx int }{64, 3, 4},
				struct{ n, rows, nx int }{896, 37, 7}, struct{ n, rows, nx int }{320, 23, 64},
				// Odd block counts (one block before the two-block loop), one block.
				struct{ n, rows, nx int }{928, 20, 6}, struct{ n, rows, nx int }{32, 17, 5})
		}
		for _, sh := range shapes {
			t.Run(typ.String()+"/"+itoa(sh.n)+"x"+itoa(sh.rows)+"x"+itoa(sh.nx), func(t *testing.T) {
				wb := mustRowBytes(t, typ, sh.n)
				xb := mustRowBytes(t, tr.VecDotType, sh.n)
				tl := &Tile{N: sh.n, Rows: sh.rows, NX: sh.nx, WStride: wb + 3, XStride: xb + 5, OutStride: sh.rows + 2}
				tl.W = make([]byte, sh.rows*tl.WStride)
				tl.X = make([]byte, sh.nx*tl.XStride)
				for r := 0; r < sh.rows; r++ {
					copy(tl.W[r*tl.WStride:], randomRow(rng, typ, sh.n))
				}
				for i := 0; i < sh.nx; i++ {
					copy(tl.X[i*tl.XStride:], randomRow(rng, tr.VecDotType, sh.n))
				}
				tl.Out = make([]float32, sh.nx*tl.OutStride)
				if err := DotTile(typ, tl); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < sh.nx; i++ {
					for r := 0; r < sh.rows; r++ {
						want := tr.VecDot(sh.n, tl.W[r*tl.WStride:], tl.X[i*tl.XStride:])
						got := tl.Out[i*tl.OutStride+r]
						if math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("out[%d][%d] = %v, want VecDot's %v", i, r, got, want)
						}
					}
				}
			})
		}
	}
}

func TestDotTileErrors(t *testing.T) {
	ok := func() *Tile {
		return &Tile{N: 64, W: make([]byte, 2*68), WStride: 68, Rows: 2, X: make([]byte, 68), XStride: 68, NX: 1, Out: make([]float32, 2), OutStride: 2}
	}
	if err := DotTile(Q8_0, ok()); err != nil {
		t.Fatalf("valid tile: %v", err)
	}
	for name, mod := range map[string]func(*Tile){
		"short W":       func(tl *Tile) { tl.W = tl.W[:100] },
		"short X":       func(tl *Tile) { tl.X = tl.X[:60] },
		"short Out":     func(tl *Tile) { tl.Out = tl.Out[:1] },
		"small stride":  func(tl *Tile) { tl.WStride = 60 },
		"out stride":    func(tl *Tile) { tl.OutStride = 1 },
		"bad n":         func(tl *Tile) { tl.N = 48 },
		"negative rows": func(tl *Tile) { tl.Rows = -1 },
	} {
		tl := ok()
		mod(tl)
		if err := DotTile(Q8_0, tl); err == nil {
			t.Errorf("%s: got nil error", name)
		}
	}
	if err := DotTile(IQ2_XXS, ok()); err == nil {
		t.Error("type without kernel: got nil error")
	}
}

// BenchmarkDotTile measures tiles of 256 weight rows of 4864 values (one worker's share
// of a Qwen2.5-0.5B ffn_down) against 1, 2, 8 and 64 activation rows, with DotTile and
// with the VecDot loop it must equal. MB/s counts the weight bytes once per activation
// row, as VecDot's benchmark does.
func BenchmarkDotTile(b *testing.B) {
	const rows = 256
	for _, typ := range []Type{Q8_0, Q4_0, Q5_0, Q4_K, Q6_K} {
		tr, _ := typ.Lookup()
		for _, nx := range []int{1, 2, 8, 64} {
			for _, path := range []string{"tile", "vecdot"} {
				b.Run(typ.String()+"/"+itoa(nx)+"/"+path, func(b *testing.B) { benchTile(b, typ, tr, 4864, rows, nx, path) })
			}
		}
	}
	// The columns of the q, k, v, o, gate and up projections (ffn_down has 4864; a
	// Q4_K_M file has them in Q5_0, 896 not being a multiple of 256), at 64 rows
	// (prefill) and one (decoding); and the trained target's 512 columns, decoding.
	for _, typ := range []Type{Q8_0, Q4_0, Q5_0} {
		tr, _ := typ.Lookup()
		for _, nx := range []int{64, 1} {
			b.Run(typ.String()+"/896cols/"+itoa(nx)+"/tile", func(b *testing.B) { benchTile(b, typ, tr, 896, rows, nx, "tile") })
		}
	}
	tr, _ := Q8_0.Lookup()
	b.Run("Q8_0/512cols/1/tile", func(b *testing.B) { benchTile(b, Q8_0, tr, 512, rows, 1, "tile") })
	// Q4_0 rows repacked (RepackRows), against the "tile" figures above.
	tr, _ = Q4_0.Lookup()
	for _, n := range []int{4864, 896} {
		for _, nx := range []int{1, 2, 8, 64} {
			b.Run("Q4_0/"+itoa(n)+"cols/"+itoa(nx)+"/repacked", func(b *testing.B) { benchTile(b, Q4_0, tr, n, rows, nx, "repacked") })
		}
	}
}

func benchTile(b *testing.B, typ Type, tr *Traits, n, rows, nx int, path string) {
	rng := rand.New(rand.NewPCG(3, 3))
	wb := mustRowBytes(b, typ, n)
	xb := mustRowBytes(b, tr.VecDotType, n)
	tl := &Tile{N: n, Rows: rows, NX: nx, WStride: wb, XStride: xb, OutStride: rows,
		W: randomRow(rng, typ, n*rows), X: randomRow(rng, tr.VecDotType, n*nx), Out: make([]float32, rows*nx)}
	if path == "repacked" {
		rep := make([]byte, len(tl.W))
		if err := RepackRows(typ, rep, tl.W, rows, n); err != nil {
			b.Fatal(err)
		}
		tl.W, tl.Repacked, path = rep, true, "tile"
	}
	b.SetBytes(int64(wb * rows * nx))
	for i := 0; i < b.N; i++ {
		if path == "tile" {
			if err := DotTile(typ, tl); err != nil {
				b.Fatal(err)
			}
		} else {
			dotTileGo(tr.VecDot, tl)
		}
	}
}
