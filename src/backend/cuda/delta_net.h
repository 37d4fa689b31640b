// The hybrids' kernels (Qwen3-Next / Qwen3.5, issue 26): Gated DeltaNet in its recurrent form
// (backend/cpu/delta_net.h is the oracle, same definition), gated attention's split and gate,
// and the shared expert's gated add. Raw pointers and params structs.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ninfer::cuda {

// One sequence's tokens of a forward: rows [t0, t0 + n) of the activations, its state slot,
// and whether it starts at position 0 (a zero state).
struct DeltaNetChunk {
  int32_t t0, n, slot, fresh;
};

struct DeltaNetParams {
  int nk = 0, nv = 0, dk = 0, dv = 0, conv = 0;
  bool grouped = false;             // Qwen3-Next's in_proj_qkvz / in_proj_ba layout
  const float* proj = nullptr;      // [n_tokens][ld_proj] projection rows
  int ld_proj = 0;
  const float* conv_w = nullptr;    // [conv_dim][conv]
  const float* a_log = nullptr;     // [nv]
  const float* dt_bias = nullptr;   // [nv]
  const float* norm_w = nullptr;    // [dv]
  float eps = 1e-6f;
  float* state = nullptr;           // slots of slot_floats; this layer's part at layer_offset:
  size_t slot_floats = 0, layer_offset = 0;  // conv history [conv - 1][conv_dim], then S [nv][dk][dv]
  const DeltaNetChunk* chunks = nullptr;  // [n_chunks] on the device
  int n_chunks = 0;
  int n_tokens = 0;
  float* y = nullptr;               // scratch [n_tokens][conv_dim]: the conv's output
  uint16_t* out = nullptr;          // [n_tokens][nv * dv] bf16 (the input of out_proj)
};

// The whole layer's mixer: conv (one thread per channel and sequence), then the delta rule and
// gated norm (one block per value head and sequence). Errors (CUDA) when dk * dv floats of
// state do not fit one block's shared memory.
void launch_delta_net(const DeltaNetParams& p, cudaStream_t s);

// qkv rows [n_tokens, 2 q_dim + 2 kv_dim] as q_proj | k_proj | v_proj wrote them ([query_h |
// gate_h] per head) become [n_tokens, q_dim + 2 kv_dim] rows (same buffer, compacted through
// scratch [n_tokens, 2 q_dim + 2 kv_dim]) and gate [n_tokens, q_dim].
void launch_split_attn_gate(float* qkv, float* scratch, float* gate, int n_tokens, int n_heads, int head_dim,
                            int kv_dim, cudaStream_t s);
// att = bf16(att * sigmoid(gate)).  att: [n] bf16; gate: [n] fp32
void launch_attn_gate(uint16_t* att, const float* gate, size_t n, cudaStream_t s);
// x[t, :] += alpha * sigmoid(g[t]) * y[t, :].  y, x: [n_tokens, dim]; g: [n_tokens]
void launch_gated_add(const float* y, const float* g, int n_tokens, int dim, float alpha, float* x, cudaStream_t s);

}  // namespace ninfer::cuda
