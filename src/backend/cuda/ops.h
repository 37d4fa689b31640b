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
void launch_embed(const int32_t* ids, const uint16_t* embed, float* x, int n_tokens, int hidden, cudaStream_t s);

// out = bf16(x / rms(x) * weight) per row (split: hi and lo halves). rows: optional [n_rows]
// indices into x (null: row r reads x[r]).  x: [*, dim] fp32; weight: [dim]; out: [n_rows (x2), dim]
void launch_rmsnorm_bf16(const float* x, const int32_t* rows, const float* weight, uint16_t* out, int n_rows,
                         int dim, float eps, bool split, cudaStream_t s);

// In place on qkv [n_tokens, ld] (q heads first, then k heads, then v heads, each head_dim wide):
// applies RMSNorm per head with q_norm / k_norm when non-null (Qwen3), then rope (half-split)
// to the q and k heads at positions pos[t]. inv_freq: [head_dim / 2] fp32.
void launch_qk_norm_rope(float* qkv, int ld, const int32_t* pos, int n_tokens, int n_heads, int n_kv_heads,
                         int head_dim, const float* q_norm, const float* k_norm, float eps, const float* inv_freq,
                         cudaStream_t s);

// out = bf16(silu(gu[:, :ffn]) * gu[:, ffn:]) (split: hi and lo).  gu: [n_tokens, 2 * ffn] fp32;
// out: [n_tokens (x2), ffn]
void launch_silu_mul_bf16(const float* gu, uint16_t* out, int n_tokens, int ffn, bool split, cudaStream_t s);

// y[t, n] += bias[n].  y: [n_rows, n]
void launch_add_bias(float* y, const float* bias, int n_rows, int n, cudaStream_t s);

// dst[t, n] = (accumulate ? dst[t, n] : 0) + tmp[t, n] + (halves == 2 ? tmp[n_rows + t, n] : 0) + bias[n]
// tmp: [halves * n_rows, n]; dst: [n_rows, n]; bias optional [n]
void launch_gemm_epilogue(const float* tmp, int halves, float* dst, const float* bias, int n_rows, int n,
                          bool accumulate, cudaStream_t s);

}  // namespace ninfer::cuda

namespace ninfer::cuda {

// Small-batch GEMV for decode: y[t, n] = (accumulate ? y[t, n] : 0) + sum_k w[n, k] x[t, k],
// fp32 accumulate, for n_rows <= kGemvMaxRows. Streams w once with 16-byte loads (memory
// bound: what matters is bytes of w per second). w: [n, k] bf16; x: [n_rows, k] bf16;
// y: [n_rows, n] fp32. k must be a multiple of 8.
constexpr int kGemvMaxRows = 8;
void launch_gemv_bf16(const uint16_t* w, const uint16_t* x, float* y, int n_rows, int n, int k, bool accumulate,
                      cudaStream_t s);

}  // namespace ninfer::cuda
