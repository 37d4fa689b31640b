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
#include "kv/kv_window.h"

namespace ninfer::cpu::fast {

// The exact window of one sequence in one layer (kv/kv_window.h), as attention reads it.
struct ExactKv {
  KvWindow w;                        // w.on() false: no window
  const uint16_t* k = nullptr;       // [w.exact_pages()][n_kv_heads][kPageSize][head_dim] bf16, raw basis
  const uint16_t* v = nullptr;
  // The chunk's own rows (raw basis, fp32; read rounded to bf16): token t, KV head h at
  // k_new[t * ld_new + h * head_dim]. Keys of the chunk come from here, older ones from k / v.
  const float* k_new = nullptr;
  const float* v_new = nullptr;
  int ld_new = 0;
  int new_start = 0;                 // position of the chunk's first token
};

// Writes key `pos` of KV head h, side 0 (K) or 1 (V), as the window holds it (bf16), into
// out [head_dim] in the format's stored basis (rotated by the side's rotation).
void load_exact(const ExactKv& e, const KvFormat& fmt, int side, int n_kv_heads, int head_dim, int h, int pos,
                float* out);

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
  ExactKv exact;                    // the exact window (kv/kv_window.h); off by default
};

void attend(const AttnParams& p, Isa isa, ThreadPool& pool);

}  // namespace ninfer::cpu::fast
