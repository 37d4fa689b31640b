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
#include "backend/cuda/moe_route.cuh"
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

// A warp's walk over kRowsPerWarp weight rows n0, n0 + row_step, ... (clamped to n - 1; the
// caller drops rows >= n): acc[r][t] += this lane's share of w row . x row t, chunks c0,
// c0 + step, ... with step = 32 S (the caller sums the warp, then the S warps). load() requests
// the first kUnroll chunks; a programmatic dependent calls it before pdl_wait (the weights do
// not depend on the previous kernel; x does), so it streams them while its predecessor drains.
// x is global memory read through L1 (kSharedX false; every warp of the block reuses it) or a
// block's staged rows in shared memory (kSharedX true), [T][k] bf16 either way.
template <int T, bool kSharedX>
struct RowWalk {
  const uint4* wr[kRowsPerWarp];
  uint4 wv[kUnroll][kRowsPerWarp];
  int chunks, c0, step;

  __device__ __forceinline__ RowWalk(const uint16_t* __restrict__ w, int n0, int row_step, int n, int k, int c0_,
                                     int step_)
      : chunks(k / 8), c0(c0_), step(step_) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      wr[r] = reinterpret_cast<const uint4*>(w + size_t(min(n0 + r * row_step, n - 1)) * k);
  }
  __device__ __forceinline__ void load() {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int c = c0 + u * step;
        wv[u][r] = c < chunks ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);
      }
  }
  // After load(): walks the rest of the row.
  __device__ __forceinline__ void run(const uint16_t* __restrict__ x, float (&acc)[kRowsPerWarp][T]) {
    const uint4* xr = reinterpret_cast<const uint4*>(x);
    for (;;) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + u * step;
        if (c >= chunks) break;
#pragma unroll
        for (int t = 0; t < T; ++t) {
          float xf[8];
          if constexpr (kSharedX)
            bf16x8_to_f32(xr[size_t(t) * chunks + c], xf);
          else
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
      load();
    }
  }
};

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
    RowWalk<T, false> walk(w, n0, 1, n, k, slice * 32 + lane, 32 * S);
    walk.load();
    if (!gathered) pdl_wait();
    walk.run(x, acc);
  } else {
    pdl_wait();  // every thread of a programmatic dependent waits before its grid may complete
  }
  reduce_warp_groups<kWarps, kRowsPerWarp, T, S>(acc);
  if (lane != 0 || slice != 0 || n0 >= n) return;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t)
      if (n0 + r < n) {
        float* dst = y + size_t(t) * n + n0 + r;
        *dst = accumulate ? *dst + alpha * acc[r][t] : alpha * acc[r][t];
      }
}

// The input rows of a fused RMSNorm: xs[t][i] = bf16(w[i] * (x[t][i] * inv_rms(x[t]))), the
// standalone rmsnorm kernel's arithmetic and order (block_inv_rms). x: [T][k] fp32; xs: shared
// [T][k] bf16. Every thread of the block calls it (after pdl_wait: x is the predecessor's).
template <int T>
__device__ __forceinline__ void stage_norm_rows(const float* __restrict__ x, const float* __restrict__ nw, int k,
                                                float eps, uint16_t* xs) {
  __shared__ float inv[T];
  block_inv_rms<kWarps * 32, T>(x, T, k, eps, inv);
#pragma unroll
  for (int t = 0; t < T; ++t)
    for (int i = threadIdx.x; i < k; i += kWarps * 32)
      xs[size_t(t) * k + i] = f32_to_bf16_bits(nw[i] * (x[size_t(t) * k + i] * inv[t]));
  __syncthreads();
}

// launch_gemv_fused: gemv_kernel's dense rows with GemvFuse's prologue (kNorm: the input rows
// staged in dynamic shared memory from the fp32 rows) and epilogue (routing by the last block).
template <int T, int S, bool kNorm>
__global__ void __launch_bounds__(kWarps * 32) gemv_fused_kernel(const uint16_t* __restrict__ w,
                                                                const uint16_t* __restrict__ x, float* __restrict__ y,
                                                                int n, int k, bool accumulate, float alpha, GemvFuse f) {
  extern __shared__ uint4 staged_x[];
  pdl_launch_dependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int pair = warp / S, slice = warp % S;
  const int n0 = (blockIdx.x * (kWarps / S) + pair) * kRowsPerWarp;
  uint16_t* xs = reinterpret_cast<uint16_t*>(staged_x);
  float acc[kRowsPerWarp][T];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;
  RowWalk<T, kNorm> walk(w, n0, 1, n, k, slice * 32 + lane, 32 * S);
  if (n0 < n) walk.load();
  pdl_wait();
  if constexpr (kNorm) stage_norm_rows<T>(f.norm_x, f.norm_w, k, f.eps, xs);
  if (n0 < n) walk.run(kNorm ? xs : x, acc);
  reduce_warp_groups<kWarps, kRowsPerWarp, T, S>(acc);
  if (lane == 0 && slice == 0 && n0 < n)
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int t = 0; t < T; ++t)
        if (n0 + r < n) {
          float* dst = y + size_t(t) * n + n0 + r;
          *dst = accumulate ? *dst + alpha * acc[r][t] : alpha * acc[r][t];
        }
  if (f.done == nullptr) return;
  // The last block to finish routes every row (the threadFenceReduction pattern: each block's
  // logits are visible device-wide before its arrival is counted; the last reads them via L2)
  // and re-arms the counter for the next launch (a CUDA graph replays the same counter).
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(f.done, 1) == int(gridDim.x * gridDim.y) - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int t = warp; t < T; t += kWarps)
    route_token(y + size_t(t) * n, n, f.route_k, f.route_norm, f.route_ids + size_t(t) * f.route_k,
                f.route_w + size_t(t) * f.route_k);
  if (threadIdx.x == 0) *f.done = 0;
}

// launch_gemv_gate_up_act: gathered row r (expert experts[r], x row r / x_div); a warp pair
// owns gate row i and up row ffn + i of the expert and writes act[r][i] = bf16(silu(g) u), the
// separate gated_act kernel's arithmetic (silu_f32) on the dot products the plain gathered
// GEMV gives (same S, same per-row order).
template <int S, bool kNorm>
__global__ void __launch_bounds__(kWarps * 32) gemv_gate_up_act_kernel(
    const uint16_t* __restrict__ w, size_t expert_stride, const int32_t* __restrict__ experts,
    const uint16_t* __restrict__ x, int x_div, GemvFuse f, uint16_t* __restrict__ act, int ffn, int k) {
  extern __shared__ uint4 staged_x[];
  pdl_launch_dependents();
  pdl_wait();  // the expert ids (and the norm's input) come from earlier kernels
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int row = blockIdx.y, tok = row / x_div;
  w += size_t(experts[row]) * expert_stride;
  const int pair = warp / S, slice = warp % S;
  const int i = blockIdx.x * (kWarps / S) + pair;
  float acc[kRowsPerWarp][1] = {};
  RowWalk<1, kNorm> walk(w, i, ffn, 2 * ffn, k, slice * 32 + lane, 32 * S);
  if (i < ffn) walk.load();
  const uint16_t* xr = x + size_t(tok) * k;
  if constexpr (kNorm) {
    uint16_t* xs = reinterpret_cast<uint16_t*>(staged_x);
    stage_norm_rows<1>(f.norm_x + size_t(tok) * k, f.norm_w, k, f.eps, xs);
    xr = xs;
  }
  if (i < ffn) walk.run(xr, acc);
  reduce_warp_groups<kWarps, kRowsPerWarp, 1, S>(acc);
  if (lane == 0 && slice == 0 && i < ffn)
    act[size_t(row) * ffn + i] = f32_to_bf16_bits(silu_f32(acc[0][0]) * acc[1][0]);
}

// launch_gemv_down_combine: block (bx, t) owns rows of token t for all top_k choices: warp w
// takes choice j = w % top_k and row pair bx * P + w / top_k (P = kWarps / top_k pairs), then
// the block sums the choices in order j = 0, 1, ... (moe_combine_kernel's fmaf chain) and adds
// alpha times the sum into x. Deterministic; the experts' rows stream in parallel (a loop over
// the choices inside one warp cut the bytes in flight: 13.6 vs 10.1 us, docs/NOTES.md).
__global__ void __launch_bounds__(kWarps * 32) gemv_down_combine_kernel(
    const uint16_t* __restrict__ w, size_t expert_stride, const int32_t* __restrict__ experts,
    const float* __restrict__ cw, const uint16_t* __restrict__ act, int top_k, int n, int k, float alpha,
    float* __restrict__ x) {
  pdl_launch_dependents();
  pdl_wait();  // expert ids, weights and act come from earlier kernels
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int t = blockIdx.y, P = kWarps / top_k;
  const int j = warp % top_k, p = warp / top_k;
  const int n0 = (blockIdx.x * P + p) * kRowsPerWarp;
  float acc[kRowsPerWarp][1] = {};
  if (p < P && n0 < n) {
    const int row = t * top_k + j;
    RowWalk<1, false> walk(w + size_t(experts[row]) * expert_stride, n0, 1, n, k, lane, 32);
    walk.load();
    walk.run(act + size_t(row) * k, acc);
  }
  __shared__ float part[kWarps][kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const float v = warp_sum(acc[r][0]);
    if (lane == 0) part[warp][r] = v;
  }
  __syncthreads();
  if (int(threadIdx.x) >= P * kRowsPerWarp) return;
  const int pp = threadIdx.x / kRowsPerWarp, r = threadIdx.x % kRowsPerWarp;
  const int col = (blockIdx.x * P + pp) * kRowsPerWarp + r;
  if (col >= n) return;
  float s = 0;
  for (int jj = 0; jj < top_k; ++jj) s = fmaf(cw[size_t(t) * top_k + jj], part[pp * top_k + jj][r], s);
  float* dst = x + size_t(t) * n + col;
  *dst = fmaf(alpha, s, *dst);
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
void launch(void (*kernel)(P...), dim3 grid, size_t smem, cudaStream_t s, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.dynamicSmemBytes = smem;
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
    case 1: launch(gemv_kernel<T, 1>, grid, 0, s, w, x, y, n, k, acc, alpha, ex, ex_stride, x_div); break;
    case 2: launch(gemv_kernel<T, 2>, grid, 0, s, w, x, y, n, k, acc, alpha, ex, ex_stride, x_div); break;
    case 4: launch(gemv_kernel<T, 4>, grid, 0, s, w, x, y, n, k, acc, alpha, ex, ex_stride, x_div); break;
    default: launch(gemv_kernel<T, 8>, grid, 0, s, w, x, y, n, k, acc, alpha, ex, ex_stride, x_div); break;
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

namespace {

constexpr size_t kMaxStagedBytes = 48 << 10;  // the dynamic shared memory a block takes without opting in

template <int T, bool kNorm>
void launch_fused_t(const uint16_t* w, const uint16_t* x, float* y, int n, int k, bool acc, float alpha,
                    const GemvFuse& f, cudaStream_t s) {
  const int split = pick_split(k, [&](int sp) { return blocks_for(n, sp); });
  const dim3 grid(blocks_for(n, split));
  const size_t smem = kNorm ? size_t(T) * k * 2 : 0;
  switch (split) {
    case 1: launch(gemv_fused_kernel<T, 1, kNorm>, grid, smem, s, w, x, y, n, k, acc, alpha, f); break;
    case 2: launch(gemv_fused_kernel<T, 2, kNorm>, grid, smem, s, w, x, y, n, k, acc, alpha, f); break;
    case 4: launch(gemv_fused_kernel<T, 4, kNorm>, grid, smem, s, w, x, y, n, k, acc, alpha, f); break;
    default: launch(gemv_fused_kernel<T, 8, kNorm>, grid, smem, s, w, x, y, n, k, acc, alpha, f); break;
  }
}

template <int T>
void launch_fused_rows(const uint16_t* w, const uint16_t* x, float* y, int n, int k, bool acc, float alpha,
                       const GemvFuse& f, cudaStream_t s) {
  if (f.norm_x)
    launch_fused_t<T, true>(w, x, y, n, k, acc, alpha, f, s);
  else
    launch_fused_t<T, false>(w, x, y, n, k, acc, alpha, f, s);
}

template <bool kNorm>
void launch_gate_up_t(const uint16_t* w, size_t stride, const int32_t* ex, const uint16_t* x, int x_div,
                      const GemvFuse& f, uint16_t* act, int rows, int ffn, int k, cudaStream_t s) {
  // The plain gathered GEMV's split for the 2 ffn rows (the same per-row summation order).
  const int split = pick_split(k, [&](int sp) { return blocks_for(2 * ffn, sp) * rows; });
  const int pairs = kWarps / split;
  const dim3 grid((ffn + pairs - 1) / pairs, rows);
  const size_t smem = kNorm ? size_t(k) * 2 : 0;
  switch (split) {
    case 1: launch(gemv_gate_up_act_kernel<1, kNorm>, grid, smem, s, w, stride, ex, x, x_div, f, act, ffn, k); break;
    case 2: launch(gemv_gate_up_act_kernel<2, kNorm>, grid, smem, s, w, stride, ex, x, x_div, f, act, ffn, k); break;
    case 4: launch(gemv_gate_up_act_kernel<4, kNorm>, grid, smem, s, w, stride, ex, x, x_div, f, act, ffn, k); break;
    default: launch(gemv_gate_up_act_kernel<8, kNorm>, grid, smem, s, w, stride, ex, x, x_div, f, act, ffn, k); break;
  }
}

}  // namespace

bool gemv_norm_fits(int n_rows, int k) {
  return n_rows >= 1 && n_rows <= kGemvMaxRows && k % 8 == 0 && size_t(n_rows) * k * 2 <= kMaxStagedBytes;
}

void launch_gemv_fused(const uint16_t* w, const uint16_t* x, float* y, int n_rows, int n, int k, bool accumulate,
                       float alpha, const GemvFuse& f, cudaStream_t s) {
  if (k % 8 != 0 || n_rows < 1 || n_rows > kGemvMaxRows)
    throw std::runtime_error("launch_gemv_fused: k must be a multiple of 8 and 1 <= rows <= 8");
  if (f.norm_x && !gemv_norm_fits(n_rows, k))
    throw std::runtime_error("launch_gemv_fused: the normalised rows do not fit shared memory (gemv_norm_fits)");
  if (f.done && (accumulate || alpha != 1.0f || n > kRouteMaxExperts || f.route_k < 1 || f.route_k > n))
    throw std::runtime_error("launch_gemv_fused: routing needs plain logits (no accumulate, alpha 1), n <= 256 "
                             "experts and 1 <= k <= n");
  switch (n_rows) {
    case 1: launch_fused_rows<1>(w, x, y, n, k, accumulate, alpha, f, s); break;
    case 2: launch_fused_rows<2>(w, x, y, n, k, accumulate, alpha, f, s); break;
    case 3: launch_fused_rows<3>(w, x, y, n, k, accumulate, alpha, f, s); break;
    case 4: launch_fused_rows<4>(w, x, y, n, k, accumulate, alpha, f, s); break;
    case 5: launch_fused_rows<5>(w, x, y, n, k, accumulate, alpha, f, s); break;
    case 6: launch_fused_rows<6>(w, x, y, n, k, accumulate, alpha, f, s); break;
    case 7: launch_fused_rows<7>(w, x, y, n, k, accumulate, alpha, f, s); break;
    default: launch_fused_rows<8>(w, x, y, n, k, accumulate, alpha, f, s); break;
  }
}

void launch_gemv_gate_up_act(const uint16_t* w, size_t expert_stride, const int32_t* experts, const uint16_t* x,
                             int x_div, const GemvFuse& norm, uint16_t* act, int n_rows, int ffn, int k,
                             cudaStream_t s) {
  if (k % 8 != 0 || n_rows < 1 || x_div < 1 || ffn < 1)
    throw std::runtime_error("launch_gemv_gate_up_act: k must be a multiple of 8, rows >= 1, ffn >= 1");
  if (norm.norm_x && !gemv_norm_fits(1, k))
    throw std::runtime_error("launch_gemv_gate_up_act: the normalised row does not fit shared memory");
  if (norm.norm_x)
    launch_gate_up_t<true>(w, expert_stride, experts, x, x_div, norm, act, n_rows, ffn, k, s);
  else
    launch_gate_up_t<false>(w, expert_stride, experts, x, x_div, norm, act, n_rows, ffn, k, s);
}

void launch_gemv_down_combine(const uint16_t* w, size_t expert_stride, const int32_t* experts, const float* weights,
                              const uint16_t* act, int n_tokens, int top_k, int n, int k, float alpha, float* x,
                              cudaStream_t s) {
  if (k % 8 != 0 || n_tokens < 1 || top_k < 1 || top_k > kGemvDownCombineMaxK)
    throw std::runtime_error("launch_gemv_down_combine: k must be a multiple of 8, tokens >= 1, 1 <= top_k <= 8");
  const int rows_per_block = kWarps / top_k * kRowsPerWarp;
  const dim3 grid((n + rows_per_block - 1) / rows_per_block, n_tokens);
  launch(gemv_down_combine_kernel, grid, 0, s, w, expert_stride, experts, weights, act, top_k, n, k, alpha, x);
}

}  // namespace ninfer::cuda
