// Gated DeltaNet (Qwen3-Next / Qwen3.5 linear attention) on the CPU, in fp32: the recurrent
// form, one token after another, which is the oracle for every faster formulation (the chunked
// GPU kernel included). Raw pointers and a params struct, no model types.
//
// For each token t of one sequence, from its projection row (q | k | v | z | b | a flat, or
// Qwen3-Next's per-key-head groups [q k v z] then [b a]):
//   x = q | k | v; y = silu(causal depthwise conv of x over the last `conv` tokens), the
//   tokens before this call taken from conv_state (and conv_state left holding the last
//   conv - 1 inputs); q, k = l2norm(y's q, k heads) (eps 1e-6 inside the root), q /= sqrt(dk);
//   for each value head h (key head h / (nv / nk)):
//     g = -exp(a_log[h]) * softplus(a[h] + dt_bias[h]),  beta = sigmoid(b[h])
//     S_h = exp(g) S_h;  S_h += k (beta (v_h - S_h^T k))^T;  o_h = S_h^T q      (S_h [dk][dv])
//     out_h = o_h * rsqrt(mean(o_h^2) + eps) * norm_w * silu(z_h)
#pragma once
#include <functional>

namespace ninfer::cpu {

struct DeltaNetParams {
  int nk = 0, nv = 0, dk = 0, dv = 0, conv = 0;
  bool grouped = false;  // Qwen3-Next's in_proj_qkvz / in_proj_ba layout
  int n_tokens = 0;
  const float* proj = nullptr;  // [n_tokens][ld_proj]
  int ld_proj = 0;
  const float* conv_w = nullptr;   // [conv_dim][conv]
  const float* a_log = nullptr;    // [nv]
  const float* dt_bias = nullptr;  // [nv]
  const float* norm_w = nullptr;   // [dv]
  float eps = 1e-6f;
  float* conv_state = nullptr;  // [conv - 1][conv_dim], oldest first; updated
  float* state = nullptr;       // [nv][dk][dv]; updated
  float* out = nullptr;         // [n_tokens][ld_out], nv * dv used
  int ld_out = 0;
  // 0: the recurrent form. C > 0: the chunked form for the delta rule (transformers'
  // torch_chunk_gated_delta_rule, the published formulation): per chunk of C tokens,
  // L = strictly lower (beta_i k_i . k_j) exp(G_i - G_j) (G the cumulative g in the chunk),
  // U = (I + L)^-1 (beta v), W = (I + L)^-1 (beta k exp(G)), v' = U - W S,
  // o_i = exp(G_i) q_i S + sum_{j <= i} (q_i . k_j) exp(G_i - G_j) v'_j,
  // S = exp(G_last) S + sum_j exp(G_last - G_j) k_j v'_j^T. Equal to the recurrence up to rounding.
  int chunk = 0;
};

// Runs fn(i) for i in [0, n), possibly in parallel.
using ParallelFor = std::function<void(int n, const std::function<void(int)>& fn)>;

void delta_net_forward(const DeltaNetParams& p, const ParallelFor& par);

}  // namespace ninfer::cpu
