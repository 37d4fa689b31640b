// Paged attention over the CUDA KV cache (layout in kv_cache.h) for bf16 and int8 caches,
// head_dim 64, 128, 256, any GQA ratio, causal. One kernel family serves decode and prefill:
//
// Work: a query *row* is (query token i of a chunk, q head j of a kv-head group): rows of one
// (chunk, kv head) are i * group + j, so the K/V of a kv head are read once for every q head
// that shares them. A CTA (4 warps) takes a tile of M = 16 * MT rows of one chunk, one kv head
// and one KV split (a range of pages), and walks its pages:
//   1. cp.async brings the page's K and V blocks into a ring of shared-memory stages (int8 is
//      then dequantized to bf16, code * fp16 scale rounded to bf16, in shared memory);
//   2. S = Q K^T with bf16 tensor-core MMAs (m16n8k16), fp32 accumulate; each warp takes 16
//      keys of the page for all M rows; causal / length mask; S goes to shared memory;
//   3. online softmax per row (base-2 exponent, running max and sum kept in fp32); P is
//      rounded to bf16 and the row sum is the sum of the rounded P, so the weights applied to
//      V sum to exactly the normaliser;
//   4. O = diag(alpha) O + P V with MMAs; each warp owns D/4 output dims of all M rows.
// With one split the CTA normalises, applies the format's V rotation back and writes bf16;
// with several, each split writes its unnormalised O, running max and sum (fp32), and a merge
// kernel combines them by log-sum-exp.
//
// Q is read as fp32 (post rope), rotated by the format's K rotation and rounded to bf16.
// Decode-class tiles (chunk rows <= 16: e.g. one token and a group of up to 16 heads) use
// MT = 1 and split long contexts over many CTAs; prefill-class tiles use MT = 4 (MT = 2 at
// head_dim 256) and split only when there are few tiles.
//
// Error budget (what tests/cuda/test_attention.cpp checks against an fp64 reference on the
// decoded cache): Q and P are rounded to bf16 (relative error <= 2^-9 each), int8 values are
// rounded to bf16 after dequantization (<= 2^-9); everything else accumulates in fp32.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/kv_cache.h"

namespace ninfer::cuda {

// One sequence's part of a batch (host side).
struct AttnSeq {
  int tok0 = 0;        // row of its first query token in the batch's q / out buffers
  int n_tokens = 0;    // query tokens (new tokens of the chunk)
  int start_pos = 0;   // cached tokens before them; the chunk attends keys [0, start_pos + i]
  const int32_t* block_table = nullptr;  // [n_blocks] physical page ids (host memory)
  int n_blocks = 0;
};

// Rotations as in kv/format.h KvRotation: 0 none, 1 H_D over the head, 2 H_64 per group.
struct AttnShape {
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  CacheKind kind = CacheKind::Bf16;
  int q_rotation = 0;  // the format's K rotation, applied to Q
  int o_rotation = 0;  // the format's V rotation, applied back to the output
};

// Plans once per batch (plan(): uploads block tables and the work list), then runs per layer.
class PagedAttention {
 public:
  explicit PagedAttention(const AttnShape& shape);
  ~PagedAttention();
  PagedAttention(const PagedAttention&) = delete;
  PagedAttention& operator=(const PagedAttention&) = delete;

  // seqs: [n_seqs]; n_tokens_total: rows of the q / out buffers. The host memory of `seqs`
  // may be reused after return; the upload is ordered on `s`.
  void plan(const AttnSeq* seqs, int n_seqs, int n_tokens_total, cudaStream_t s);
  // q: [n_tokens_total, q_ld] fp32, head h at q + t * q_ld + h * head_dim (post rope).
  // k_pool, v_pool: one layer's pools. out: [n_tokens_total, out_ld] bf16, head h at h * head_dim.
  void run(const float* q, int q_ld, const uint8_t* k_pool, const uint8_t* v_pool, uint16_t* out, int out_ld,
           cudaStream_t s);

  // Tests and benchmarks: force the number of KV splits (0: automatic).
  void force_splits(int n) { forced_splits_ = n; }
  int splits(int cls) const { return cls_[cls].splits; }  // cls 0: decode tiles, 1: prefill tiles
  const AttnShape& shape() const { return shape_; }
  // Everything run() bakes into its launches besides the device metadata it reads: buffers,
  // grid sizes and splits. A captured CUDA graph of run() stays valid while this is unchanged.
  std::vector<uintptr_t> launch_signature() const {
    return {uintptr_t(d_meta_), uintptr_t(d_part_), uintptr_t(n_rows_total_), uintptr_t(cls_[0].n_work),
            uintptr_t(cls_[0].splits), uintptr_t(cls_[1].n_work), uintptr_t(cls_[1].splits),
            uintptr_t(cls_[0].d_work), uintptr_t(cls_[1].d_work), uintptr_t(d_tables_)};
  }

 private:
  struct Class {
    int mt = 1;
    std::vector<int32_t> work;  // host: (chunk, row0) pairs
    int n_work = 0, splits = 1;
    int slots = 0;  // CTAs of this class resident on the whole GPU at once
    const int32_t* d_work = nullptr;
  };
  AttnShape shape_;
  Class cls_[2];
  int forced_splits_ = 0;
  int num_sms_ = 0;
  int n_rows_total_ = 0;
  std::vector<int32_t> host_meta_;
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  void* d_meta_ = nullptr;
  size_t d_meta_bytes_ = 0;
  const int32_t* d_chunks_ = nullptr;
  const int32_t* d_tables_ = nullptr;
  float* d_part_ = nullptr;  // [splits][n_rows_total][head_dim] partial O, then [splits][n_rows_total][2] (m, l)
  size_t d_part_bytes_ = 0;
};

}  // namespace ninfer::cuda
