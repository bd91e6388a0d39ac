// mmvp.cu: the one-row mat-vec kernels whose x comes from a prologue (mmvq.cuh
// MMVQP1R, MMVQRP; the backend's fuse.go): mmvq.cu's traits and machinery, compiled as
// a source of its own so NVRTC builds it beside mmvq.cu (in parallel) instead of
// lengthening mmvq.cu, the longest compile.
#include "mmvq_traits.cuh"

// The per-type instantiations (MMVQP/MMVQWP/MMVQRP lines) are appended at compile time
// from the weight-type table, core/backend/cuda/types.go.
