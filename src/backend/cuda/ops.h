// Element-wise and row-wise kernels of the forward pass (host launchers; device code in
// ops.cu). Each one has a CPU reference in backend/cpu/cpu_ops.h and a test in
// tests/cuda/test_ops.cpp. bf16 values are passed as uint16_t bit patterns.
//
// Split activations (CudaGemmMode::Split): a bf16 activation buffer [2 * n_rows, dim] holds
// hi = bf16(x) in rows [0, n_rows) and lo = bf16(x - hi) in rows [n_rows, 2 * n_rows); a GEMM
// over all 2 * n_rows rows followed by gemm_epilogue() sums the two halves.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ninfer::cuda {

// x[t, :] = float(embed[ids[t], :]).  ids: [n_tokens]; embed: [vocab, hidden] bf16; x: [n_tokens, hidden]
void launch_embed(const int32_t* ids, const uint16_t* embed, float* x, int n_tokens, int hidden, cudaStream_t s,
                  float scale = 1.0f);  // x *= scale (Gemma, Granite)

// out = bf16(x / rms(x) * weight) per row (split: hi and lo halves). rows: optional [n_rows]
// indices into x (null: row r reads x[r]).  x: [*, dim] fp32; weight: [dim]; out: [n_rows (x2), dim]
void launch_rmsnorm_bf16(const float* x, const int32_t* rows, const float* weight, uint16_t* out, int n_rows,
                         int dim, float eps, bool split, cudaStream_t s);

// Rope of one forward (model/rope.h): token t at position pos[t] uses table tok_table[t] (null:
// table 0) of `tables`, each [1 + rotary_dim / 2] floats: the attention factor (cos and sin
// are multiplied by it), then inv_freq. The first rotary_dim dims of a head rotate (half-split
// within them); q heads are then multiplied by q_mult (a score scale other than
// 1/sqrt(head_dim), folded into q).
struct RopeParams {
  const int32_t* pos = nullptr;        // [n_tokens]
  const int32_t* tok_table = nullptr;  // [n_tokens] or null
  const float* tables = nullptr;       // [n_tables][1 + rotary_dim / 2]
  int rotary_dim = 0;
  float q_mult = 1.0f;
};
// In place on qkv [n_tokens, ld] (q heads first, then k heads, then v heads, each head_dim wide):
// applies RMSNorm per head with q_norm / k_norm when non-null (Qwen3, Gemma 3), then rope.
void launch_qk_norm_rope(float* qkv, int ld, int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                         const float* q_norm, const float* k_norm, float eps, const RopeParams& rp, cudaStream_t s);

// x[r, :dim] = rmsnorm(x[r, :dim]) * weight in place, rows ld apart (OLMo-2's whole-projection
// q/k norms).  x: [n_rows, ld] fp32; weight: [dim]
void launch_rmsnorm_rows_f32(float* x, int ld, const float* weight, int n_rows, int dim, float eps, cudaStream_t s);
// acc += rmsnorm(in) * weight per row (post-norms).  in, acc: [n_rows, dim] fp32
void launch_rmsnorm_add(const float* in, const float* weight, float* acc, int n_rows, int dim, float eps,
                        cudaStream_t s);
// out = bf16(x) (split: hi and lo).  x: [n_rows, dim] fp32; out: [n_rows (x2), dim]
void launch_to_bf16(const float* x, uint16_t* out, int n_rows, int dim, bool split, cudaStream_t s);
// y = cap > 0 ? cap * tanh(scale * y / cap) : scale * y.  y: [n] fp32 logits
void launch_logits_post(float* y, size_t n, float scale, float cap, cudaStream_t s);

// Mixture of experts. Route: per token, softmax over the experts' logits, top k (ids, weights,
// renormalised when norm).  logits: [n_tokens, n_experts]; ids, w: [n_tokens, k]
void launch_moe_route(const float* logits, int n_tokens, int n_experts, int k, bool norm, int32_t* ids, float* w,
                      cudaStream_t s);
// x[t] += alpha * sum_j w[t, j] * y[t * k + j].  y: [n_tokens * k, dim]; x: [n_tokens, dim]
void launch_moe_combine(const float* y, const float* w, int n_tokens, int k, int dim, float alpha, float* x,
                        cudaStream_t s);
// dst[i] = src[rows[i]].  src: [*, dim] bf16; rows: [n_rows]; dst: [n_rows, dim]
void launch_gather_rows_bf16(const uint16_t* src, const int32_t* rows, uint16_t* dst, int n_rows, int dim,
                             cudaStream_t s);
// dst[rows[i]] = src[i].  src: [n_rows, dim] fp32
void launch_scatter_rows_f32(const float* src, const int32_t* rows, float* dst, int n_rows, int dim, cudaStream_t s);

// out = bf16(act(gu[:, :ffn]) * gu[:, ffn:]) (split: hi and lo), act 0: silu, 1: gelu (tanh
// approximation).  gu: [n_tokens, 2 * ffn] fp32; out: [n_tokens (x2), ffn]
void launch_silu_mul_bf16(const float* gu, uint16_t* out, int n_tokens, int ffn, bool split, cudaStream_t s,
                          int act = 0);

// y[t, n] += bias[n].  y: [n_rows, n]
void launch_add_bias(float* y, const float* bias, int n_rows, int n, cudaStream_t s);

// dst[t, n] = (accumulate ? dst[t, n] : 0) + tmp[t, n] + (halves == 2 ? tmp[n_rows + t, n] : 0) + bias[n]
// tmp: [halves * n_rows, n]; dst: [n_rows, n]; bias optional [n]
void launch_gemm_epilogue(const float* tmp, int halves, float* dst, const float* bias, int n_rows, int n,
                          bool accumulate, cudaStream_t s);

}  // namespace ninfer::cuda

namespace ninfer::cuda {

// Programmatic dependent launches (Hopper PDL) of the decode-path kernels (gemv, attention's
// decode_comp_kernel and merge): a kernel's CTAs may be scheduled while its predecessor in the
// stream finishes and wait for it (pdl_wait) before they read anything it writes, instead of
// starting after it has drained. False before sm_90 and with NINFER_CUDA_PDL=0 (A/B).
bool pdl_launches();

// Small-batch GEMV for decode: y[t, n] = (accumulate ? y[t, n] : 0) + sum_k w[n, k] x[t, k],
// fp32 accumulate, for n_rows <= kGemvMaxRows. Streams w once with 16-byte loads (memory
// bound: what matters is bytes of w per second). w: [n, k] bf16; x: [n_rows, k] bf16;
// y: [n_rows, n] fp32. k must be a multiple of 8.
constexpr int kGemvMaxRows = 8;
// y = (accumulate ? y : 0) + alpha * (x w^T).
void launch_gemv_bf16(const uint16_t* w, const uint16_t* x, float* y, int n_rows, int n, int k, bool accumulate,
                      cudaStream_t s, float alpha = 1.0f);
// Mixture-of-experts decode: y[r, :] = w_e x[r / x_div, :]^T with e = experts[r] and w_e at
// w + e * expert_stride (read only for the chosen experts). w: [n_experts][n, k] bf16;
// experts: [n_rows] (device); x: [n_rows / x_div, k] bf16; y: [n_rows, n] fp32.
void launch_gemv_gathered_bf16(const uint16_t* w, size_t expert_stride, const int32_t* experts, const uint16_t* x,
                               int x_div, float* y, int n_rows, int n, int k, cudaStream_t s);

// Fusions of the decode GEMVs (launch_gemv_fused, launch_gemv_gate_up_act); a null pointer
// switches each off. They compute what the separate kernels compute, bit for bit (the same
// device functions in the same order), with fewer launches.
struct GemvFuse {
  // RMSNorm in the prologue: the input rows are bf16(norm_w * (norm_x * inv_rms(norm_x))) as
  // launch_rmsnorm_bf16 writes them, staged in each block's shared memory (x is not read).
  // norm_x: [n_rows, k] fp32; norm_w: [k]
  const float* norm_x = nullptr;
  const float* norm_w = nullptr;
  float eps = 0;
  // Routing in the epilogue (launch_gemv_fused): y is the router's logits [n_rows, n
  // experts]; the grid's last block routes every row as launch_moe_route does into route_ids
  // and route_w [n_rows, route_k]. done: a device counter that is 0 before the launch; the
  // launch leaves it 0 again (graph replays reuse it). One launch at a time per counter.
  int* done = nullptr;
  int route_k = 0;
  bool route_norm = false;
  int32_t* route_ids = nullptr;
  float* route_w = nullptr;
};
// Whether n_rows normalised rows of k bf16 fit the shared memory a GEMV block stages them in.
bool gemv_norm_fits(int n_rows, int k);
// launch_gemv_bf16 (y = (accumulate ? y : 0) + alpha x w^T) with f's prologue and epilogue.
void launch_gemv_fused(const uint16_t* w, const uint16_t* x, float* y, int n_rows, int n, int k, bool accumulate,
                       float alpha, const GemvFuse& f, cudaStream_t s);
// MoE decode, gate|up then activation: act[r, i] = bf16(silu(g) * u) with g = w_e[i] . x_r,
// u = w_e[ffn + i] . x_r, e = experts[r], x_r = x row r / x_div (or, with norm.norm_x, that
// row normalised in the prologue): what launch_gemv_gathered_bf16 + launch_silu_mul_bf16 give.
// w: [n_experts][2 ffn, k] bf16; experts: [n_rows]; x: [n_rows / x_div, k]; act: [n_rows, ffn]
void launch_gemv_gate_up_act(const uint16_t* w, size_t expert_stride, const int32_t* experts, const uint16_t* x,
                             int x_div, const GemvFuse& norm, uint16_t* act, int n_rows, int ffn, int k,
                             cudaStream_t s);
// MoE decode, down then combine: x[t, :] += alpha * sum_j weights[t, j] * (w_e act[t * top_k +
// j]^T), e = experts[t * top_k + j], the choices summed in order j = 0, 1, ... as
// launch_moe_combine does (top_k <= kGemvDownCombineMaxK: the choices of a row go to the warps
// of one block). w: [n_experts][n, k] bf16; experts, weights: [n_tokens, top_k];
// act: [n_tokens * top_k, k] bf16; x: [n_tokens, n] fp32
constexpr int kGemvDownCombineMaxK = 8;
void launch_gemv_down_combine(const uint16_t* w, size_t expert_stride, const int32_t* experts, const float* weights,
                              const uint16_t* act, int n_tokens, int top_k, int n, int k, float alpha, float* x,
                              cudaStream_t s);

}  // namespace ninfer::cuda
