// Small-batch bf16 GEMV (ops.h launch_gemv_bf16, launch_gemv_gathered_bf16), launched as
// programmatic dependents (pdl_launches). A block of kWarps warps owns kWarps / S row pairs;
// the S warps of a pair split k between them (S = 1: one warp walks the whole row). Lanes walk
// k in 8-element (16-byte) chunks, kUnroll chunks in flight per row, and the x rows are read
// through L1 (every warp of the block reuses them). Each warp's partial dot products are
// reduced across the warp, then across the S warps in a fixed order (shared memory), so the
// result does not depend on scheduling.
//
// S is picked per launch: small matrices (attention projections, experts) give a grid of a few
// hundred blocks with one warp per row pair, one block per SM and ~32 KB of loads in flight per
// SM, about half the bytes in flight the bandwidth needs; splitting k across S warps gives S
// times the blocks for the same rows.
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

// acc[r][t] += this lane's share of w row (n0 + r) . x row t: chunks c0, c0 + step, ... with
// step = 32 S (the caller sums the warp, then the S warps). The weights of the first kUnroll
// chunks are requested before pdl_wait when wait is set (they do not depend on the previous
// kernel; x does), so a programmatic dependent streams them while its predecessor drains.
template <int T>
__device__ __forceinline__ void dot_rows(const uint16_t* __restrict__ w, const uint16_t* __restrict__ x, int n0,
                                         int n, int k, int c0, int step, bool wait, float (&acc)[kRowsPerWarp][T]) {
  const int chunks = k / 8;
  const uint4* wr[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
    wr[r] = reinterpret_cast<const uint4*>(w + size_t(min(n0 + r, n - 1)) * k);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  uint4 wv[kUnroll][kRowsPerWarp];
  auto load = [&](int c_first) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int c = c_first + u * step;
        wv[u][r] = c < chunks ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);
      }
  };
  load(c0);
  if (wait) pdl_wait();
  for (;;) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * step;
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
    c0 += step * kUnroll;
    if (c0 >= chunks) break;
    load(c0);
  }
}

template <int T, int S>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const uint16_t* __restrict__ w, const uint16_t* __restrict__ x,
                                                          float* __restrict__ y, int n, int k, bool accumulate,
                                                          float alpha, const int32_t* __restrict__ experts,
                                                          size_t expert_stride, int x_div) {
  pdl_launch_dependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const bool gathered = experts != nullptr;
  if (gathered) {  // gathered rows (T == 1): row blockIdx.y uses expert experts[row] and x row row / x_div
    pdl_wait();    // the expert ids come from the previous kernel
    const int row = blockIdx.y;
    w += size_t(experts[row]) * expert_stride;
    x += size_t(row / x_div) * k;
    y += size_t(row) * n;
  }
  const int pair = warp / S, slice = warp % S;
  const int n0 = (blockIdx.x * (kWarps / S) + pair) * kRowsPerWarp;
  float acc[kRowsPerWarp][T];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;
  if (n0 < n) {
    dot_rows<T>(w, x, n0, n, k, slice * 32 + lane, 32 * S, !gathered, acc);
  } else {
    pdl_wait();  // every thread of a programmatic dependent waits before its grid may complete
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = warp_sum(acc[r][t]);
  if constexpr (S > 1) {
    __shared__ float part[kWarps][kRowsPerWarp][T];
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
        for (int t = 0; t < T; ++t) part[warp][r][t] = acc[r][t];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int t = 0; t < T; ++t) {
        float v = part[warp][r][t];
        for (int j = 1; j < S; ++j) v += part[warp + j][r][t];
        acc[r][t] = v;
      }
  }
  if (lane != 0 || n0 >= n) return;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t)
      if (n0 + r < n) {
        float* dst = y + size_t(t) * n + n0 + r;
        *dst = accumulate ? *dst + alpha * acc[r][t] : alpha * acc[r][t];
      }
}

int num_sms() {
  static const int v = [] {
    int dev = 0, n = 0;
    NINFER_CUDA_CHECK(cudaGetDevice(&dev));
    NINFER_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return v;
}

// The warps per row pair: the fewest (1, 2, 4, 8) whose grid of `blocks(S)` reaches four blocks
// per SM, and no more than a row has 32-lane groups of chunks for.
template <typename Blocks>
int pick_split(int k, Blocks blocks) {
  const int chunks = k / 8;
  int s = 1;
  while (s < kWarps && blocks(s) < 4 * num_sms() && chunks >= 32 * 2 * s) s *= 2;
  return s;
}

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, cudaStream_t s, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kWarps * 32);
  cfg.stream = s;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl_launches() ? 1 : 0;
  NINFER_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, P(args)...));
}

int blocks_for(int n, int s) {
  const int per_block = kWarps / s * kRowsPerWarp;
  return (n + per_block - 1) / per_block;
}

template <int T>
void launch_t(const uint16_t* w, const uint16_t* x, float* y, int n, int k, bool acc, float alpha, const int32_t* ex,
              size_t ex_stride, int x_div, int gathered_rows, cudaStream_t s) {
  const int split = pick_split(k, [&](int sp) { return blocks_for(n, sp) * gathered_rows; });
  const dim3 grid(blocks_for(n, split), gathered_rows);
  switch (split) {
    case 1: launch(gemv_kernel<T, 1>, grid, s, w, x, y, n, k, acc, alpha, ex, ex_stride, x_div); break;
    case 2: launch(gemv_kernel<T, 2>, grid, s, w, x, y, n, k, acc, alpha, ex, ex_stride, x_div); break;
    case 4: launch(gemv_kernel<T, 4>, grid, s, w, x, y, n, k, acc, alpha, ex, ex_stride, x_div); break;
    default: launch(gemv_kernel<T, 8>, grid, s, w, x, y, n, k, acc, alpha, ex, ex_stride, x_div); break;
  }
}

}  // namespace

void launch_gemv_bf16(const uint16_t* w, const uint16_t* x, float* y, int n_rows, int n, int k, bool accumulate,
                      cudaStream_t s, float alpha) {
  if (k % 8 != 0 || n_rows < 1 || n_rows > kGemvMaxRows)
    throw std::runtime_error("launch_gemv_bf16: k must be a multiple of 8 and 1 <= rows <= 8");
  const int32_t* none = nullptr;
  switch (n_rows) {
    case 1: launch_t<1>(w, x, y, n, k, accumulate, alpha, none, 0, 1, 1, s); break;
    case 2: launch_t<2>(w, x, y, n, k, accumulate, alpha, none, 0, 1, 1, s); break;
    case 3: launch_t<3>(w, x, y, n, k, accumulate, alpha, none, 0, 1, 1, s); break;
    case 4: launch_t<4>(w, x, y, n, k, accumulate, alpha, none, 0, 1, 1, s); break;
    case 5: launch_t<5>(w, x, y, n, k, accumulate, alpha, none, 0, 1, 1, s); break;
    case 6: launch_t<6>(w, x, y, n, k, accumulate, alpha, none, 0, 1, 1, s); break;
    case 7: launch_t<7>(w, x, y, n, k, accumulate, alpha, none, 0, 1, 1, s); break;
    default: launch_t<8>(w, x, y, n, k, accumulate, alpha, none, 0, 1, 1, s); break;
  }
}

void launch_gemv_gathered_bf16(const uint16_t* w, size_t expert_stride, const int32_t* experts, const uint16_t* x,
                               int x_div, float* y, int n_rows, int n, int k, cudaStream_t s) {
  if (k % 8 != 0 || n_rows < 1 || x_div < 1)
    throw std::runtime_error("launch_gemv_gathered_bf16: k must be a multiple of 8, rows >= 1");
  launch_t<1>(w, x, y, n, k, false, 1.0f, experts, expert_stride, x_div, n_rows, s);
}

}  // namespace ninfer::cuda
