package quant

import "fmt"

// Tile is one block of a matrix product for DotTile: Rows weight rows against NX
// activation rows, each dot of N values.
//
//	Out[t*OutStride + r] = VecDot(N, W[r*WStride:], X[t*XStride:])   for r < Rows, t < NX
//
// W rows hold N values of the weight type; X rows hold N values of its VecDotType (as
// FromFloat writes them). Out is written, never read. The caller owns every slice; DotTile
// keeps none of them.
type Tile struct {
	N int // values per row

	W       []byte // weight rows
	WStride int    // bytes from one weight row to the next (≥ the row's bytes)
	Rows    int    // number of weight rows

	X       []byte // activation rows, already converted to the VecDotType
	XStride int    // bytes from one activation row to the next
	NX      int    // number of activation rows

	Out       []float32 // results, Out[t*OutStride + r]
	OutStride int       // ≥ Rows
}

// DotTile computes every dot of the tile with exactly the bits VecDot gives for each
// pair, so a matmul may hand whole chunks of rows to one call without changing its
// results (the row identity of the CPU backend). Where a tile kernel exists (Q8_0, Q4_0,
// Q5_0, Q4_K from 2 activation rows, Q6_K from 16, on CPUs with AVX-512 VNNI) it runs
// several dot chains at once and unpacks each weight block once for all activation
// rows: 1.2-3× VecDot at 2 rows, 2-3× at 64 (docs/perf-quant.md). With one activation
// row the Q8_0, Q4_0 and Q5_0 kernels run two weight rows side by side in a zmm
// (10-20 % less time than VecDot, docs/perf-cpu.md); otherwise it loops over VecDot. Hand it the whole
// chunk of weight rows a worker owns and all activation rows: the activations are
// prepared once per call. Safe for concurrent use on disjoint outputs. It fails for a
// type without a dot kernel or slices too short for the shape.
func DotTile(t Type, tl *Tile) error {
	tr, ok := table[t]
	if !ok || tr.VecDot == nil {
		return fmt.Errorf("quant: no dot kernel for %s", t)
	}
	if err := tl.check(t, tr.VecDotType); err != nil {
		return err
	}
	if tl.Rows == 0 || tl.NX == 0 {
		return nil
	}
	if k := tileKernels[t]; k != nil {
		k(tl)
		return nil
	}
	dotTileGo(tr.VecDot, tl)
	return nil
}

func dotTileGo(dot func(int, []byte, []byte) float32, tl *Tile) {
	for t := 0; t < tl.NX; t++ {
		x := tl.X[t*tl.XStride:]
		out := tl.Out[t*tl.OutStride:]
		for r := 0; r < tl.Rows; r++ {
			out[r] = dot(tl.N, tl.W[r*tl.WStride:], x)
		}
	}
}

func (tl *Tile) check(t, vdt Type) error {
	wb, err := t.RowBytes(tl.N)
	if err != nil {
		return err
	}
	xb, err := vdt.RowBytes(tl.N)
	if err != nil {
		return err
	}
	bad := func(what string, have, need int) error {
		return fmt.Errorf("quant: %s tile of %d×%d rows of %d values: %s is %d, need %d", t, tl.Rows, tl.NX, tl.N, what, have, need)
	}
	switch {
	case tl.Rows < 0 || tl.NX < 0:
		return fmt.Errorf("quant: %s tile: negative shape %d×%d", t, tl.Rows, tl.NX)
	case tl.Rows == 0 || tl.NX == 0:
		return nil
	case tl.WStride < wb:
		return bad("weight stride", tl.WStride, wb)
	case tl.XStride < xb:
		return bad("activation stride", tl.XStride, xb)
	case tl.OutStride < tl.Rows:
		return bad("output stride", tl.OutStride, tl.Rows)
	case len(tl.W) < (tl.Rows-1)*tl.WStride+wb:
		return bad("len(W)", len(tl.W), (tl.Rows-1)*tl.WStride+wb)
	case len(tl.X) < (tl.NX-1)*tl.XStride+xb:
		return bad("len(X)", len(tl.X), (tl.NX-1)*tl.XStride+xb)
	case len(tl.Out) < (tl.NX-1)*tl.OutStride+tl.Rows:
		return bad("len(Out)", len(tl.Out), (tl.NX-1)*tl.OutStride+tl.Rows)
	}
	return nil
}
