// CPU reference kernels: scalar-readable fp32 code, vectorised by the compiler and threaded
// with OpenMP. These are the oracle for the CUDA kernels.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/weight_format.h"

namespace ninfer::cpu {

// y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]).  x: [m, k], w: [n, k] row-major, y: [m, n]
void matmul_wt(const float* x, const float* w, const float* bias, float* y, int m, int n, int k);
// The same into columns of a wider y: y[i * ldy + j].
void matmul_wt_ld(const float* x, const float* w, const float* bias, float* y, int m, int n, int k, int ldy);
// y[m, j] (row stride ldy) = sum_k x[m, k] * W[j, k] (+ bias[j]) for a quantised W [rows, cols]
// (model/weight_format.h), dequantised on the fly; bit-identical to matmul_wt on the
// dequantised W.  x: [m, w.cols], bias: [w.rows] or null
void matmul_wt_quant(const float* x, const QuantMatrix& w, const float* bias, float* y, int m, int ldy);

// x: [n_rows, dim] normalised in place (or into out): out = x / rms(x) * weight
void rmsnorm(const float* x, const float* weight, float* out, int n_rows, int dim, float eps);

// Rotary embedding, half-split (rotate_half) convention as in transformers, over the first
// rotary_dim dims of each head (the rest pass through), cos and sin times attention_factor.
// x: [n_heads, head_dim] for one token at position pos; inv_freq: [rotary_dim / 2]
void rope_inplace(float* x, int n_heads, int head_dim, int pos, const float* inv_freq, int rotary_dim,
                  float attention_factor = 1.0f);

// out[i] = silu(gate[i]) * up[i]
// MoE routing of one token: softmax of its n_experts router logits (fp32 values, a double
// sum), the k largest in a stable order (ties: the lower expert first), their weights
// renormalised to sum to 1 when norm. ids, w: [k].
void moe_route(const float* logits, int n_experts, int k, bool norm, int32_t* ids, float* w);

void silu_mul(const float* gate, const float* up, float* out, size_t n);

// out[i] = gelu_tanh(gate[i]) * up[i]  (transformers' gelu_pytorch_tanh)
void gelu_tanh_mul(const float* gate, const float* up, float* out, size_t n);

}  // namespace ninfer::cpu
