// Element-wise and row-wise kernels of the forward pass; interface and layouts in ops.h.
// They follow the CPU reference (backend/cpu/cpu_ops.cpp) operation by operation: RMSNorm
// sums squares in fp64 and forms 1/sqrt(mean + eps) in fp32; rope forms the angle in fp32
// and takes cos/sin in fp64, as the CPU does.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/ops.h"

namespace ninfer::cuda {
namespace {

__global__ void embed_kernel(const int32_t* ids, const uint16_t* embed, float* x, int hidden) {
  const int t = blockIdx.x;
  const uint16_t* row = embed + size_t(ids[t]) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) x[size_t(t) * hidden + i] = bf16_bits_to_f32(row[i]);
}

__device__ __forceinline__ void store_act(uint16_t* out, size_t hi_idx, size_t lo_idx, float v, bool split) {
  const uint16_t hi = f32_to_bf16_bits(v);
  out[hi_idx] = hi;
  if (split) out[lo_idx] = f32_to_bf16_bits(v - bf16_bits_to_f32(hi));
}

// One block of 256 threads per row.
__global__ void rmsnorm_kernel(const float* x, const int32_t* rows, const float* weight, uint16_t* out,
                               int n_rows, int dim, float eps, bool split) {
  const int r = blockIdx.x;
  const float* xr = x + size_t(rows ? rows[r] : r) * dim;
  double ss = 0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += double(xr[i]) * xr[i];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ double part[32];
  __shared__ float inv_s;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) part[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    for (int w = 0; w < int(blockDim.x / 32); ++w) t += part[w];
    inv_s = 1.0f / sqrtf(float(t / dim) + eps);
  }
  __syncthreads();
  const float inv = inv_s;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = weight[i] * (xr[i] * inv);
    store_act(out, size_t(r) * dim + i, size_t(n_rows + r) * dim + i, v, split);
  }
}

// One warp per (token, head) over the q heads then the k heads.
__global__ void qk_norm_rope_kernel(float* qkv, int ld, const int32_t* pos, int n_tokens, int n_heads,
                                    int n_kv_heads, int head_dim, const float* q_norm, const float* k_norm,
                                    float eps, const float* inv_freq) {
  const int warps_per_block = blockDim.x / 32;
  const int item = blockIdx.x * warps_per_block + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int heads = n_heads + n_kv_heads;
  if (item >= n_tokens * heads) return;
  const int t = item / heads, h = item % heads;
  float* x = qkv + size_t(t) * ld + size_t(h) * head_dim;  // k heads follow the q heads
  const float* nw = h < n_heads ? q_norm : k_norm;
  if (nw) {
    double ss = 0;
    for (int i = lane; i < head_dim; i += 32) ss += double(x[i]) * x[i];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = 1.0f / sqrtf(float(ss / head_dim) + eps);
    for (int i = lane; i < head_dim; i += 32) x[i] = nw[i] * (x[i] * inv);
    __syncwarp();
  }
  const int half = head_dim / 2;
  const float p = float(pos[t]);
  for (int i = lane; i < half; i += 32) {
    const float ang = p * inv_freq[i];
    const float c = float(cos(double(ang))), s = float(sin(double(ang)));
    const float a = x[i], b = x[i + half];
    x[i] = a * c - b * s;
    x[i + half] = b * c + a * s;
  }
}

__global__ void silu_mul_kernel(const float* gu, uint16_t* out, int n_tokens, int ffn, bool split) {
  const size_t n = size_t(n_tokens) * ffn;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t t = i / ffn, j = i % ffn;
    const float g = gu[t * 2 * ffn + j], u = gu[t * 2 * ffn + ffn + j];
    store_act(out, i, n + i, g / (1.0f + expf(-g)) * u, split);
  }
}

__global__ void add_bias_kernel(float* y, const float* bias, int n_rows, int n) {
  const size_t total = size_t(n_rows) * n;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x)
    y[i] += bias[i % n];
}

__global__ void gemm_epilogue_kernel(const float* tmp, int halves, float* dst, const float* bias, int n_rows, int n,
                                     bool accumulate) {
  const size_t total = size_t(n_rows) * n;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    float v = tmp[i];
    if (halves == 2) v += tmp[total + i];
    if (bias) v += bias[i % n];
    dst[i] = accumulate ? dst[i] + v : v;
  }
}

int grid_for(size_t n, int threads) {
  const size_t b = (n + threads - 1) / threads;
  return int(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

}  // namespace

void launch_embed(const int32_t* ids, const uint16_t* embed, float* x, int n_tokens, int hidden, cudaStream_t s) {
  embed_kernel<<<n_tokens, 256, 0, s>>>(ids, embed, x, hidden);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_rmsnorm_bf16(const float* x, const int32_t* rows, const float* weight, uint16_t* out, int n_rows, int dim,
                         float eps, bool split, cudaStream_t s) {
  rmsnorm_kernel<<<n_rows, 256, 0, s>>>(x, rows, weight, out, n_rows, dim, eps, split);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_qk_norm_rope(float* qkv, int ld, const int32_t* pos, int n_tokens, int n_heads, int n_kv_heads,
                         int head_dim, const float* q_norm, const float* k_norm, float eps, const float* inv_freq,
                         cudaStream_t s) {
  const int items = n_tokens * (n_heads + n_kv_heads);
  constexpr int kWarps = 8;
  qk_norm_rope_kernel<<<(items + kWarps - 1) / kWarps, kWarps * 32, 0, s>>>(
      qkv, ld, pos, n_tokens, n_heads, n_kv_heads, head_dim, q_norm, k_norm, eps, inv_freq);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_silu_mul_bf16(const float* gu, uint16_t* out, int n_tokens, int ffn, bool split, cudaStream_t s) {
  silu_mul_kernel<<<grid_for(size_t(n_tokens) * ffn, 256), 256, 0, s>>>(gu, out, n_tokens, ffn, split);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_add_bias(float* y, const float* bias, int n_rows, int n, cudaStream_t s) {
  add_bias_kernel<<<grid_for(size_t(n_rows) * n, 256), 256, 0, s>>>(y, bias, n_rows, n);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_gemm_epilogue(const float* tmp, int halves, float* dst, const float* bias, int n_rows, int n,
                          bool accumulate, cudaStream_t s) {
  gemm_epilogue_kernel<<<grid_for(size_t(n_rows) * n, 256), 256, 0, s>>>(tmp, halves, dst, bias, n_rows, n,
                                                                         accumulate);
  NINFER_CUDA_LAUNCH_CHECK();
}

}  // namespace ninfer::cuda
