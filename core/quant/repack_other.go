//go:build !amd64

package quant

// No repacked kernels off amd64: RepackUsed is false and DotTile runs repacked tiles
// through ggml's layout.
const repackKernels = false

var repackTile func(*Tile)
