package quant

import (
	"encoding/binary"
	"fmt"
)

// Repacked Q4_0 rows: the layout DotTile's AVX2 decode kernel reads in place, made once
// when a model loads (RepackRows). Each group of eight blocks of a row (144 bytes, as in
// ggml's layout) holds the eight binary16 scales first, then four 32-byte pairs of
// blocks: byte j of pair p is level j of block 2p in its low nibble and level j of
// block 2p+1 in its high nibble (level j of a block being value j + 8). The row's last
// n/32 mod 8 blocks stay in ggml's layout. A repacked row has the same length as
// ggml's and stays where it was, so row r still starts at r·RowBytes.
//
// Only where the bytes lie changes: DotTile gives repacked rows exactly the bits
// VecDot gives the same rows in ggml's layout (each row's blocks are still summed in
// order, one FMA chain per row). What it buys on AVX2: a group's scales are one
// conversion, where ggml's layout needs eight inserts, and a pair of blocks' levels are
// one load's nibbles (docs/perf-cpu.md, "Repacked Q4_0").
const (
	repackBlocks = 8                        // blocks per repacked group
	repackBytes  = repackBlocks * q4_0Bytes // bytes of a group (144)
)

// RepackUsed reports whether DotTile on this CPU has kernels that read repacked rows of
// type t of n values faster than ggml's layout: a caller that keeps a weight repacked
// (RepackRows) hands its tiles to DotTile with Tile.Repacked set. It is Q4_0 with at
// least one group of eight blocks, on CPUs with AVX2 and without the AVX-512 tile
// kernels (which read ggml's layout and are faster there).
func RepackUsed(t Type, n int) bool {
	return repackKernels && t == Q4_0 && n > 0 && n%qk == 0 && n/qk >= repackBlocks
}

// RepackRows writes rows rows of n values of type t from src (ggml's layout, rows
// back to back) to dst in the repacked layout; dst and src are t.RowBytes(n)·rows bytes
// and must not overlap. It fails for a type other than Q4_0, n not a multiple of 32 or
// slices of the wrong size.
func RepackRows(t Type, dst, src []byte, rows, n int) error {
	rb, err := repackShape(t, len(dst), len(src), rows, n)
	if err != nil {
		return err
	}
	for r := 0; r < rows; r++ {
		repackRow(dst[r*rb:(r+1)*rb], src[r*rb:(r+1)*rb])
	}
	return nil
}

// UnrepackRows is RepackRows' inverse: rows repacked rows of n values from src back to
// ggml's layout in dst (same sizes and errors).
func UnrepackRows(t Type, dst, src []byte, rows, n int) error {
	rb, err := repackShape(t, len(dst), len(src), rows, n)
	if err != nil {
		return err
	}
	for r := 0; r < rows; r++ {
		unrepackRow(dst[r*rb:(r+1)*rb], src[r*rb:(r+1)*rb])
	}
	return nil
}

func repackShape(t Type, nd, ns, rows, n int) (int, error) {
	if t != Q4_0 {
		return 0, fmt.Errorf("quant: no repacked layout for %s (Q4_0 only)", t)
	}
	rb, err := t.RowBytes(n)
	if err != nil {
		return 0, err
	}
	if rows < 0 || nd != rb*rows || ns != rb*rows {
		return 0, fmt.Errorf("quant: repacking %d rows of %d %s values needs %d bytes each side, have %d and %d", rows, n, t, rb*rows, nd, ns)
	}
	return rb, nil
}

// The nibble masks of eight bytes at a time.
const (
	lowNibbles  = 0x0f0f0f0f0f0f0f0f
	highNibbles = 0xf0f0f0f0f0f0f0f0
)

// repackRow repacks one row (whole groups; the tail is copied). With a, b the quants of
// blocks 2p and 2p+1 (qs[j] = level j | level j+16 << 4), pair byte j < 16 is
// a[j]&15 | (b[j]&15)<<4 and pair byte j+16 is a[j]>>4 | b[j]&0xf0.
func repackRow(dst, src []byte) {
	g := len(src) / repackBytes
	for i := 0; i < g; i++ {
		s, d := src[i*repackBytes:(i+1)*repackBytes], dst[i*repackBytes:(i+1)*repackBytes]
		for b := 0; b < repackBlocks; b++ {
			d[2*b], d[2*b+1] = s[b*q4_0Bytes], s[b*q4_0Bytes+1]
		}
		for p := 0; p < repackBlocks/2; p++ {
			qa, qb := s[2*p*q4_0Bytes+2:], s[(2*p+1)*q4_0Bytes+2:]
			out := d[16+32*p:]
			for h := 0; h < 16; h += 8 {
				a, b := binary.LittleEndian.Uint64(qa[h:]), binary.LittleEndian.Uint64(qb[h:])
				binary.LittleEndian.PutUint64(out[h:], a&lowNibbles|(b&lowNibbles)<<4)
				binary.LittleEndian.PutUint64(out[16+h:], a>>4&lowNibbles|b&highNibbles)
			}
		}
	}
	copy(dst[g*repackBytes:], src[g*repackBytes:])
}

// unrepackRow is repackRow's inverse.
func unrepackRow(dst, src []byte) {
	g := len(src) / repackBytes
	for i := 0; i < g; i++ {
		s, d := src[i*repackBytes:(i+1)*repackBytes], dst[i*repackBytes:(i+1)*repackBytes]
		for b := 0; b < repackBlocks; b++ {
			d[b*q4_0Bytes], d[b*q4_0Bytes+1] = s[2*b], s[2*b+1]
		}
		for p := 0; p < repackBlocks/2; p++ {
			in := s[16+32*p:]
			qa, qb := d[2*p*q4_0Bytes+2:], d[(2*p+1)*q4_0Bytes+2:]
			for h := 0; h < 16; h += 8 {
				lo, hi := binary.LittleEndian.Uint64(in[h:]), binary.LittleEndian.Uint64(in[16+h:])
				binary.LittleEndian.PutUint64(qa[h:], lo&lowNibbles|(hi&lowNibbles)<<4)
				binary.LittleEndian.PutUint64(qb[h:], lo>>4&lowNibbles|hi&highNibbles)
			}
		}
	}
	copy(dst[g*repackBytes:], src[g*repackBytes:])
}

// dotTileRepackedGo runs a tile of repacked rows through ggml's layout: each row
// unrepacked, then VecDot (CPUs without the repacked kernels; tests).
func dotTileRepackedGo(dot func(int, []byte, []byte) float32, tl *Tile) {
	rb := q4_0Bytes * (tl.N / qk)
	row := make([]byte, rb)
	for r := 0; r < tl.Rows; r++ {
		unrepackRow(row, tl.W[r*tl.WStride:r*tl.WStride+rb])
		for t := 0; t < tl.NX; t++ {
			tl.Out[t*tl.OutStride+r] = dot(tl.N, row, tl.X[t*tl.XStride:])
		}
	}
}
