// Element-wise and row-wise kernels of the forward pass; interface and layouts in ops.h.
// They follow the CPU reference (backend/cpu/cpu_ops.cpp) operation by operation: RMSNorm
// sums squares in fp64 and forms 1/sqrt(mean + eps) in fp32; rope forms the angle in fp32
// and takes cos/sin in fp64, as the CPU does.
#include <stdexcept>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/ops.h"
#include "core/env.h"

namespace ninfer::cuda {
namespace {

__global__ void embed_kernel(const int32_t* ids, const uint16_t* embed, float* x, int hidden, float scale) {
  const int t = blockIdx.x;
  const uint16_t* row = embed + size_t(ids[t]) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) x[size_t(t) * hidden + i] = bf16_bits_to_f32(row[i]) * scale;
}

__device__ __forceinline__ void store_act(uint16_t* out, size_t hi_idx, size_t lo_idx, float v, bool split) {
  const uint16_t hi = f32_to_bf16_bits(v);
  out[hi_idx] = hi;
  if (split) out[lo_idx] = f32_to_bf16_bits(v - bf16_bits_to_f32(hi));
}

// 1 / rms of one row for a block of 256 threads (block_inv_rms: fp64 sum of squares, as the CPU).
__device__ float row_inv_rms(const float* xr, int dim, float eps) {
  __shared__ float inv_s;
  block_inv_rms<256, 1>(xr, 1, dim, eps, &inv_s);
  return inv_s;
}

// acc[r] += rmsnorm(in[r]) * w; one block per row.
__global__ void rmsnorm_add_kernel(const float* in, const float* weight, float* acc, int dim, float eps) {
  const float* xr = in + size_t(blockIdx.x) * dim;
  const float inv = row_inv_rms(xr, dim, eps);
  float* ar = acc + size_t(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ar[i] += weight[i] * (xr[i] * inv);
}

// x[r, :dim] = rmsnorm(x[r, :dim]) * w in place, rows ld apart; one block per row.
__global__ void rmsnorm_rows_kernel(float* x, int ld, const float* weight, int dim, float eps) {
  float* xr = x + size_t(blockIdx.x) * ld;
  const float inv = row_inv_rms(xr, dim, eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) xr[i] = weight[i] * (xr[i] * inv);
}

__global__ void to_bf16_kernel(const float* x, uint16_t* out, size_t n, bool split);

// One block of 256 threads per row.
__global__ void rmsnorm_kernel(const float* x, const int32_t* rows, const float* weight, uint16_t* out,
                               int n_rows, int dim, float eps, bool split) {
  const int r = blockIdx.x;
  pdl_launch_dependents();  // the next gemv may be scheduled early (it waits for us)
  const float* xr = x + size_t(rows ? rows[r] : r) * dim;
  const float inv = row_inv_rms(xr, dim, eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = weight[i] * (xr[i] * inv);
    store_act(out, size_t(r) * dim + i, size_t(n_rows + r) * dim + i, v, split);
  }
}

// One warp per (token, head) over the q heads then the k heads.
__global__ void qk_norm_rope_kernel(float* qkv, int ld, int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                                    const float* q_norm, const float* k_norm, float eps, RopeParams rp) {
  const int32_t* pos = rp.pos;
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
  const int half = rp.rotary_dim / 2;
  const float* tab = rp.tables + size_t(rp.tok_table ? rp.tok_table[t] : 0) * (1 + half);
  const float af = tab[0];
  const float* inv_freq = tab + 1;
  const float p = float(pos[t]);
  const float mult = h < n_heads ? rp.q_mult : 1.0f;
  for (int i = lane; i < half; i += 32) {
    const float ang = p * inv_freq[i];
    const float c = float(cos(double(ang))) * af, s = float(sin(double(ang))) * af;
    const float a = x[i], b = x[i + half];
    x[i] = (a * c - b * s) * mult;
    x[i + half] = (b * c + a * s) * mult;
  }
  if (mult != 1.0f)
    for (int i = rp.rotary_dim + lane; i < head_dim; i += 32) x[i] *= mult;
}

__global__ void gated_act_kernel(const float* gu, uint16_t* out, int n_tokens, int ffn, int act, bool split) {
  pdl_launch_dependents();  // the next gemv may be scheduled early (it waits for us)
  const size_t n = size_t(n_tokens) * ffn;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t t = i / ffn, j = i % ffn;
    const float g = gu[t * 2 * ffn + j], u = gu[t * 2 * ffn + ffn + j];
    // act 1: gelu with the tanh approximation (as cpu::gelu_tanh_mul), else silu
    const float a = act == 1 ? 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)))
                             : silu_f32(g);
    store_act(out, i, n + i, a * u, split);
  }
}

__global__ void to_bf16_kernel(const float* x, uint16_t* out, size_t n, bool split) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    store_act(out, i, n + i, x[i], split);
}

__global__ void logits_post_kernel(float* y, size_t n, float scale, float cap) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float v = y[i] * scale;
    if (cap > 0) v = cap * tanhf(v / cap);
    y[i] = v;
  }
}

// One warp per token (a thread per token serialised ~1,000 exps and double divisions, tens of
// microseconds per layer at batch 1): route_token (moe_route.cuh).
__global__ void moe_route_kernel(const float* logits, int n_tokens, int n_experts, int k, bool norm, int32_t* ids,
                                 float* w) {
  pdl_launch_dependents();  // the next gemv may be scheduled early (it waits for us)
  const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (t >= n_tokens) return;
  route_token(logits + size_t(t) * n_experts, n_experts, k, norm, ids + size_t(t) * k, w + size_t(t) * k);
}

// x[t, :] += alpha * sum_j w[t, j] y[t * k + j, :] (j in order: deterministic; explicit fmaf
// so the fused down GEMV's epilogue, gemv.cu, gives the same bits).
__global__ void moe_combine_kernel(const float* y, const float* w, int n_tokens, int k, int dim, float alpha,
                                   float* x) {
  const size_t n = size_t(n_tokens) * dim;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t t = i / dim, c = i % dim;
    float acc = 0;
    for (int j = 0; j < k; ++j) acc = fmaf(w[t * k + j], y[(t * k + j) * dim + c], acc);
    x[i] = fmaf(alpha, acc, x[i]);
  }
}

__global__ void gather_rows_bf16_kernel(const uint16_t* src, const int32_t* rows, uint16_t* dst, int dim) {
  const uint16_t* s = src + size_t(rows[blockIdx.x]) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[size_t(blockIdx.x) * dim + i] = s[i];
}

__global__ void scatter_rows_f32_kernel(const float* src, const int32_t* rows, float* dst, int dim) {
  float* d = dst + size_t(rows[blockIdx.x]) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) d[i] = src[size_t(blockIdx.x) * dim + i];
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

bool pdl_launches() {
  static const bool v = [] {
    const bool on = env_switch("NINFER_CUDA_PDL");
    int dev = 0, major = 0;
    NINFER_CUDA_CHECK(cudaGetDevice(&dev));
    NINFER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    return on && major >= 9;  // PDL is Hopper's (sm_90); the kernels' waits are no-ops before it
  }();
  return v;
}

void launch_embed(const int32_t* ids, const uint16_t* embed, float* x, int n_tokens, int hidden, cudaStream_t s,
                  float scale) {
  embed_kernel<<<n_tokens, 256, 0, s>>>(ids, embed, x, hidden, scale);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_rmsnorm_bf16(const float* x, const int32_t* rows, const float* weight, uint16_t* out, int n_rows, int dim,
                         float eps, bool split, cudaStream_t s) {
  rmsnorm_kernel<<<n_rows, 256, 0, s>>>(x, rows, weight, out, n_rows, dim, eps, split);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_qk_norm_rope(float* qkv, int ld, int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                         const float* q_norm, const float* k_norm, float eps, const RopeParams& rp, cudaStream_t s) {
  const int items = n_tokens * (n_heads + n_kv_heads);
  constexpr int kWarps = 8;
  qk_norm_rope_kernel<<<(items + kWarps - 1) / kWarps, kWarps * 32, 0, s>>>(qkv, ld, n_tokens, n_heads, n_kv_heads,
                                                                             head_dim, q_norm, k_norm, eps, rp);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_silu_mul_bf16(const float* gu, uint16_t* out, int n_tokens, int ffn, bool split, cudaStream_t s,
                          int act) {
  gated_act_kernel<<<grid_for(size_t(n_tokens) * ffn, 256), 256, 0, s>>>(gu, out, n_tokens, ffn, act, split);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_rmsnorm_add(const float* in, const float* weight, float* acc, int n_rows, int dim, float eps,
                        cudaStream_t s) {
  rmsnorm_add_kernel<<<n_rows, 256, 0, s>>>(in, weight, acc, dim, eps);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_rmsnorm_rows_f32(float* x, int ld, const float* weight, int n_rows, int dim, float eps, cudaStream_t s) {
  rmsnorm_rows_kernel<<<n_rows, 256, 0, s>>>(x, ld, weight, dim, eps);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_to_bf16(const float* x, uint16_t* out, int n_rows, int dim, bool split, cudaStream_t s) {
  const size_t n = size_t(n_rows) * dim;
  to_bf16_kernel<<<grid_for(n, 256), 256, 0, s>>>(x, out, n, split);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_logits_post(float* y, size_t n, float scale, float cap, cudaStream_t s) {
  logits_post_kernel<<<grid_for(n, 256), 256, 0, s>>>(y, n, scale, cap);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_moe_route(const float* logits, int n_tokens, int n_experts, int k, bool norm, int32_t* ids, float* w,
                      cudaStream_t s) {
  if (n_experts > kRouteMaxExperts || k > n_experts)
    throw std::runtime_error("launch_moe_route: at most 256 experts, k <= experts");
  moe_route_kernel<<<(n_tokens + 3) / 4, 128, 0, s>>>(logits, n_tokens, n_experts, k, norm, ids, w);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_moe_combine(const float* y, const float* w, int n_tokens, int k, int dim, float alpha, float* x,
                        cudaStream_t s) {
  moe_combine_kernel<<<grid_for(size_t(n_tokens) * dim, 256), 256, 0, s>>>(y, w, n_tokens, k, dim, alpha, x);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_gather_rows_bf16(const uint16_t* src, const int32_t* rows, uint16_t* dst, int n_rows, int dim,
                             cudaStream_t s) {
  if (n_rows == 0) return;
  gather_rows_bf16_kernel<<<n_rows, 256, 0, s>>>(src, rows, dst, dim);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_scatter_rows_f32(const float* src, const int32_t* rows, float* dst, int n_rows, int dim, cudaStream_t s) {
  if (n_rows == 0) return;
  scatter_rows_f32_kernel<<<n_rows, 256, 0, s>>>(src, rows, dst, dim);
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
