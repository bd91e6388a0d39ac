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

	// Prep, when not nil, holds X's rows already in the tile kernel's layout (see
	// TilePrep): DotTile then skips preparing them. It must have been Reset for this
	// tile's type, N and NX, and its rows prepared from this X.
	Prep *TilePrep

	// WScales, when not nil, holds W's block scales as TileScales returns them for
	// these rows (row 0 of the tile being row 0 of a group of four): a Q8_0 tile of 2 to
	// 2·tileDirectMaxPairs activation rows then reads the weights in place instead of
	// unpacking them first. The results are the same bits either way.
	WScales []float32

	// Repacked says W's rows are in the repacked layout (RepackRows; Q4_0 only). The
	// results are VecDot's bits for the same rows in ggml's layout.
	Repacked bool
}

// TileScalesUsed reports whether DotTile reads Tile.WScales for a tile of t weights,
// rows of n values and nx activation rows (so a caller can make TileScales only once
// it meets such a product).
func TileScalesUsed(t Type, n, nx int) bool {
	return hasTileZ && t == Q8_0 && n > 0 && n%qk == 0 && nx >= tileMinRows && (nx+1)/2 <= tileDirectMaxPairs
}

// TileScales returns the block scales of rows weight rows of n values (wStride bytes
// apart) in the layout DotTile's in-place Q8_0 kernel reads (Tile.WScales): per group
// of four rows g, block b's four scales at [(g·nb + b)·4 + i] (nb = n/32 blocks; the
// last group's missing rows 0), in float32. It is 4 bytes per 34-byte block (12 % of
// the weight's bytes); it returns nil where DotTile would not use them (other types, a
// CPU without the AVX-512 tile kernels, n not a multiple of 32).
func TileScales(t Type, w []byte, wStride, rows, n int) []float32 {
	if !TileScalesUsed(t, n, 2) || rows <= 0 {
		return nil
	}
	nb := n / qk
	s := make([]float32, (rows+3)/4*nb*4)
	for r := 0; r < rows; r++ {
		row := w[r*wStride:]
		base := r / 4 * nb * 4
		for b := 0; b < nb; b++ {
			s[base+b*4+r%4] = F16ToF32(uint16(row[b*34]) | uint16(row[b*34+1])<<8)
		}
	}
	return s
}

// TilePrep holds the activation rows of a matrix product prepared once, in the layout
// of the tile kernels, for all the DotTile calls over its chunks of weight rows (each
// call prepares them itself otherwise: ≈ 2 % of a 64-token prompt's forward on the
// CPU backend). Reset it for the product's shape, prepare all rows (PrepareRows, in
// parallel over disjoint ranges if wished), then set Tile.Prep in every chunk's tile.
// A TilePrep is reused across products; it is not safe for concurrent Reset.
type TilePrep struct {
	typ   Type
	n, nx int
	buf   []byte
}

// Reset sizes p for nx activation rows of n values to be dotted with weights of type t,
// and reports whether t's tile kernel takes prepared rows at that shape on this CPU.
// When it reports false, leave Tile.Prep nil: DotTile works from Tile.X alone.
func (p *TilePrep) Reset(t Type, n, nx int) bool {
	size := tilePrepSize(t, n, nx)
	if size == 0 {
		*p = TilePrep{buf: p.buf}
		return false
	}
	p.typ, p.n, p.nx = t, n, nx
	p.buf = grow(p.buf, size)
	return true
}

// PrepareRows prepares activation rows [lo, hi) of x: rows of N values of the weight
// type's VecDotType (as FromFloat writes them), xStride bytes apart, row 0 at x[0]. lo
// must be even and hi even or NX, so that ranges prepared concurrently never share a
// pair of rows. It fails when p was not Reset to a prepared shape, for a bad range or
// for x too short.
func (p *TilePrep) PrepareRows(x []byte, xStride, lo, hi int) error {
	if p.nx == 0 {
		return fmt.Errorf("quant: TilePrep.PrepareRows before a Reset that returned true")
	}
	if lo < 0 || lo%2 != 0 || hi <= lo || hi > p.nx || hi%2 != 0 && hi != p.nx {
		return fmt.Errorf("quant: TilePrep of %d rows: bad row range [%d, %d) (lo even, hi even or %d)", p.nx, lo, hi, p.nx)
	}
	tr := table[p.typ]
	xb, err := tr.VecDotType.RowBytes(p.n)
	if err != nil {
		return err
	}
	if xStride < xb || len(x) < (hi-lo-1)*xStride+xb {
		return fmt.Errorf("quant: TilePrep of %s rows of %d values: stride %d, %d bytes for %d rows (a row is %d bytes)", p.typ, p.n, xStride, len(x), hi-lo, xb)
	}
	prepareRows(p, x, xStride, lo, hi)
	return nil
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
	if ws := tl.WScales; ws != nil && (t != Q8_0 || tl.N%qk != 0 || len(ws) < (tl.Rows+3)/4*(tl.N/qk)*4) {
		return fmt.Errorf("quant: %s tile of %d×%d rows of %d values: %d weight scales do not fit it (Q8_0 only, TileScales' layout)", t, tl.Rows, tl.NX, tl.N, len(ws))
	}
	if p := tl.Prep; p != nil && (p.typ != t || p.n != tl.N || p.nx != tl.NX) {
		return fmt.Errorf("quant: %s tile of %d×%d rows of %d values: Prep was made for %d %s rows of %d values", t, tl.Rows, tl.NX, tl.N, p.nx, p.typ, p.n)
	}
	if tl.Repacked {
		if t != Q4_0 {
			return fmt.Errorf("quant: %s tile: no repacked layout for %s (Q4_0 only)", t, t)
		}
		if repackTile != nil {
			repackTile(tl)
		} else {
			dotTileRepackedGo(tr.VecDot, tl)
		}
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

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
