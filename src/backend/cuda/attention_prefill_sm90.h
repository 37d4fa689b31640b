// The Hopper (sm_90a) prefill attention kernel (attention_prefill_sm90.cu): host interface
// for PagedAttention (attention.cu), which plans its work items and dispatches to it for the
// prefill-tile class on a compute capability 9.0 device. Semantics are PagedAttention::run's
// (attention.h); what differs is the tile (kPrefillSm90Rows query rows of one chunk and kv
// head per CTA) and the sliding window, which this kernel honours.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/kv_cache.h"

namespace ninfer::cuda {

// Query rows per CTA: two consumer warpgroups of 64 rows (rows = token * group + q head).
constexpr int kPrefillSm90Rows = 128;

struct PrefillSm90Params {
  const float* q;              // [n_tokens_total][q_ld] fp32, head h at h * head_dim (post rope)
  int q_ld = 0;
  const uint8_t* k_pool;       // [n_pool_blocks] (page, kv head) K blocks (kv_cache.h)
  const uint8_t* v_pool;       // [n_pool_blocks] V blocks
  const int32_t* tables;       // page ids of every chunk, concatenated (work item's offset)
  const int32_t* work;         // [n_work][8] row0, tok0, n_tokens, start_pos, table offset, 0, 0, 0
  int n_work = 0;
  int n_heads = 0, n_kv_heads = 0, head_dim = 0, group = 1;
  int q_rot = 0, o_rot = 0;    // rotations as AttnShape's (0 none, 1 H_D, 2 H_64 per group)
  int window = 0;              // AttnShape::window (0: none)
  float scale_log2 = 0.0f;     // softmax scale * log2(e)
  int n_splits = 1;
  uint16_t* out;               // [n_tokens_total][out_ld] bf16 (one split)
  int out_ld = 0;
  float* part_o;               // [n_splits][n_rows_total][head_dim] (several splits; merge_kernel's)
  float* part_ml;              // [n_splits][n_rows_total][2]
  int n_rows_total = 0;
  CacheKind kind = CacheKind::Bf16;
  int k_cb = 0, v_cb = 0, k_blk = 0, v_blk = 0;  // code bytes of a row, bytes of a block, per side
  const uint32_t* e8p_abs;     // [256] rk2v4-e8's E8P abs table (kv_codecs.cuh)
  int n_pool_blocks = 0;       // (largest page id + 1) * n_kv_heads: the bf16 tensor maps' extent
  int pipe = 0;                // consumer schedule: 1 S of a tile overlapped with P V of the last; 0 one at a time
};

#if defined(NINFER_PREFILL_SM90)
// True when this build carries the sm_90a kernel and the device is compute capability 9.0.
bool prefill_sm90_available();
// Whether PagedAttention uses it without being told to (force_prefill_kernel): the
// environment's NINFER_CUDA_PREFILL_SM90, default 0 until the kernel has passed every test on
// the GPU (docs/NOTES.md, issue 23).
bool prefill_sm90_default();
// Resident CTAs per SM of the kernel for (head_dim, kind) (the planner's slots).
int prefill_sm90_ctas_per_sm(int head_dim, CacheKind kind);
void launch_prefill_sm90(const PrefillSm90Params& p, cudaStream_t s);
#else
inline bool prefill_sm90_available() { return false; }
inline bool prefill_sm90_default() { return false; }
inline int prefill_sm90_ctas_per_sm(int, CacheKind) { return 0; }
inline void launch_prefill_sm90(const PrefillSm90Params&, cudaStream_t) {}
#endif

}  // namespace ninfer::cuda
