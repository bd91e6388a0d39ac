package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotTileWScales checks the in-place Q8_0 kernel (Tile.WScales): every result has
// VecDot's bits, at every activation row count it takes (2-8, with and without
// prepared rows) and past it, for weight row counts that end in steps of four, two and
// one rows, odd and even block counts, strides longer than a row.
func TestDotTileWScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	tr, _ := Q8_0.Lookup()
	for _, sh := range []struct{ n, rows int }{{512, 16}, {928, 7}, {32, 5}, {4864, 11}, {96, 1}, {64, 2}} {
		for nx := 1; nx <= 2*tileDirectMaxPairs+2; nx++ {
			for _, prepared := range []bool{false, true} {
				wb := mustRowBytes(t, Q8_0, sh.n)
				xb := mustRowBytes(t, tr.VecDotType, sh.n)
				tl := &Tile{N: sh.n, Rows: sh.rows, NX: nx, WStride: wb + 6, XStride: xb + 5, OutStride: sh.rows + 3}
				tl.W = make([]byte, sh.rows*tl.WStride)
				tl.X = make([]byte, nx*tl.XStride)
				for r := 0; r < sh.rows; r++ {
					copy(tl.W[r*tl.WStride:], randomRow(rng, Q8_0, sh.n))
				}
				for i := 0; i < nx; i++ {
					copy(tl.X[i*tl.XStride:], randomRow(rng, tr.VecDotType, sh.n))
				}
				tl.WScales = TileScales(Q8_0, tl.W, tl.WStride, sh.rows, sh.n)
				if tl.WScales == nil {
					t.Skip("no AVX-512 tile kernels on this CPU: TileScales is nil")
				}
				var p TilePrep
				if prepared && p.Reset(Q8_0, sh.n, nx) {
					if err := p.PrepareRows(tl.X, tl.XStride, 0, nx); err != nil {
						t.Fatal(err)
					}
					tl.Prep = &p
				}
				tl.Out = make([]float32, nx*tl.OutStride)
				for i := range tl.Out {
					tl.Out[i] = float32(math.NaN())
				}
				if err := DotTile(Q8_0, tl); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < nx; i++ {
					for r := 0; r < sh.rows; r++ {
						want := tr.VecDot(sh.n, tl.W[r*tl.WStride:], tl.X[i*tl.XStride:])
						if got := tl.Out[i*tl.OutStride+r]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%d×%d rows of %d, %d activation rows (prepared %v): out[%d][%d] = %v, want VecDot's %v",
								sh.rows, nx, sh.n, nx, tl.Prep != nil, i, r, got, want)
						}
					}
					for r := sh.rows; r < tl.OutStride && i*tl.OutStride+r < len(tl.Out); r++ {
						if v := tl.Out[i*tl.OutStride+r]; !math.IsNaN(float64(v)) {
							t.Fatalf("%d×%d rows of %d: out[%d][%d], past the tile's rows, written (%v)", sh.rows, nx, sh.n, i, r, v)
						}
					}
				}
			}
		}
	}
	// Scales that do not cover the rows are an error, not a read past them.
	tl := &Tile{N: 64, W: make([]byte, 5*68), WStride: 68, Rows: 5, X: make([]byte, 2*68), XStride: 68, NX: 2,
		Out: make([]float32, 10), OutStride: 5, WScales: make([]float32, 8)}
	if err := DotTile(Q8_0, tl); err == nil {
		t.Error("WScales too short for 5 rows: got nil error")
	}
	tl.WScales = make([]float32, 16)
	if err := DotTile(Q4_0, &Tile{N: 64, W: make([]byte, 5*36), WStride: 36, Rows: 5, X: make([]byte, 2*68), XStride: 68, NX: 2,
		Out: make([]float32, 10), OutStride: 5, WScales: tl.WScales}); err == nil {
		t.Error("WScales on a Q4_0 tile: got nil error")
	}
}

// BenchmarkDotTileScales is BenchmarkDotTile's Q8_0 tile (256 rows of 4864 values)
// and the trained target's 256×512 at the activation row counts of batched decoding,
// unpacking the weights per call (unpack) or reading them in place (wscales).
func BenchmarkDotTileScales(b *testing.B) {
	tr, _ := Q8_0.Lookup()
	for _, n := range []int{4864, 512} {
		for _, nx := range []int{2, 4, 6, 8, 10} {
			for _, path := range []string{"unpack", "wscales"} {
				b.Run(itoa(n)+"/"+itoa(nx)+"/"+path, func(b *testing.B) {
					rng := rand.New(rand.NewPCG(3, 3))
					const rows = 256
					wb := mustRowBytes(b, Q8_0, n)
					xb := mustRowBytes(b, tr.VecDotType, n)
					tl := &Tile{N: n, Rows: rows, NX: nx, WStride: wb, XStride: xb, OutStride: rows,
						W: randomRow(rng, Q8_0, n*rows), X: randomRow(rng, tr.VecDotType, n*nx), Out: make([]float32, rows*nx)}
					if path == "wscales" {
						if tl.WScales = TileScales(Q8_0, tl.W, wb, rows, n); tl.WScales == nil {
							b.Skip("no AVX-512 tile kernels")
						}
					}
					for i := 0; i < b.N; i++ {
						if err := DotTile(Q8_0, tl); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
