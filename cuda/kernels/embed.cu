// embed.cu: dst[i][c] = dequantized table row ids[i]. Grid (ceil(cols/256), nt), 256 threads.
#include "common.cuh"

template <int T>
static __device__ void embed(const void *q, const void *d, const void *e, const int *ids, float *dst,
                             int rows, int cols, int *err) {
    const int i = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    const int id = ids[i];
    if (id < 0 || id >= rows) {
        if (c == 0) set_error(err, ERR_EMBED_ID, id);
        dst[(i64)i * cols + c] = 0.0f;
        return;
    }
    dst[(i64)i * cols + c] = wval<T>(q, d, e, id, c, cols);
}

#define EMBED(name, T)                                                                              \
    extern "C" __global__ void embed_##name(const void *q, const void *d, const void *e, const int *ids, \
                                            float *dst, int rows, int cols, int *err) { grid_dep_sync();             \
        embed<T>(q, d, e, ids, dst, rows, cols, err);                                               \
    }
// The per-type instantiations (EMBED/DEQUANT/MMVQ lines) are appended at compile time
// from the weight-type table, core/backend/cuda/types.go.
