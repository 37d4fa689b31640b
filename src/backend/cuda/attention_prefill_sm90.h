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
  float cap2 = 0.0f, cap_k = 0.0f;  // soft cap (AttnShape::softcap) as KernelParams' (0: none)
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
  int pipe = 0;                // consumer schedule: 0 one tile at a time; 1 S of a tile overlapped with P V of
                               // the last; 2 as 1, the two consumer warpgroups taking turns to issue (ping-pong)
  // Segments (PagedAttention's expansion of compressed pages into a bounded bf16 scratch pool,
  // a range of key tiles at a time): this launch walks only key tiles [kt_seg_lo, kt_seg_hi)
  // (tiles of 128 keys, 64 at head_dim 256); seg_acc: fold partial slot 0 (O, m, l of the
  // earlier segments) into the result first; seg_to_part: write the result to partial slot 0
  // (n_splits 1) instead of out, for the next segment.
  int kt_seg_lo = 0, kt_seg_hi = 1 << 30;
  int seg_acc = 0, seg_to_part = 0;
};

#if defined(NINFER_PREFILL_SM90)
// True when this build carries the sm_90a kernel and the device is compute capability 9.0.
bool prefill_sm90_available();
// Whether PagedAttention uses it without being told to (force_prefill_kernel): the
// environment's NINFER_CUDA_PREFILL_SM90, default 1.
bool prefill_sm90_default();
// Resident CTAs per SM of the kernel for head_dim (the planner's slots).
int prefill_sm90_ctas_per_sm(int head_dim);
// p.kind must be Bf16: the kernel reads bf16 pages only, through the copy engine.
void launch_prefill_sm90(const PrefillSm90Params& p, cudaStream_t s);
// Expands (page, kv head) blocks of src's pools (src.kind, its code and block sizes, n_kv_heads,
// head_dim, e8p_abs) into bf16 blocks of dst_k / dst_v ([page][kv head][64][head_dim]):
// pairs[2 i] a source page id, pairs[2 i + 1] its scratch page id (device memory).
void launch_prefill_expand(const PrefillSm90Params& src, const int32_t* pairs, int n_pairs, uint16_t* dst_k,
                           uint16_t* dst_v, cudaStream_t s);
#else
inline bool prefill_sm90_available() { return false; }
inline bool prefill_sm90_default() { return false; }
inline int prefill_sm90_ctas_per_sm(int) { return 0; }
inline void launch_prefill_sm90(const PrefillSm90Params&, cudaStream_t) {}
inline void launch_prefill_expand(const PrefillSm90Params&, const int32_t*, int, uint16_t*, uint16_t*, cudaStream_t) {}
#endif

}  // namespace ninfer::cuda
