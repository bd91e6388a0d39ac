// mmvq.cu: mat-vec products dst[j][row] = w[row] · x[j] for NT = 1..8 activation rows.
// One warp owns one weight row (mmvq_KERNEL_NT) or two (mmvq_KERNELw_NT); lane l handles
// units l, l+32, … of the row (a unit is a fixed slice of blocks, per type below), keeps
// one accumulator per activation row and the warp sums them with a fixed xor tree.
// Weights are read once for all NT rows. The work and summation order of row j never
// depend on NT or on the rows per warp, so each row of an NT-row call has the bits of a
// 1-row call. A non-null bias is added to each output (the fused AddBias of the backend).
//
// Each type T has R and load (a weight unit), X and loadx (the activations of a unit)
// and fold (acc plus their dot product; common.cuh's fold1/foldk for the quantized
// types, which mmq.cu uses too, so a row has the same bits there).
//
// Quantized types dot int8 weights against activations quantized by quantize.cu
// (int8 + one float scale per 32 values) with dp4a; F16/F32 weights use f32 activations.
//
// The machinery (Args, the activation loaders, mmvq_rows, mmvq_rope and the kernel
// macros) is in mmvq.cuh, which mmvk.cu (issue 25's types) instantiates too; the traits
// (below) are in mmvq_traits.cuh, which mmvp.cu (the prologue kernels) includes too.
#include "mmvq_traits.cuh"

// The per-type instantiations (EMBED/DEQUANT/MMVQ lines) are appended at compile time
// from the weight-type table, core/backend/cuda/types.go.
