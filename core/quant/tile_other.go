//go:build !amd64

package quant

// tileKernels is empty: DotTile loops over VecDot.
var tileKernels = map[Type]func(*Tile){}
