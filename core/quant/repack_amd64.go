package quant

// repackKernels: RepackUsed's CPUs, where the repacked Q4_0 decode kernel is faster than
// the kernels of ggml's layout. On CPUs with the AVX-512 tile kernels DotTile still runs
// repacked tiles (with the AVX2 kernels below: the tests exercise them there), but a
// caller is not told to repack.
var repackKernels = hasAVX2 && !hasTileZ

// repackTile runs a Q4_0 tile of repacked rows (checked); nil without AVX2.
var repackTile func(*Tile)

func init() {
	if hasAVX2 {
		repackTile = tileRepackedAVX2
	}
}

var unpackedQ4_0R = unpackedKernels{unpack: unpackRowsRQ4_0AVX2, prep: prepBias4Q4_0AVX2, repacked: true}

// tileRepackedAVX2: from eight activation rows (a prompt), tileUnpackedAVX2 with the
// repacked rows' unpacker; fewer rows go to tileRepackedSmallAVX2.
func tileRepackedAVX2(tl *Tile) {
	if tl.NX >= 4*unpackedMinGroups && tl.Rows >= 2 && tl.N >= qk {
		tileUnpackedAVX2(tl, &unpackedQ4_0R)
		return
	}
	tileRepackedSmallAVX2(tl)
}

// tileRepackedSmallAVX2 runs a repacked tile of any shape one activation row at a time
// with the repacked decode kernel (rows4rQ4_0AVX2; a last rows%4 weight rows written
// back in ggml's layout for rowsQ4_0AVX2). Two to seven activation rows (a speculative
// verify, batched decoding) pass over the tile's weights while they are in L2: 256 rows
// of 4864 values (AMD EPYC, AVX2), two rows 58 µs this way, against 70 through
// rows4x2Q4_0AVX2 on ggml's layout and 90 writing the rows back to ggml's layout for it.
func tileRepackedSmallAVX2(tl *Tile) {
	nb := tl.N / qk
	if nb == 0 {
		for t := 0; t < tl.NX; t++ {
			clear(tl.Out[t*tl.OutStride : t*tl.OutStride+tl.Rows])
		}
		return
	}
	r4 := tl.Rows &^ 3
	var wu []byte
	if r4 < tl.Rows {
		s := tileScratchPool.Get().(*tileScratch)
		defer tileScratchPool.Put(s)
		rb := nb * q4_0Bytes
		s.wu = grow(s.wu, (tl.Rows-r4)*rb)
		wu = s.wu
		unrepackAVX2(wu, tl.W[r4*tl.WStride:], tl.WStride, tl.Rows-r4, nb)
	}
	for t := 0; t < tl.NX; t++ {
		x, out := &tl.X[t*tl.XStride], tl.Out[t*tl.OutStride:]
		if r4 > 0 {
			rows4rQ4_0AVX2(&tl.W[0], tl.WStride, r4, x, nb, &out[0])
		}
		if wu != nil {
			rowsQ4_0AVX2(&wu[0], nb*q4_0Bytes, tl.Rows-r4, x, nb, &out[r4])
		}
	}
}

// unrepackAVX2 writes rows repacked rows of nb blocks (wStride bytes apart in w) to dst
// in ggml's layout, back to back.
func unrepackAVX2(dst, w []byte, wStride, rows, nb int) {
	rb := nb * q4_0Bytes
	_ = dst[rows*rb-1]
	_ = w[(rows-1)*wStride+rb-1]
	g := nb / repackBlocks
	if g > 0 {
		unrepackQ4_0AVX2(&w[0], wStride, rows, g, &dst[0], rb)
	}
	if t := g * repackBytes; t < rb {
		for r := 0; r < rows; r++ {
			copy(dst[r*rb+t:(r+1)*rb], w[r*wStride+t:r*wStride+rb])
		}
	}
}
