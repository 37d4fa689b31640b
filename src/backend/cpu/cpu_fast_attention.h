// The fast path's paged attention over a KV cache in any registered format (the reference is
// CpuBackend::attend in cpu_backend.cpp). Rows are decoded one page at a time into a small
// per-thread tile (never the whole context), in the formats' stored basis: q is rotated by
// the K rotation once and the output rotated back by the V rotation.
//   - few query tokens (decode): split-K over pages with an online softmax per split, the
//     splits merged at the end (flash-decoding);
//   - many (prefill): the visible keys decoded once per KV head into packed fp32 K and V^T,
//     then S = Q K^T and O = P V as fp32 GEMMs with causal limits.
#pragma once
#include <cstdint>

#include "backend/cpu/cpu_fast.h"
#include "kv/format.h"

namespace ninfer::cpu::fast {

struct AttnParams {
  const KvFormat* fmt = nullptr;
  const uint8_t* k_pool = nullptr;  // [n_pages][n_kv_heads][kPageSize][k_row] (one layer)
  const uint8_t* v_pool = nullptr;
  size_t k_row = 0, v_row = 0;      // bytes per row
  const int32_t* block_table = nullptr;
  int start_pos = 0, n_tokens = 0;  // the chunk: tokens at [start_pos, start_pos + n_tokens)
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int window = 0;                   // keys p - window < k <= p; 0: none
  float scale = 1.0f, softcap = 0.0f;
  const float* q = nullptr;         // [n_tokens][ldq], the layer's q heads first (post rope)
  int ldq = 0;
  float* out = nullptr;             // [n_tokens][n_heads * head_dim]
};

void attend(const AttnParams& p, Isa isa, ThreadPool& pool);

}  // namespace ninfer::cpu::fast
