//go:build !amd64

package quant

// tileKernels is empty where no SIMD tile kernels exist: DotTile loops over VecDot.
var tileKernels = map[Type]func(*Tile){}
