// Head-width copies (head_pad.h): one thread per destination element, grid-stride. Memory bound
// and small (a layer's q/k/v of the step, and its attention output) next to the GEMMs around them.
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/head_pad.h"

namespace ninfer::cuda {
namespace {

template <typename T>
__global__ void copy_heads_kernel(const T* src, int src_ld, int src_dim, T* dst, int dst_ld, int dst_dim,
                                  int n_heads, size_t total) {
  const size_t row = size_t(n_heads) * dst_dim;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t t = i / row;
    const int r = int(i - t * row), h = r / dst_dim, c = r - h * dst_dim;
    dst[t * dst_ld + r] = c < src_dim ? src[t * src_ld + size_t(h) * src_dim + c] : T(0);
  }
}

template <typename T>
void launch_copy_heads(const T* src, int src_ld, int src_dim, T* dst, int dst_ld, int dst_dim, int n_tokens,
                       int n_heads, cudaStream_t s) {
  if (src_dim <= 0 || dst_dim <= 0 || n_heads <= 0 || n_heads * src_dim > src_ld || n_heads * dst_dim > dst_ld)
    throw std::runtime_error("copy_heads: heads of " + std::to_string(src_dim) + " -> " + std::to_string(dst_dim) +
                             " values do not fit rows of " + std::to_string(src_ld) + " -> " +
                             std::to_string(dst_ld));
  const size_t total = size_t(n_tokens) * n_heads * dst_dim;
  if (total == 0) return;
  const size_t blocks = (total + 255) / 256;
  copy_heads_kernel<T><<<unsigned(blocks < 65536 ? blocks : 65536), 256, 0, s>>>(src, src_ld, src_dim, dst, dst_ld,
                                                                                  dst_dim, n_heads, total);
  NINFER_CUDA_LAUNCH_CHECK();
}

}  // namespace

void launch_copy_heads_f32(const float* src, int src_ld, int src_dim, float* dst, int dst_ld, int dst_dim,
                           int n_tokens, int n_heads, cudaStream_t s) {
  launch_copy_heads(src, src_ld, src_dim, dst, dst_ld, dst_dim, n_tokens, n_heads, s);
}

void launch_copy_heads_bf16(const uint16_t* src, int src_ld, int src_dim, uint16_t* dst, int dst_ld, int dst_dim,
                            int n_tokens, int n_heads, cudaStream_t s) {
  launch_copy_heads(src, src_ld, src_dim, dst, dst_ld, dst_dim, n_tokens, n_heads, s);
}

}  // namespace ninfer::cuda
