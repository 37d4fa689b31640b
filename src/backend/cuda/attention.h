// Paged attention over the CUDA KV cache (layout in kv_cache.h) for bf16, int8, the
// compressed caches (int4, rk4v4-e8, rk2v4-e8) and the minifloat ones (fp8, nvfp4, k8v4),
// head_dim 64, 128, 256, any GQA ratio, causal.
//
// Work: a query *row* is (query token i of a chunk, q head j of a kv-head group): rows of one
// (chunk, kv head) are i * group + j, so the K/V of a kv head are read once for every q head
// that shares them. A CTA (4 warps) takes a tile of rows of one chunk, one kv head and one
// KV split (a range of pages). Q is read as fp32 (post rope) and rotated by the format's K
// rotation. Three kernels (attention.cu):
//  - decode tiles (<= 16 rows, e.g. one token and its kv-head group), bf16 cache: each warp
//    owns keys [16 w, 16 w + 16) of every page of the split and streams them through its own
//    cp.async ring; S = Q K^T with bf16 tensor-core MMAs (m16n8k16, fp32 accumulate); online
//    softmax in registers (base-2); P re-packed in registers as the A operand of P V; no CTA
//    barrier inside the page walk; the 4 warps combine (max, sum, O) at the end.
//  - decode tiles, int8 and compressed caches (int4, rk4v4-e8, rk2v4-e8): decode_comp_kernel
//    (attention_compressed.cuh), tiles of <= 8 rows, no shared memory for K or V: each lane
//    loads the raw codes its tensor-core fragments need straight into registers (the next
//    slice's while the current one computes) and decodes each code once. Q is quantised to
//    int8 per (row, 64-group) (step amax/127); S^T = K Q^T on int8 tensor cores (m = 16 keys,
//    n = 8 rows: a lane's K fragment is exactly one 8-dim code per key; Q's head dims are
//    permuted to match, for free), exact int32 sums per group scaled by q_scale * k_scale;
//    P^T by movmatrix; O^T = V^T P^T on bf16 tensor cores, the V nibbles turned into exact
//    bf16 subnormals (n 2^-133) by one byte permute per two values (int8: exact fp16 V codes
//    on fp16 tensor cores, P times the V scale over a running maximum of the V scales).
//    Offsets of the raw nibbles (E8's coset bit and +-1/2 shifts, int4's sign) are added back
//    exactly by small extra MMAs against per-block Q sums (K) or P sums (V); rk2v4-e8's E8P K
//    codes are a magnitude entry XOR a signs-and-shift entry (4 y exactly) from two small
//    shared tables (built once on the host), copied once per bank group. The Q
//    prologue (load, rotation, quantisation) runs in registers, one warp per two rows, while
//    the first slices load; int4 and rk2v4-e8 take page ids from a per-warp shared ring that
//    cp.async fills 32 pages ahead; a slice's row maxima are reduced (and O rescaled) only
//    when a score exceeds its row's running maximum, for rk2v4-e8 (and int4, rk4v4-e8 at
//    head_dim <= 128) by more than 8 (log2 units: P <= 2^8 against the stale maximum, the
//    same result; rk4v4-e8 and rk2v4-e8 start that maximum at a finite -1e30, so their
//    exponentials need no -inf guards). On sm_90 the kernel is a programmatic dependent
//    launch of its predecessor: its work item and first page ids are read before it waits
//    (they overlap the predecessor when that lets it start early: the merge kernel, the KV
//    append), and its grid is capped with dynamic shared memory at the planned CTAs
//    per SM, so that an early start lands it as planned. Up to 128 KV splits (batch 1 with 2
//    kv heads). The loop over slices has variants (PIPE: one or two register sets, software
//    pipelined or not), chosen per format and head_dim (comp_pipe, attention.cu).
//  - decode tiles, minifloat caches (fp8, nvfp4, k8v4; attention_lowbit.cuh): the bf16 walk
//    on fp16 tensor cores, each warp expanding its raw 16-key slice into fp16 tiles (exact:
//    e4m3 codes times 2^-8, the fp8 row scales applied to S and folded into P against a
//    running maximum; or e2m1 times its e4m3 block scale); Q scaled per row by a power of two.
//  - prefill tiles (64 rows, 32 at head_dim 256): the CTA walks pages with a shared cp.async
//    ring (int8 and compressed codes expanded to bf16 in shared memory), S and P through
//    shared memory.
// Sliding window and soft cap (AttnShape::window, ::softcap): the planner gives each work item
// the first page any of its rows sees (its first row's lowest key, pos - window + 1), and its
// splits divide the pages from there to its last row's, so pages wholly outside every row's
// window are not read (decode cost O(window)); keys of a walked page below a row's bound are
// masked like those past its causal bound. The soft cap, c tanh(s / c) of the scaled score s,
// is applied to each fp32 score before the mask and the running maximum (the register decode
// kernel's: after its groups' int32 sums are scaled and summed), in the log2 domain as
// c2 - 2 c2 / (2^(2 s2 / c) + 1) (attention.cu, softcap_log2). The decode kernels have both only
// in a second instantiation (template argument EXT, taken when either is set: the default
// path's code is unchanged; the register decode kernel's EXT variant exists for its default
// loop and K decode only); the prefill kernel tests them at run time (uniform branches).
// On a compute capability 9.0 device (a build with sm_90 in its architectures) prefill tiles of
// 128 rows may go instead to the FlashAttention-3-style kernel of attention_prefill_sm90.cu
// (warp-specialised, bulk tensor copies or producer-expanded tiles, wgmma, softmax in
// registers; every format; windows, no soft cap): opt-in for now (NINFER_CUDA_PREFILL_SM90=1,
// or force_prefill_kernel(2)) until its GPU tests pass for every format (docs/NOTES.md).
// With one split a CTA normalises, applies the format's V rotation back and writes bf16; with
// several, each split writes its unnormalised O, running max and sum (fp32), and a merge
// kernel combines them by log-sum-exp (one CTA per row and 64-column chunk, or per row when
// the V rotation spans it), launched on sm_90 as a programmatic dependent of the decode kernel;
// past its own wait it lets its dependent (the next decode step) start. Splits are chosen so
// the CTAs fill one wave of the GPU's resident slots (occupancy queried per kernel), then
// trimmed so that none of them is empty (each walks ceil(pages / splits) pages).
//
// Error budget (what tests/cuda/test_attention.cpp checks against an fp64 reference on the
// decoded cache): Q and P are rounded to bf16 (relative error <= 2^-9 each), or Q quantised to
// int8 per row-group in the register decode kernel (P: bf16, or fp16 with int8 V); int8 and
// compressed values are rounded to bf16 after dequantisation in prefill (<= 2^-9); everything
// else accumulates in fp32 (int32 for int8 products).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/kv_cache.h"

namespace ninfer::cuda {

// Most KV splits of one launch (merge_kernel's weights live in shared memory).
constexpr int kMaxSplits = 128;

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
  int window = 0;  // sliding window: a query at position p sees keys k with p - window < k <= p; 0: all keys
  float softcap = 0.0f;  // scores s (after the 1/sqrt(head_dim) scale) become softcap * tanh(s / softcap) before the softmax; 0: none
};

// The sm_90 prefill kernel reads bf16 pages only: pages of the other kinds are expanded per
// layer into a bf16 scratch pool of at most kPrefillScratchBytes (kv/workspace.h, K and V), a
// segment of key pages at a time when a batch's prefill chunks see more (PagedAttention::plan).
// One segment of that expansion, offsets in ints into the plan's device metadata: n_pairs
// (source page id, scratch page id) pairs, the chunks' page tables remapped to scratch ids (one
// table for every segment), and the kernel's key tiles [kt_lo, kt_hi).
struct PrefillSegment {
  size_t pairs_off = 0, table_off = 0;
  int n_pairs = 0, kt_lo = 0, kt_hi = 0;
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
  // Every slot of the pools' pages, written or not, must hold finite scales (zero the pools
  // when they are allocated: the encoders write finite ones): the register decode kernel
  // multiplies a masked key's V scale by its P of exactly 0.
  // history_ready: every page slot below each chunk's start_pos was complete before the
  // previous kernel on `s` started (that kernel writes at most the chunks' new tokens, as the
  // KV append does), so the register decode kernel may load its first pages before it waits
  // for that kernel (on sm_90, where that kernel may let it start early).
  // q_ready: q was complete before the previous kernel on `s` started (that kernel does not
  // write it), so that the register decode kernel may read and prepare it before it waits for
  // that kernel (int4, rk4v4-e8 at head_dim <= 128, and rk2v4-e8 where history_ready lets it
  // read its first pages early too; attention_compressed.cuh, pro_early).
  void run(const float* q, int q_ld, const uint8_t* k_pool, const uint8_t* v_pool, uint16_t* out, int out_ld,
           cudaStream_t s, bool history_ready = false, bool q_ready = false);

  // Tests and benchmarks: force the number of KV splits (0: automatic).
  void force_splits(int n) { forced_splits_ = n; }
  // Tests: the register decode kernel's CTAs per SM (-1: the planner's cap, 0: none, n: at
  // most n; attention.cu, pad_for_ctas_per_sm).
  void force_cta_cap(int n) { forced_cap_ = n; }
  // Tests and benchmarks, before plan(): the prefill-tile kernel (0: automatic, the sm_90
  // kernel where available unless NINFER_CUDA_PREFILL_SM90=0; 1: the portable
  // kernel; 2: the sm_90 kernel, or the portable one where it is not available).
  // prefill_sm90() says what the last plan() chose.
  void force_prefill_kernel(int k) { forced_prefill_ = k; }
  bool prefill_sm90() const { return prefill_sm90_; }
  // Tests, before plan(): the scratch pool's capacity in pages (0: kPrefillScratchBytes' worth),
  // so that small inputs take the several-segment path. prefill_segments(): the last plan's.
  void force_prefill_scratch_pages(int n) { forced_scratch_pages_ = n; }
  int prefill_segments() const { return int(segs_.size()); }
  int splits(int cls) const { return cls_[cls].splits; }  // cls 0: decode tiles, 1: prefill tiles
  const AttnShape& shape() const { return shape_; }
  // Everything run() bakes into its launches besides the device metadata it reads: buffers,
  // grid sizes and splits. A captured CUDA graph of run() stays valid while this is unchanged.
  std::vector<uintptr_t> launch_signature() const {
    return {uintptr_t(d_meta_), uintptr_t(d_part_), uintptr_t(n_rows_total_), uintptr_t(cls_[0].n_work),
            uintptr_t(cls_[0].splits), uintptr_t(cls_[1].n_work), uintptr_t(cls_[1].splits),
            uintptr_t(cls_[0].d_work), uintptr_t(cls_[1].d_work), uintptr_t(d_tables_),
            uintptr_t(cls_[0].ctas_per_sm), uintptr_t(prefill_sm90_), uintptr_t(n_pool_blocks_),
            uintptr_t(d_scratch_), uintptr_t(scratch_pages_), uintptr_t(segs_.size())};
  }

 private:
  struct Class {
    int mt = 1;
    int rows = 16;  // query rows per tile (the compressed kinds' decode kernel: 8)
    std::vector<int32_t> work;  // host: the work items (attention.cu, kWorkInts ints each)
    int n_work = 0, splits = 1;
    int slots = 0;  // CTAs of this class resident on the whole GPU at once
    int ctas_per_sm = 0;  // the register decode kernel's cap (attention.cu, pad_for_ctas_per_sm; 0: none)
    const int32_t* d_work = nullptr;
  };
  AttnShape shape_;
  Class cls_[2];
  int forced_splits_ = 0;
  int forced_cap_ = -1;
  int forced_prefill_ = 0;
  bool prefill_sm90_ = false;   // the last plan() sends prefill tiles to the sm_90 kernel
  int slots_prefill_[2] = {0, 0};  // resident prefill CTAs on the GPU: portable kernel, sm_90 kernel
  int n_pool_blocks_ = 0;       // (largest planned page id + 1) * n_kv_heads (the sm_90 kernel's tensor maps)
  int num_sms_ = 0;
  int n_rows_total_ = 0;
  std::vector<int32_t> host_meta_;
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  void* d_meta_ = nullptr;
  size_t d_meta_bytes_ = 0;
  const int32_t* d_tables_ = nullptr;
  // rk2v4-e8: the E8P abs table and the decode tables built from it (E8pTables, kv_codecs.cuh)
  const uint32_t* e8p_abs_ = nullptr;
  const uint2* e8p_mag_ = nullptr;
  const uint2* e8p_sgn_ = nullptr;
  float* d_part_ = nullptr;  // [splits][n_rows_total][head_dim] partial O, then [splits][n_rows_total][2] (m, l)
  size_t d_part_bytes_ = 0;
  std::vector<PrefillSegment> segs_;  // the last plan's expansion segments (compressed kinds, sm_90 kernel)
  int forced_scratch_pages_ = 0;
  uint16_t* d_scratch_ = nullptr;  // bf16 scratch pool: K [scratch_pages_][n_kv_heads][64][D], then V
  int scratch_pages_ = 0;
};

}  // namespace ninfer::cuda
