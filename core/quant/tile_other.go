//go:build !amd64

package quant

// tileKernels is empty: DotTile loops over VecDot.
var tileKernels = map[Type]func(*Tile){}

// tilePrepSize is 0: no kernel takes prepared rows.
func tilePrepSize(t Type, n, nx int) int { return 0 }

func prepareRows(p *TilePrep, x []byte, xStride, lo, hi int) {
	panic("BUG: quant: prepareRows without tile kernels")
}

// hasTileZ is false: there are no AVX-512 tile kernels off amd64.
const hasTileZ = false

// No tile kernel takes activation rows or weight scales off amd64.
const tileMinRows, tileDirectMaxPairs = 0, 0
