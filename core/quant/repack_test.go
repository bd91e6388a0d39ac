package quant

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRepackRoundTrip checks that UnrepackRows gives back RepackRows' input and that
// the repacked layout is the documented one (scales first, pairs of blocks' levels in
// the nibbles of one byte).
func TestRepackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, n := range []int{32, 256, 288, 896, 4864} {
		rows := 3
		rb := mustRowBytes(t, Q4_0, n)
		src := randomRow(rng, Q4_0, n*rows)
		rep := make([]byte, len(src))
		if err := RepackRows(Q4_0, rep, src, rows, n); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, len(src))
		if err := UnrepackRows(Q4_0, back, rep, rows, n); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, src) {
			t.Fatalf("n=%d: UnrepackRows(RepackRows(x)) != x", n)
		}
		if n/qk < repackBlocks {
			if !bytes.Equal(rep, src) {
				t.Fatalf("n=%d: a row without a whole group changed", n)
			}
			continue
		}
		// Block 3 of row 1 (the high nibbles of pair 1) and its scale.
		row, rrow := src[rb:], rep[rb:]
		blk := row[3*q4_0Bytes:]
		if rrow[6] != blk[0] || rrow[7] != blk[1] {
			t.Fatalf("n=%d: scale of block 3 not at bytes 6-7 of the group", n)
		}
		for j := 0; j < qk; j++ {
			if got, want := int32(rrow[16+32+j]>>4), q4Value(blk[2:], j, 0); got != want {
				t.Fatalf("n=%d: level %d of block 3 = %d, want %d", n, j, got, want)
			}
		}
	}
	if err := RepackRows(Q8_0, make([]byte, 34), make([]byte, 34), 1, 32); err == nil {
		t.Error("Q8_0: got nil error")
	}
	if err := RepackRows(Q4_0, make([]byte, 17), make([]byte, 18), 1, 32); err == nil {
		t.Error("short dst: got nil error")
	}
}

// TestDotTileRepackedMatchesVecDot checks that DotTile on repacked rows gives VecDot's
// bits on the same rows in ggml's layout, through each path of the repacked tiles (one
// activation row with 4k and 4k+r weight rows, 2-7 rows through ggml's layout again,
// from 8 rows the unpacked kernel with an odd last weight row and rows past the last
// group of four), with the AVX2 kernels on any CPU that has AVX2 and the pure-Go
// fallback always.
func TestDotTileRepackedMatchesVecDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	tr, _ := Q4_0.Lookup()
	shapes := []struct{ n, rows, nx int }{
		{256, 4, 1}, {896, 8, 1}, {928, 7, 1}, {4864, 13, 1}, {288, 1, 1}, {64, 6, 1},
		{896, 9, 2}, {928, 6, 5}, {256, 5, 7},
		{896, 10, 8}, {928, 7, 11}, {4864, 6, 13}, {64, 5, 9},
	}
	paths := map[string]func(*Tile){"DotTile": func(tl *Tile) {
		if err := DotTile(Q4_0, tl); err != nil {
			t.Fatal(err)
		}
	}, "go": func(tl *Tile) { dotTileRepackedGo(tr.VecDot, tl) }}
	for name, run := range paths {
		for _, sh := range shapes {
			t.Run(name+"/"+itoa(sh.n)+"x"+itoa(sh.rows)+"x"+itoa(sh.nx), func(t *testing.T) {
				rb := mustRowBytes(t, Q4_0, sh.n)
				xb := mustRowBytes(t, Q8_0, sh.n)
				w := randomRow(rng, Q4_0, sh.n*sh.rows)
				rep := make([]byte, len(w))
				if err := RepackRows(Q4_0, rep, w, sh.rows, sh.n); err != nil {
					t.Fatal(err)
				}
				tl := &Tile{N: sh.n, Rows: sh.rows, NX: sh.nx, W: rep, WStride: rb, X: randomRow(rng, Q8_0, sh.n*sh.nx),
					XStride: xb, Out: make([]float32, sh.nx*(sh.rows+1)), OutStride: sh.rows + 1, Repacked: true}
				run(tl)
				for i := 0; i < sh.nx; i++ {
					for r := 0; r < sh.rows; r++ {
						want := tr.VecDot(sh.n, w[r*rb:], tl.X[i*xb:])
						if got := tl.Out[i*tl.OutStride+r]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("out[%d][%d] = %v, want VecDot's %v", i, r, got, want)
						}
					}
				}
			})
		}
	}
	tl := &Tile{N: 32, Rows: 1, NX: 1, W: make([]byte, 34), WStride: 34, X: make([]byte, 34), XStride: 34,
		Out: make([]float32, 1), OutStride: 1, Repacked: true}
	if err := DotTile(Q8_0, tl); err == nil {
		t.Error("repacked Q8_0 tile: got nil error")
	}
}
