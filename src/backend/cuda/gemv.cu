// Small-batch bf16 GEMV (ops.h launch_gemv_bf16). Each warp owns kRowsPerWarp output
// columns n; lanes walk k in 8-element (16-byte) chunks, four chunks in flight per column, and
// the x rows are read through L1 (they are reused by every warp of the block). Partial dot
// products are reduced across the warp at the end.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/ops.h"

namespace ninfer::cuda {
namespace {

constexpr int kWarps = 8, kRowsPerWarp = 2, kUnroll = 4;

__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float f[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

template <int T>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const uint16_t* __restrict__ w, const uint16_t* __restrict__ x,
                                                          float* __restrict__ y, int n, int k, bool accumulate,
                                                          float alpha, const int32_t* __restrict__ experts,
                                                          size_t expert_stride, int x_div) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (experts) {  // gathered rows (T == 1): row blockIdx.y uses expert experts[row] and x row row / x_div
    const int row = blockIdx.y;
    w += size_t(experts[row]) * expert_stride;
    x += size_t(row / x_div) * k;
    y += size_t(row) * n;
  }
  const int n0 = (blockIdx.x * kWarps + warp) * kRowsPerWarp;
  if (n0 >= n) return;
  float acc[kRowsPerWarp][T];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;
  const int chunks = k / 8;
  const uint4* wr[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
    wr[r] = reinterpret_cast<const uint4*>(w + size_t(min(n0 + r, n - 1)) * k);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  for (int c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
    uint4 wv[kUnroll][kRowsPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int c = c0 + u * 32;
        wv[u][r] = c < chunks ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * 32;
      if (c >= chunks) break;
#pragma unroll
      for (int t = 0; t < T; ++t) {
        float xf[8];
        bf16x8_to_f32(__ldg(xr + size_t(t) * chunks + c), xf);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          float wf[8];
          bf16x8_to_f32(wv[u][r], wf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r][t] += wf[i] * xf[i];
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0 && n0 + r < n) {
        float* dst = y + size_t(t) * n + n0 + r;
        *dst = accumulate ? *dst + alpha * v : alpha * v;
      }
    }
}

template <int T>
void launch_t(const uint16_t* w, const uint16_t* x, float* y, int n, int k, bool acc, float alpha, cudaStream_t s) {
  const int per_block = kWarps * kRowsPerWarp;
  gemv_kernel<T><<<(n + per_block - 1) / per_block, kWarps * 32, 0, s>>>(w, x, y, n, k, acc, alpha, nullptr, 0, 1);
  NINFER_CUDA_LAUNCH_CHECK();
}

}  // namespace

void launch_gemv_bf16(const uint16_t* w, const uint16_t* x, float* y, int n_rows, int n, int k, bool accumulate,
                      cudaStream_t s, float alpha) {
  if (k % 8 != 0 || n_rows < 1 || n_rows > kGemvMaxRows)
    throw std::runtime_error("launch_gemv_bf16: k must be a multiple of 8 and 1 <= rows <= 8");
  switch (n_rows) {
    case 1: launch_t<1>(w, x, y, n, k, accumulate, alpha, s); break;
    case 2: launch_t<2>(w, x, y, n, k, accumulate, alpha, s); break;
    case 3: launch_t<3>(w, x, y, n, k, accumulate, alpha, s); break;
    case 4: launch_t<4>(w, x, y, n, k, accumulate, alpha, s); break;
    case 5: launch_t<5>(w, x, y, n, k, accumulate, alpha, s); break;
    case 6: launch_t<6>(w, x, y, n, k, accumulate, alpha, s); break;
    case 7: launch_t<7>(w, x, y, n, k, accumulate, alpha, s); break;
    default: launch_t<8>(w, x, y, n, k, accumulate, alpha, s); break;
  }
}

void launch_gemv_gathered_bf16(const uint16_t* w, size_t expert_stride, const int32_t* experts, const uint16_t* x,
                               int x_div, float* y, int n_rows, int n, int k, cudaStream_t s) {
  if (k % 8 != 0 || n_rows < 1 || x_div < 1)
    throw std::runtime_error("launch_gemv_gathered_bf16: k must be a multiple of 8, rows >= 1");
  const int per_block = kWarps * kRowsPerWarp;
  gemv_kernel<1><<<dim3((n + per_block - 1) / per_block, n_rows), kWarps * 32, 0, s>>>(w, x, y, n, k, false, 1.0f,
                                                                                      experts, expert_stride, x_div);
  NINFER_CUDA_LAUNCH_CHECK();
}

}  // namespace ninfer::cuda
