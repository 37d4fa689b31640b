// Paged attention kernels and their planner; the algorithm, work split and error budget are
// described in attention.h.
//
// Shared memory of a prefill-tile CTA (offsets computed by SmemLayout, identically on host
// and device; the bf16 decode kernel's layout is DecodeLayout below):
//   big    ring of STAGES page stages; a stage holds the K block then the V block of one
//          (page, kv head) as stored in global memory (kv_cache.h). bf16 stages are written
//          swizzled (below) and read by ldmatrix directly; int8 stages are plain copies that
//          are dequantized into the two bf16 working tiles Kw, Vw (also in `big`).
//          Before the page loop `big` holds Q in fp32 (rotation), after it O in fp32.
//   Qs     bf16 [M][D + 8]   (8 elements of padding: conflict-free ldmatrix rows)
//   Ss     fp32 [M][64 + 4]  scores of the current page (log2 domain)
//   Ps     bf16 [M][64 + 8]  probabilities of the current page
//   rowv   fp32 [3][M]       alpha (rescale), final max, final sum
// Swizzle of a bf16 [64][D] tile: 16-byte chunk c of row r lives at chunk c ^ (r & 7), so the
// 8 rows an ldmatrix reads fall in 8 different bank groups.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "backend/cuda/attention.h"
#include "backend/cuda/attention_prefill_sm90.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/e8p_alu.h"
#include "backend/cuda/e8p_tables.h"
#include "backend/cuda/kv_codecs.cuh"
#include "backend/cuda/kv_lowbit.cuh"
#include "kv/workspace.h"
#include "core/env.h"

namespace ninfer::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kPage = kCachePageSize;
constexpr float kLog2e = 1.4426950408889634f;

// Work item of a CTA in device memory (PagedAttention::plan): its tile's first query row and its
// chunk's tok0, n_tokens, start_pos and page-table offset, then the first page any row of the
// tile sees (the sliding window's; 0 without one), padded to 32 bytes, so that a CTA learns all
// of it in one round trip (the page ids are the next one). A separate chunk record cost a
// second, dependent round trip before the page ids (~0.3 us of a batch-1 step).
constexpr int kWorkInts = 8;

// Swizzle of a bf16 [rows][D] tile (see the top of this file).
__device__ __forceinline__ int swz(int r, int c) { return c ^ (r & 7); }

struct KernelParams {
  const float* q;
  int q_ld;
  const uint8_t* k_pool;
  const uint8_t* v_pool;
  const int32_t* tables;
  const int32_t* work;  // [n_work][kWorkInts]
  int n_heads, n_kv_heads, group;
  int q_rot, o_rot;
  float scale_log2;  // softmax scale * log2(e)
  int n_splits;
  uint16_t* out;
  int out_ld;
  float* part_o;   // [n_splits][n_rows_total][D]
  float* part_ml;  // [n_splits][n_rows_total][2]
  int n_rows_total;
  // Compressed kinds (KIND 2): the format (CacheKind value), per side the code bytes of a row
  // and the bytes of a (page, kv head) block, and the E8P decode table (rk2v4-e8 K).
  int fmt;
  int k_cb, v_cb, k_blk, v_blk;
  const uint32_t* e8p_abs;  // [256]
  const uint2* e8p_mag;     // [256] magnitude entries (e8p_tables.h; decode_comp_kernel FMT 4, 6)
  const uint2* e8p_sgn;     // [256] XOR entries (signs and t)
  // Host side only (comp_kernel_call): the CTAs per SM the planner's grid is meant to land as
  // (0: as many as fit), enforced with dynamic shared memory (pad_for_ctas_per_sm).
  int ctas_per_sm;
  int history_ready;  // decode_comp_kernel: run's history_ready (pages below start read before the wait)
  int q_ready;        // decode_comp_kernel: run's q_ready (the Q prologue before the wait; pro_early)
  // AttnShape::window and ::softcap. The decode kernels read them only in their EXT variants
  // (template argument EXT, chosen per launch by `ext`: a window or a softcap is set), so that
  // the default path's code is what it was; the prefill kernel reads them always (uniform).
  int ext;
  int window;      // 0: none
  float cap2;      // softcap * log2(e): the cap in the kernels' log2 units (0: none)
  float cap_k;     // 2 / softcap (softcap_log2)
};

// The lowest key a query row whose highest visible key is lim may see (AttnShape::window;
// window 0: key 0). Rows past the chunk's end have lim = -1 and see nothing either way.
__device__ __forceinline__ int window_lo(int lim, int window) { return window > 0 ? max(0, lim - window + 1) : 0; }

// KIND 2 (compressed caches, prefill kernel): expands rows [0, rows) of a block of codes (codes [rows][cb], then scales
// [rows][D / 64] fp16, as stored) to a swizzled bf16 [rows][D] tile; rows >= valid become 0.
// Threads tid0, tid0 + nthr, ... of the caller's group take part.
template <int D>
__device__ __forceinline__ void expand_compressed_tile(const KernelParams& p, int side, const uint8_t* src, int rows,
                                                       int valid, uint8_t* dst, int tid0, int nthr) {
  constexpr int CPR = D / 8;
  const int cb = side == 0 ? p.k_cb : p.v_cb;
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(src + rows * cb);
  for (int u = tid0; u < rows * CPR; u += nthr) {
    const int r = u / CPR, c = u % CPR;
    uint4 w = make_uint4(0, 0, 0, 0);
    if (r < valid) {
      const float sc = __half2float(__ushort_as_half(scales[r * (D / 64) + c / 8]));
      float v[8];
      expand_block8(p.fmt, side, src + r * cb, c, sc, p.e8p_abs, v);
      w.x = cvt_bf16x2(v[0], v[1]);
      w.y = cvt_bf16x2(v[2], v[3]);
      w.z = cvt_bf16x2(v[4], v[5]);
      w.w = cvt_bf16x2(v[6], v[7]);
    }
    *reinterpret_cast<uint4*>(dst + r * D * 2 + swz(r, c) * 16) = w;
  }
}

constexpr int stages_for(int D, int MT) { return D == 64 ? 4 : (D == 128 ? 3 : (MT == 1 ? 3 : 2)); }

template <int D, int KIND, int MT>
struct SmemLayout {
  static constexpr int M = 16 * MT;
  static constexpr int STAGES = stages_for(D, MT);
  // Bytes of one side's block (KIND 2: the largest compressed block, 4 bits per value; KIND 3,
  // the lowbit kinds: the fp8 block, larger than the nvfp4 one).
  static constexpr int kBlk = KIND == 0 ? kPage * D * 2
                                        : (KIND == 1 ? kPage * (D + D / 32)
                                                     : (KIND == 2 ? kPage * (D / 2 + D / 32) : kPage * D + 128));
  static constexpr int kStage = 2 * kBlk;
  static constexpr int kTile = kPage * D * 2;  // one bf16 working tile
  static constexpr int kBigRing = STAGES * kStage + (KIND != 0 ? 2 * kTile : 0);
  static constexpr int kQf = M * D * 4;
  static constexpr int kOs = M * (D + 4) * 4;
  static constexpr int kBig = (kBigRing > kOs ? (kBigRing > kQf ? kBigRing : kQf) : (kOs > kQf ? kOs : kQf));
  static constexpr int QP = D + 8, SP = kPage + 4, PP = kPage + 8;
  static constexpr int oQs = (kBig + 127) / 128 * 128;
  static constexpr int oSs = oQs + M * QP * 2;
  static constexpr int oPs = oSs + M * SP * 4;
  static constexpr int oRow = oPs + M * PP * 2;
  static constexpr int kBytes = oRow + 3 * M * 4;
};


// In-place normalised Hadamard transform of rows of `x` ([rows][pitch] fp32 in shared
// memory): rot 1 = over the first n = D values, rot 2 = over each 64-group. All threads of
// the CTA take part; ends with a barrier.
// N: the transform's length (D or 64), a compile-time constant so that the butterfly index
// arithmetic of every (unrolled) stage is shifts and masks, not integer divisions.
template <int N, int D>
__device__ void smem_rotate_n(float* x, int rows, int pitch) {
  const int pairs = rows * (D / 2);
#pragma unroll
  for (int h = 1; h < N; h <<= 1) {
    for (int q = threadIdx.x; q < pairs; q += kThreads) {
      const int r = q / (D / 2), pr = q % (D / 2);
      const int j = (pr / h) * 2 * h + (pr % h);
      float* xr = x + r * pitch;
      const float a = xr[j], b = xr[j + h];
      xr[j] = a + b;
      xr[j + h] = a - b;
    }
    __syncthreads();
  }
  const float sc = 1.0f / sqrtf(float(N));
  for (int q = threadIdx.x; q < rows * D; q += kThreads) x[(q / D) * pitch + q % D] *= sc;
  __syncthreads();
}

template <int D>
__device__ void smem_rotate(float* x, int rows, int pitch, int rot) {
  if (rot == 0) return;
  if (rot == 1) {
    smem_rotate_n<D, D>(x, rows, pitch);
  } else {
    smem_rotate_n<64, D>(x, rows, pitch);
  }
}

// smem_rotate's butterflies (stages h = 1, 2, 4, ... < n <= NMAX) on R rows held in registers
// by a whole warp, E values a lane per row (value index lane * E + e): stages h < E in
// registers, h >= E across lanes by shuffles (partner lane ^ h / E). Each value is the a + b or
// a - b of the same operands as there, stage by stage, so the results are bit-identical; the
// 1 / sqrt(n) scale is the caller's.
template <int R, int E, int NMAX>
__device__ __forceinline__ void warp_butterflies(float (&x)[R][E], int n) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int h = 1; h < NMAX; h <<= 1) {
    if (h >= n) break;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if (h < E) {
#pragma unroll
        for (int e = 0; e < E; ++e) {
          if (e & h) continue;
          const float a = x[i][e], b = x[i][e + h];
          x[i][e] = a + b;
          x[i][e + h] = a - b;
        }
      } else {
        const int m = h / E;
        const bool hi = lane & m;
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const float y = __shfl_xor_sync(0xffffffffu, x[i][e], m);
          x[i][e] = hi ? y - x[i][e] : x[i][e] + y;
        }
      }
    }
  }
}

// Output of one tile: Os [rows][OP] fp32 unnormalised O, mfin/lfin per row. One split:
// normalise, rotate back, write bf16; several: write the partials for the merge kernel.
template <int D>
__device__ void write_tile(const KernelParams& p, float* Os, int OP, const float* mfin_s, const float* lfin_s, int rows,
                           int row0, int tok0, int kvh, int split) {
  const int g = p.group, tid = threadIdx.x;
  if (p.n_splits == 1) {
    smem_rotate<D>(Os, rows, OP, p.o_rot);
    for (int idx = tid; idx < rows * D; idx += kThreads) {
      const int r = idx / D, d = idx % D, gr = row0 + r;
      const float v = Os[r * OP + d] / lfin_s[r];
      p.out[size_t(tok0 + gr / g) * p.out_ld + size_t(kvh * g + gr % g) * D + d] = f32_to_bf16_bits(v);
    }
  } else {
    for (int idx = tid; idx < rows * D; idx += kThreads) {
      const int r = idx / D, d = idx % D, gr = row0 + r;
      const size_t grow = size_t(tok0 + gr / g) * p.n_heads + kvh * g + gr % g;
      p.part_o[(size_t(split) * p.n_rows_total + grow) * D + d] = Os[r * OP + d];
    }
    for (int r = tid; r < rows; r += kThreads) {
      const int gr = row0 + r;
      const size_t grow = size_t(tok0 + gr / g) * p.n_heads + kvh * g + gr % g;
      p.part_ml[(size_t(split) * p.n_rows_total + grow) * 2] = mfin_s[r];
      p.part_ml[(size_t(split) * p.n_rows_total + grow) * 2 + 1] = lfin_s[r];
    }
  }
}

// This CTA's work item (kWorkInts above): two independent reads, one round trip.
struct WorkItem {
  int row0, tok0, n_tok, start, pfirst;
  const int32_t* table;
};
__device__ __forceinline__ WorkItem work_item(const KernelParams& p) {
  const int4 a = *reinterpret_cast<const int4*>(p.work + kWorkInts * blockIdx.x);
  const int2 b = *reinterpret_cast<const int2*>(p.work + kWorkInts * blockIdx.x + 4);  // table offset, first page
  return {a.x, a.y, a.z, a.w, b.y, p.tables + b.x};
}

// The pages [p_begin, p_begin + n_iter) of split `split` of n_splits: the pages [pfirst,
// n_pages) the tile's rows see, divided evenly (ceil(visible / n_splits) each; the merge and
// the planner assume this partition).
__device__ __forceinline__ void split_pages(int n_pages, int pfirst, int split, int n_splits, int& p_begin,
                                            int& n_iter) {
  const int vis = n_pages - pfirst;
  const int pps = (vis + n_splits - 1) / n_splits;
  const int b = min(vis, split * pps);
  p_begin = pfirst + b;
  n_iter = min(vis, b + pps) - b;
}

// The tile of a decode CTA: query rows [row0, row_end) (of R = tokens x group) of one chunk
// and kv head, and its KV split's pages [p_begin, p_begin + n_iter) of the pages those rows
// see (causal: keys < n_keys; with a window from the work item's first page on), the splits
// dividing them evenly (split_pages). M: rows per tile.
struct DecodeTile {
  int row0, kvh, split, tok0, start, g, R, row_end, n_keys, p_begin, n_iter;
  const int32_t* table;
};
template <int M>
__device__ __forceinline__ DecodeTile decode_tile(const KernelParams& p) {
  DecodeTile t;
  const WorkItem w = work_item(p);
  t.row0 = w.row0;
  t.kvh = blockIdx.y;
  t.split = blockIdx.z;
  t.tok0 = w.tok0;
  t.start = w.start;
  t.table = w.table;
  t.g = p.group;
  t.R = w.n_tok * t.g;
  t.row_end = min(t.row0 + M, t.R);
  t.n_keys = t.start + (t.row_end - 1) / t.g + 1;
  split_pages((t.n_keys + kPage - 1) / kPage, w.pfirst, t.split, p.n_splits, t.p_begin, t.n_iter);
  return t;
}

// Online-softmax step of the warp-walk decode kernels (bf16, minifloat) on one 16-row x
// 16-key tile of S in m16n8k16 accumulator layout: s[j][e] is row gq (e < 2) or gq + 8 (e >= 2)
// and key 8 j + 2 cq + e % 2, in the log2 domain, masked keys at -inf; mx0, mx1 are this
// thread's maxima of its two rows. Reduces them over the quad, moves the running maxima m0, m1,
// returns their rescale factors al0, al1 and P = exp2(s - m) in pr (0 in a row that has seen
// no key yet).
__device__ __forceinline__ void softmax_tile_step(float mx0, float mx1, const float (&s)[2][4], float (&pr)[2][4],
                                                  float& m0, float& m1, float& al0, float& al1) {
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
  const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
  al0 = mn0 == -INFINITY ? 1.0f : exp2f(m0 - mn0);
  al1 = mn1 == -INFINITY ? 1.0f : exp2f(m1 - mn1);
  m0 = mn0;
  m1 = mn1;
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float mref = e < 2 ? mn0 : mn1;
      pr[j][e] = mref == -INFINITY ? 0.0f : exp2f(s[j][e] - mref);
    }
}

// End of the warp-independent decode walks (bf16 and minifloat kernels): each of the 4
// warps holds O [16 rows][D] in MMA accumulator fragments o (rows gq, gq + 8, columns
// nt * 8 + 2 cq + {0, 1}), to be multiplied by ofac, the running max (m0, m1) of those rows and
// per-thread partial sums (l0, l1). Reduces the sums over each quad, combines the warps through
// shared memory (`big` as O [4][16][D] fp32, once every warp is done with its ring; m_w
// [4][16], then l_w [4][16], mfin [16], lfin [16] from m_w on) and writes the tile (write_tile).
template <int D>
__device__ __forceinline__ void combine_warps_and_write(const KernelParams& p, const float (&o)[D / 8][4], float ofac,
                                                        float m0, float m1, float l0, float l1, uint8_t* big,
                                                        float* m_w, int rows, int row0, int tok0, int kvh,
                                                        int split) {
  constexpr int NT = D / 8;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gq = lane / 4, cq = lane % 4;
  float* l_w = m_w + 64;
  float* mfin_s = l_w + 64;
  float* lfin_s = mfin_s + 16;
  // Row sums were kept per thread; reduce over the quad.
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  __syncthreads();  // all warps are done with their rings: `big` becomes the O exchange
  float* Ow = reinterpret_cast<float*>(big);  // [4][16][D]
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = gq + (e / 2) * 8, c = nt * 8 + 2 * cq + (e % 2);
      Ow[(warp * 16 + r) * D + c] = o[nt][e] * ofac;
    }
  if (cq == 0) {
    m_w[warp * 16 + gq] = m0;
    m_w[warp * 16 + gq + 8] = m1;
    l_w[warp * 16 + gq] = l0;
    l_w[warp * 16 + gq + 8] = l1;
  }
  __syncthreads();
  if (tid < 16) {
    float M = -INFINITY;
    for (int w = 0; w < 4; ++w) M = fmaxf(M, m_w[w * 16 + tid]);
    float Lsum = 0.0f;
    for (int w = 0; w < 4; ++w) {
      const float mw = m_w[w * 16 + tid];
      const float f = mw == -INFINITY ? 0.0f : exp2f(mw - M);
      m_w[w * 16 + tid] = f;  // now the warp's weight
      Lsum += f * l_w[w * 16 + tid];
    }
    mfin_s[tid] = M;
    lfin_s[tid] = Lsum;
  }
  __syncthreads();
  // Combine in place into warp 0's slot: Os = Ow[0] with pitch D.
  for (int idx = tid; idx < 16 * D; idx += kThreads) {
    const int r = idx / D;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; ++w) v += m_w[w * 16 + r] * Ow[w * 16 * D + idx];
    Ow[idx] = v;
  }
  __syncthreads();
  write_tile<D>(p, Ow, D, mfin_s, lfin_s, rows, row0, tok0, kvh, split);
}

// Q rows [row0, row0 + M) of a tile (rows past R, the chunk's end, are 0) from global fp32
// into Qf [M][D], rotated by the format's K rotation. Ends after the rotation's last barrier.
template <int D>
__device__ __forceinline__ void load_q_rotated(const KernelParams& p, float* Qf, int M, int row0, int R, int tok0,
                                               int kvh) {
  const int g = p.group;
  for (int idx = threadIdx.x; idx < M * D; idx += kThreads) {
    const int r = idx / D, d = idx % D, gr = row0 + r;
    Qf[idx] = gr < R ? p.q[size_t(tok0 + gr / g) * p.q_ld + size_t(kvh * g + gr % g) * D + d] : 0.0f;
  }
  __syncthreads();
  smem_rotate<D>(Qf, M, D, p.q_rot);
}

// Q rows of a tile: fp32 from global -> Qf (rotated by the K rotation) -> bf16 Qs [M][QP].
// Rows past the chunk's end are zero. Ends with a barrier.
template <int D>
__device__ void load_q_tile(const KernelParams& p, float* Qf, uint16_t* Qs, int QP, int M, int row0, int R, int tok0,
                            int kvh) {
  load_q_rotated<D>(p, Qf, M, row0, R, tok0, kvh);
  for (int idx = threadIdx.x; idx < M * D; idx += kThreads) Qs[(idx / D) * QP + idx % D] = f32_to_bf16_bits(Qf[idx]);
  __syncthreads();
}

// fp8 / nvfp4 / k8v4: decode kernel and the prefill expansion (KIND 3).
#include "backend/cuda/attention_lowbit.cuh"

template <int D, int KIND, int MT>
__global__ void __launch_bounds__(kThreads) paged_attention_kernel(KernelParams p) {
  using L = SmemLayout<D, KIND, MT>;
  constexpr int M = L::M, STAGES = L::STAGES, CPR = D / 8;  // 16-byte chunks per bf16 row
  constexpr int NT = D / 32;                                 // 8-wide output tiles per warp
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* big = smem;
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem + L::oQs);
  float* Ss = reinterpret_cast<float*>(smem + L::oSs);
  uint16_t* Ps = reinterpret_cast<uint16_t*>(smem + L::oPs);
  float* alpha_s = reinterpret_cast<float*>(smem + L::oRow);
  float* mfin_s = alpha_s + M;
  float* lfin_s = alpha_s + 2 * M;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const WorkItem wi = work_item(p);
  const int row0 = wi.row0;
  const int kvh = blockIdx.y, split = blockIdx.z;
  const int tok0 = wi.tok0, n_tok = wi.n_tok, start = wi.start;
  const int32_t* table = wi.table;
  const int g = p.group;
  const int R = n_tok * g;
  const int row_end = min(row0 + M, R);
  const int n_keys = start + (row_end - 1) / g + 1;  // keys the last row of the tile may see
  int p_begin, n_iter;  // this split's pages of those the tile sees (from the window's first, wi.pfirst)
  split_pages((n_keys + kPage - 1) / kPage, wi.pfirst, split, p.n_splits, p_begin, n_iter);

  // ---- Q: fp32 rows -> rotate -> bf16 Qs ----
  load_q_tile<D>(p, reinterpret_cast<float*>(big), Qs, L::QP, M, row0, R, tok0, kvh);

  const size_t blk_stride = size_t(L::kBlk);
  auto load_page = [&](int pg, int page, int stage) {
    const int valid = min(kPage, n_keys - pg * kPage);
    uint8_t* st = big + stage * L::kStage;
    for (int side = 0; side < 2; ++side) {
      const size_t bs = KIND >= 2 ? size_t(side == 0 ? p.k_blk : p.v_blk) : blk_stride;
      const uint8_t* src = (side == 0 ? p.k_pool : p.v_pool) + (size_t(page) * p.n_kv_heads + kvh) * bs;
      uint8_t* dst = st + side * L::kBlk;
      if constexpr (KIND == 0) {
        for (int u = tid; u < kPage * CPR; u += kThreads) {
          const int r = u / CPR, c = u % CPR;
          cp_async16(dst + r * D * 2 + swz(r, c) * 16, src + r * D * 2 + c * 16, r < valid ? 16 : 0);
        }
      } else if constexpr (KIND >= 2) {
        for (int u = tid; u < int(bs / 16); u += kThreads) cp_async16(dst + u * 16, src + u * 16, 16);
      } else {
        for (int u = tid; u < L::kBlk / 16; u += kThreads) cp_async16(dst + u * 16, src + u * 16, 16);
      }
    }
  };

  // Per-row softmax state, replicated in the TPR threads that own a row.
  constexpr int TPR = kThreads / M, CPT = kPage / TPR;
  const int srow = tid / TPR, ssub = tid % TPR;
  float m_run = -INFINITY, l_run = 0.0f;

  float o[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][nt][e] = 0.0f;

#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_iter) load_page(p_begin + s, table[p_begin + s], s);
    cp_async_commit();
  }
  // NOTE: the page id of the load issued in iteration `it` is read one iteration earlier, so
  // its global-memory latency overlaps the compute instead of stalling every iteration.
  int next_page = STAGES - 1 < n_iter ? table[p_begin + STAGES - 1] : 0;

#pragma unroll 1
  for (int it = 0; it < n_iter; ++it) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      const int nx = it + STAGES - 1;
      if (nx < n_iter) load_page(p_begin + nx, next_page, nx % STAGES);
      cp_async_commit();
      if (nx + 1 < n_iter) next_page = table[p_begin + nx + 1];
    }
    const int pg = p_begin + it;
    const int valid = min(kPage, n_keys - pg * kPage);
    const uint8_t* st = big + (it % STAGES) * L::kStage;
    const uint8_t* Kt;
    const uint8_t* Vt;
    if constexpr (KIND == 0) {
      Kt = st;
      Vt = st + L::kBlk;
    } else if constexpr (KIND == 2 || KIND == 3) {
      // Codes times their scales -> bf16 into the swizzled working tiles: int4 / E8 codes
      // (KIND 2), fp8 / nvfp4 codes (KIND 3, attention_lowbit.cuh).
      uint8_t* Kw = big + STAGES * L::kStage;
      uint8_t* Vw = Kw + L::kTile;
      auto expand = [&](int side, const uint8_t* src, uint8_t* dst) {
        if constexpr (KIND == 2) expand_compressed_tile<D>(p, side, src, kPage, valid, dst, tid, kThreads);
        else expand_lowbit_tile<D>(p, side, src, kPage, valid, dst, tid, kThreads);
      };
      expand(0, st, Kw);
      expand(1, st + L::kBlk, Vw);
      __syncthreads();
      Kt = Kw;
      Vt = Vw;
    } else {
      // Dequantize int8 codes * fp16 scale -> bf16 into the swizzled working tiles.
      uint8_t* Kw = big + STAGES * L::kStage;
      uint8_t* Vw = Kw + L::kTile;
      for (int side = 0; side < 2; ++side) {
        const int8_t* codes = reinterpret_cast<const int8_t*>(st + side * L::kBlk);
        const uint16_t* scales = reinterpret_cast<const uint16_t*>(st + side * L::kBlk + kPage * D);
        uint8_t* dst = side == 0 ? Kw : Vw;
        for (int u = tid; u < kPage * CPR; u += kThreads) {
          const int r = u / CPR, c = u % CPR;
          uint4 w = make_uint4(0, 0, 0, 0);
          if (r < valid) {
            const float sc = __half2float(__ushort_as_half(scales[r * (D / 64) + (c * 8) / 64]));
            int8_t b[8];
            if (side == 0) {
              const uint2 raw = *reinterpret_cast<const uint2*>(codes + r * D + c * 8);
              memcpy(b, &raw, 8);
            } else {  // V codes are dim-major: [D][64]
#pragma unroll
              for (int i = 0; i < 8; ++i) b[i] = codes[(c * 8 + i) * kPage + r];
            }
            w.x = cvt_bf16x2(float(b[0]) * sc, float(b[1]) * sc);
            w.y = cvt_bf16x2(float(b[2]) * sc, float(b[3]) * sc);
            w.z = cvt_bf16x2(float(b[4]) * sc, float(b[5]) * sc);
            w.w = cvt_bf16x2(float(b[6]) * sc, float(b[7]) * sc);
          }
          *reinterpret_cast<uint4*>(dst + r * D * 2 + swz(r, c) * 16) = w;
        }
      }
      __syncthreads();
      Kt = Kw;
      Vt = Vw;
    }

    // ---- S = Q K^T for keys [16 warp, 16 warp + 16) of the page ----
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float acc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        uint32_t a[4], b[4];
        ldmatrix_x4(a, Qs + (mt * 16 + lane % 16) * L::QP + ks * 16 + (lane / 16) * 8);
        const int kr = warp * 16 + (lane / 16) * 8 + lane % 8;
        const int kc = ks * 2 + (lane / 8) % 2;
        ldmatrix_x4(b, Kt + kr * D * 2 + swz(kr, kc) * 16);
        mma_bf16_16816(acc[0], a, b[0], b[1]);
        mma_bf16_16816(acc[1], a, b[2], b[3]);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = mt * 16 + lane / 4 + (e / 2) * 8;
          const int c = warp * 16 + j * 8 + 2 * (lane % 4) + (e % 2);
          const int gr = row0 + r;
          const int key = pg * kPage + c;
          const int lim = start + gr / g;  // the row's position: its last key
          const bool ok = gr < R && c < valid && key <= lim && key >= window_lo(lim, p.window);
          float v = acc[j][e] * p.scale_log2;
          if (p.cap2 != 0.0f) v = softcap_log2(v, p.cap2, p.cap_k);  // uniform
          Ss[r * L::SP + c] = ok ? v : -INFINITY;
        }
      }
    }
    __syncthreads();

    // ---- online softmax, TPR threads per row ----
    {
      const float* srow_p = Ss + srow * L::SP + ssub * CPT;
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < CPT; ++c) mx = fmaxf(mx, srow_p[c]);
#pragma unroll
      for (int off = TPR / 2; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_new = fmaxf(m_run, mx);
      const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m_run - m_new);
      float sum = 0.0f;
      uint16_t* prow = Ps + srow * L::PP + ssub * CPT;
#pragma unroll
      for (int c = 0; c < CPT; c += 2) {
        const float p0 = m_new == -INFINITY ? 0.0f : exp2f(srow_p[c] - m_new);
        const float p1 = m_new == -INFINITY ? 0.0f : exp2f(srow_p[c + 1] - m_new);
        const uint32_t pb = cvt_bf16x2(p0, p1);
        *reinterpret_cast<uint32_t*>(prow + c) = pb;
        sum += __uint_as_float(pb << 16) + __uint_as_float(pb & 0xffff0000u);
      }
#pragma unroll
      for (int off = TPR / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l_run = l_run * alpha + sum;
      m_run = m_new;
      if (ssub == 0) alpha_s[srow] = alpha;
    }
    __syncthreads();

    // ---- O = alpha O + P V over this warp's D/4 output dims ----
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const float a0 = alpha_s[mt * 16 + lane / 4], a1 = alpha_s[mt * 16 + lane / 4 + 8];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        o[mt][nt][0] *= a0;
        o[mt][nt][1] *= a0;
        o[mt][nt][2] *= a1;
        o[mt][nt][3] *= a1;
      }
#pragma unroll
      for (int ks = 0; ks < kPage / 16; ++ks) {
        uint32_t a[4];
        ldmatrix_x4(a, Ps + (mt * 16 + lane % 16) * L::PP + ks * 16 + (lane / 16) * 8);
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          uint32_t b[4];
          const int vr = ks * 16 + ((lane / 8) % 2) * 8 + lane % 8;
          const int vc = (warp * (D / 4) + np * 16) / 8 + lane / 16;
          ldmatrix_x4_trans(b, Vt + vr * D * 2 + swz(vr, vc) * 16);
          mma_bf16_16816(o[mt][2 * np], a, b[0], b[1]);
          mma_bf16_16816(o[mt][2 * np + 1], a, b[2], b[3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // ---- epilogue: O to shared memory (fp32), then normalise + rotate or write partials ----
  constexpr int OP = D + 4;
  float* Os = reinterpret_cast<float*>(big);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = mt * 16 + lane / 4 + (e / 2) * 8;
        const int c = warp * (D / 4) + nt * 8 + 2 * (lane % 4) + (e % 2);
        Os[r * OP + c] = o[mt][nt][e];
      }
  if (ssub == 0) {
    mfin_s[srow] = m_run;
    lfin_s[srow] = l_run;
  }
  __syncthreads();
  write_tile<D>(p, Os, OP, mfin_s, lfin_s, row_end - row0, row0, tok0, kvh, split);
}

// ---------------------------------------------------------------------------------------
// Decode-class kernel (tiles of at most 16 rows: a few query tokens x a kv-head group).
// FlashDecoding-style, warp-independent page walk: warp w owns keys [16 w, 16 w + 16) of
// every page of the CTA's split. It streams its 16-row K and V slices through its own
// cp.async ring (int8 slices are dequantised to bf16 in a warp-private tile), computes the
// 16 x 16 scores with two MMAs per k-step, runs the online softmax in registers (the score
// accumulators are re-packed as the bf16 A operand of P V, the FA2 identity), and keeps its
// own O [16][D] in registers. No CTA barrier inside the page loop; the four warps combine
// their (max, sum, O) once at the end.
template <int D, int KIND>
struct DecodeLayout {
  static constexpr int STAGES = KIND == 0 ? (D == 64 ? 4 : 3) : (D == 256 ? 3 : 4);
  static constexpr int kSliceCodes = KIND == 0 ? 16 * D * 2 : 16 * D;    // one side's 16 rows
  static constexpr int kSliceScales = KIND == 0 ? 0 : 16 * (D / 32);     // bytes
  static constexpr int kSide = kSliceCodes + kSliceScales;
  static constexpr int kSlice = 2 * kSide;                               // K then V
  static constexpr int kTile = 16 * D * 2;                               // bf16 working tile
  static constexpr int kWarp = STAGES * kSlice + (KIND == 1 ? 2 * kTile : 0);
  static constexpr int kRing = 4 * kWarp;
  static constexpr int kQf = 16 * D * 4;
  static constexpr int kOw = 4 * 16 * D * 4;
  static constexpr int kBig0 = kRing > kQf ? kRing : kQf;
  static constexpr int kBig = kBig0 > kOw ? kBig0 : kOw;
  static constexpr int QP = D + 8;
  static constexpr int oQs = (kBig + 127) / 128 * 128;
  static constexpr int oRow = oQs + 16 * QP * 2;
  static constexpr int kBytes = oRow + (4 * 16 * 2 + 2 * 16) * 4;
};

// EXT: the window's lower bounds and the softcap (KernelParams::ext).
template <int D, int KIND, bool EXT>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(KernelParams p) {
  static_assert(KIND == 0, "int8 and the compressed kinds decode with decode_comp_kernel");
  using L = DecodeLayout<D, KIND>;
  constexpr int STAGES = L::STAGES, CPR = D / 8, NT = D / 8;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* big = smem;
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem + L::oQs);
  float* m_w = reinterpret_cast<float*>(smem + L::oRow);  // m, l [4][16], mfin, lfin [16]: combine_warps_and_write

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gq = lane / 4, cq = lane % 4;
  const DecodeTile t = decode_tile<16>(p);
  const int row0 = t.row0, kvh = t.kvh, split = t.split, tok0 = t.tok0, start = t.start, g = t.g, R = t.R;
  const int row_end = t.row_end, n_keys = t.n_keys, p_begin = t.p_begin, n_iter = t.n_iter;
  const int32_t* table = t.table;

  load_q_tile<D>(p, reinterpret_cast<float*>(big), Qs, L::QP, 16, row0, R, tok0, kvh);

  // Causal limits of this thread's two rows (gq and gq + 8); rows past R see no key. EXT: the
  // window's lower bounds.
  const int lim0 = row0 + gq < R ? start + (row0 + gq) / g : -1;
  const int lim1 = row0 + gq + 8 < R ? start + (row0 + gq + 8) / g : -1;
  const int lo0 = EXT ? window_lo(lim0, p.window) : 0, lo1 = EXT ? window_lo(lim1, p.window) : 0;

  uint8_t* ring = big + warp * L::kWarp;
  const size_t blk = size_t(KIND == 0 ? kPage * D * 2 : kPage * (D + D / 32));
  auto load_slice = [&](int pg, int page, int stage) {
    const int valid = min(16, n_keys - pg * kPage - warp * 16);  // may be <= 0
    uint8_t* dst = ring + stage * L::kSlice;
    for (int side = 0; side < 2; ++side) {
      const uint8_t* b = (side == 0 ? p.k_pool : p.v_pool) + (size_t(page) * p.n_kv_heads + kvh) * blk;
      uint8_t* d = dst + side * L::kSide;
      if constexpr (KIND == 0) {
        const uint8_t* src = b + size_t(warp * 16) * D * 2;
        for (int u = lane; u < 16 * CPR; u += 32) {
          const int r = u / CPR, c = u % CPR;
          cp_async16(d + r * D * 2 + swz(r, c) * 16, src + r * D * 2 + c * 16, r < valid ? 16 : 0);
        }
      } else {
        const uint8_t* codes = b + size_t(warp * 16) * D;
        for (int u = lane; u < D; u += 32) cp_async16(d + u * 16, codes + u * 16, 16);
        const uint8_t* sc = b + size_t(kPage) * D + size_t(warp * 16) * (D / 32);
        for (int u = lane; u < D / 32; u += 32) cp_async16(d + 16 * D + u * 16, sc + u * 16, 16);
      }
    }
  };

  float o[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_iter) load_slice(p_begin + s, table[p_begin + s], s);
    cp_async_commit();
  }
  int next_page = STAGES - 1 < n_iter ? table[p_begin + STAGES - 1] : 0;

#pragma unroll 1
  for (int it = 0; it < n_iter; ++it) {
    cp_async_wait<STAGES - 2>();
    __syncwarp();
    {
      const int nx = it + STAGES - 1;
      if (nx < n_iter) load_slice(p_begin + nx, next_page, nx % STAGES);
      cp_async_commit();
      if (nx + 1 < n_iter) next_page = table[p_begin + nx + 1];
    }
    const int pg = p_begin + it;
    const int key0 = pg * kPage + warp * 16;
    if (key0 >= n_keys) continue;  // this warp's slice of the last page is empty
    const uint8_t* st = ring + (it % STAGES) * L::kSlice;
    const uint8_t* Kt = st;
    const uint8_t* Vt = st + L::kSide;

    // S = Q K^T: 16 rows x 16 keys.
    float acc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t a[4], b[4];
      ldmatrix_x4(a, Qs + (lane % 16) * L::QP + ks * 16 + (lane / 16) * 8);
      const int kr = (lane / 16) * 8 + lane % 8;
      ldmatrix_x4(b, Kt + kr * D * 2 + swz(kr, ks * 2 + (lane / 8) % 2) * 16);
      mma_bf16_16816(acc[0], a, b[0], b[1]);
      mma_bf16_16816(acc[1], a, b[2], b[3]);
    }
    // Mask, scale (log2 domain), online softmax for rows gq (e = 0, 1) and gq + 8 (e = 2, 3).
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + j * 8 + 2 * cq + (e % 2);
        const bool ok = key <= (e < 2 ? lim0 : lim1) && (!EXT || key >= (e < 2 ? lo0 : lo1));
        float v = acc[j][e] * p.scale_log2;
        if (EXT && p.cap2 != 0.0f) v = softcap_log2(v, p.cap2, p.cap_k);
        v = ok ? v : -INFINITY;
        acc[j][e] = v;
        if (e < 2) mx0 = fmaxf(mx0, v);
        else mx1 = fmaxf(mx1, v);
      }
    float pr[2][4], al0, al1;
    softmax_tile_step(mx0, mx1, acc, pr, m0, m1, al0, al1);
    uint32_t pa[4];
    pa[0] = cvt_bf16x2(pr[0][0], pr[0][1]);
    pa[1] = cvt_bf16x2(pr[0][2], pr[0][3]);
    pa[2] = cvt_bf16x2(pr[1][0], pr[1][1]);
    pa[3] = cvt_bf16x2(pr[1][2], pr[1][3]);
    auto hsum = [](uint32_t v) { return __uint_as_float(v << 16) + __uint_as_float(v & 0xffff0000u); };
    l0 = l0 * al0 + hsum(pa[0]) + hsum(pa[2]);
    l1 = l1 * al1 + hsum(pa[1]) + hsum(pa[3]);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      o[nt][0] *= al0;
      o[nt][1] *= al0;
      o[nt][2] *= al1;
      o[nt][3] *= al1;
    }
    // O += P V over all D dims.
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t b[4];
      const int vr = ((lane / 8) % 2) * 8 + lane % 8;
      ldmatrix_x4_trans(b, Vt + vr * D * 2 + swz(vr, np * 2 + lane / 16) * 16);
      mma_bf16_16816(o[2 * np], pa, b[0], b[1]);
      mma_bf16_16816(o[2 * np + 1], pa, b[2], b[3]);
    }
  }
  cp_async_wait<0>();
  combine_warps_and_write<D>(p, o, 1.0f, m0, m1, l0, l1, big, m_w, row_end - row0, row0, tok0, kvh, split);
}

// ---------------------------------------------------------------------------------------
// S = Q K^T partial sums of the int8 tensor cores (int8 K codes, int8-quantised Q): d += a b.
__device__ __forceinline__ void mma_s8_16832(int d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#include "backend/cuda/attention_compressed.cuh"  // decode_comp_kernel (inside this namespace)

// Which loop decode_comp_kernel runs (PIPE; NINFER_CUDA_COMP_PIPE=0..4 forces one). The
// defaults are the fastest measured on the H200 (geometric mean over 32K/128K x batch 1/8;
// docs/BENCHMARKS.md, "Loop variants", session 5): int8 0 (4 at head_dim 256, where two
// register sets spill); int4 / rk4v4-e8 the software pipeline, 2 (at head_dim 256 the same
// kernel as 1), but for rk2v4-e8 at head_dim 128 PIPE 1 (the pipeline at 3 CTAs per SM: 4 %
// faster than 2); 0 at head_dim 64 (not measured).
constexpr int comp_pipe_default(int head_dim, CacheKind kind) {
  if (kind == CacheKind::Int8) return head_dim == 256 ? 4 : 0;
  if (head_dim == 64) return 0;
  return kind == CacheKind::Rk2 && head_dim == 128 ? 1 : 2;
}
int comp_pipe(int head_dim, CacheKind kind) {
  static const int v = [] {
    const char* e = std::getenv("NINFER_CUDA_COMP_PIPE");
    if (!e || !*e) return -1;
    if (e[0] < '0' || e[0] > '4' || e[1] != '\0')
      throw std::runtime_error(std::string("NINFER_CUDA_COMP_PIPE must be one of 0, 1, 2, 3, 4, got '") + e + "'");
    return e[0] - '0';
  }();
  if (v >= 0) return v;
  return comp_pipe_default(head_dim, kind);
}

// Which rk2v4-e8 K decode decode_comp_kernel runs: FMT 6 (two shared tables copied once per
// bank group, the default; NINFER_CUDA_E8P_DECODE=banked), 4 (one copy of each: =table) or 5
// (one table, integer signs: =alu). All give the same scores exactly (int32 sums of the same
// 4 y). Measured on the H200: 5 at 0.99-1.12x of 4's time (session 5); 6 at 0.83-0.97x of 4's
// (session 6, docs/BENCHMARKS.md).
int e8p_decode_fmt() {
  static const int v = [] {
    const char* e = std::getenv("NINFER_CUDA_E8P_DECODE");
    if (!e || !*e || std::strcmp(e, "banked") == 0) return 6;
    if (std::strcmp(e, "table") == 0) return 4;
    if (std::strcmp(e, "alu") == 0) return 5;
    throw std::runtime_error(std::string("NINFER_CUDA_E8P_DECODE must be 'table', 'banked' or 'alu', got '") + e + "'");
  }();
  return v;
}

// NINFER_CUDA_CTA_CAP=0 leaves the register decode kernel's grid uncapped (A/B); unset or 1:
// capped (PagedAttention::plan).
bool cta_cap_enabled() {
  static const bool v = env_switch("NINFER_CUDA_CTA_CAP");
  return v;
}

// NINFER_CUDA_HISTORY_EARLY=0: the register decode kernel reads no page before its wait even
// when the caller allows it (A/B); unset or 1: it does (PagedAttention::run's history_ready).
bool history_early_enabled() {
  static const bool v = env_switch("NINFER_CUDA_HISTORY_EARLY");
  return v;
}

// NINFER_CUDA_Q_EARLY=0: the register decode kernel reads Q only after its wait even when the
// caller allows it earlier (A/B); unset or 1: before it (PagedAttention::run's q_ready).
bool q_early_enabled() {
  static const bool v = env_switch("NINFER_CUDA_Q_EARLY");
  return v;
}

// Rows per decode-class work item: the decode kernel's tile, kCompRows for decode_comp_kernel
// (int8, int4, rk4v4-e8, rk2v4-e8) and 16 for bf16 and decode_lowbit_kernel (the minifloat kinds).
int decode_work_rows(CacheKind k) {
  return k == CacheKind::Bf16 || cache_lowbit(k) ? 16 : kCompRows;
}

// Launches kernel(kp) on grid x kThreads with dyn bytes of dynamic shared memory, as a
// programmatic dependent of the stream's previous kernel when pdl_launches().
// carveout >= 0: the launch's preferred shared-memory carveout (percent of the SM's shared
// memory; launch_merge).
template <typename Kernel>
void launch_pdl(Kernel kernel, dim3 grid, size_t dyn, const KernelParams& kp, cudaStream_t s, int carveout = -1) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = dyn;
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (pdl_launches()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (carveout >= 0) {
    attr[n].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
    attr[n++].val.sharedMemCarveout = unsigned(carveout);
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  NINFER_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, kp));
}

// The device's shared-memory limits (queried once).
struct SmemLimits {
  size_t per_sm, per_block_optin, reserved_per_block;
};
const SmemLimits& smem_limits() {
  static const SmemLimits lim = [] {
    int dev = 0, sm = 0, optin = 0, res = 0;
    NINFER_CUDA_CHECK(cudaGetDevice(&dev));
    NINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    NINFER_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    NINFER_CUDA_CHECK(cudaDeviceGetAttribute(&res, cudaDevAttrReservedSharedMemoryPerBlock, dev));
    return SmemLimits{size_t(sm), size_t(optin), size_t(res)};
  }();
  return lim;
}

// Dynamic shared memory that leaves room for at most `cps` CTAs per SM (0: no limit): a grid
// planned as cps CTAs per SM then lands exactly so even when its CTAs are scheduled early (a
// programmatic dependent launch places them as its predecessor's CTAs leave; without the cap
// a third CTA could take an SM whose share was two, and the grid's slowest SM do three walks).
size_t pad_for_ctas_per_sm(int cps, size_t static_bytes) {
  if (cps <= 0) return 0;
  const SmemLimits& lim = smem_limits();
  const size_t per_cta = lim.per_sm / size_t(cps + 1) + 1;  // cps + 1 of these do not fit
  const size_t own = static_bytes + lim.reserved_per_block;
  return per_cta > own ? std::min(per_cta - own, lim.per_block_optin - static_bytes) : 0;
}

// decode_comp_kernel<D, FMT, PIPE, EXT> for the run-time PIPE: launch, or (grid.x == 0) its
// occupancy. A launch returns the shared memory its CTAs hold on one SM when capped
// (kp.ctas_per_sm > 0, with the reserved part; launch_merge), else 0. kp.ext (a window or a
// softcap): the EXT variant, instantiated only for the default loop (comp_pipe_default; the
// NINFER_CUDA_COMP_PIPE override does not apply to it) and, for rk2v4-e8, the default K decode
// (FMT 6; comp_call), so that the window and the softcap add 12 kernels, not 90.
template <int D, int FMT>
int comp_kernel_call(int pipe, dim3 grid, const KernelParams& kp, cudaStream_t s) {
  constexpr int dyn = FMT == 6 ? kE8pBankedBytes : 0;  // dynamic shared memory (FMT 6's table copies)
  // One instantiation per PIPE (the kernels' pointer types are all alike), so that the opt-in
  // below is done once for each kernel.
  auto go = [&](auto pipe_c, auto ext_c) {
    constexpr int P = decltype(pipe_c)::value;
    constexpr bool X = decltype(ext_c)::value;
    const auto kernel = decode_comp_kernel<D, FMT, P, X>;
    // Opt in to all the dynamic shared memory a CTA may have (FMT 6's copies are over the
    // 48 KiB default with the static arrays; the padding below goes further).
    static const size_t static_bytes = [&] {
      cudaFuncAttributes a{};
      NINFER_CUDA_CHECK(cudaFuncGetAttributes(&a, kernel));
      const SmemLimits& lim = smem_limits();
      NINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             int(lim.per_block_optin - a.sharedSizeBytes)));
      return a.sharedSizeBytes;
    }();
    int n = 0;
    if (grid.x == 0) {
      NINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, dyn));
    } else {  // the kernel waits for its predecessor (pdl_wait) before it reads what that writes
      const size_t dyn_launch = std::max<size_t>(dyn, pad_for_ctas_per_sm(kp.ctas_per_sm, static_bytes));
      launch_pdl(kernel, grid, dyn_launch, kp, s);
      if (kp.ctas_per_sm > 0)
        n = kp.ctas_per_sm * int(static_bytes + dyn_launch + smem_limits().reserved_per_block);
    }
    return n;
  };
  using NoExt = std::false_type;
  if constexpr (FMT != 4 && FMT != 5) {  // rk2v4-e8's EXT variant is FMT 6's (comp_call)
    if (kp.ext) {
      constexpr CacheKind kKind =
          FMT == 1 ? CacheKind::Int8 : (FMT == 2 ? CacheKind::Int4 : (FMT == 3 ? CacheKind::Rk4 : CacheKind::Rk2));
      return go(std::integral_constant<int, comp_pipe_default(D, kKind)>{}, std::true_type{});
    }
  }
  switch (pipe) {
    case 1: return go(std::integral_constant<int, 1>{}, NoExt{});
    case 2: return go(std::integral_constant<int, 2>{}, NoExt{});
    case 3: return go(std::integral_constant<int, 3>{}, NoExt{});
    case 4: return go(std::integral_constant<int, 4>{}, NoExt{});
    default: return go(std::integral_constant<int, 0>{}, NoExt{});
  }
}

template <int D>
int comp_call(CacheKind kind, dim3 grid, const KernelParams& kp, cudaStream_t s) {
  const int pipe = comp_pipe(D, kind);
  switch (kind) {
    case CacheKind::Int8: return comp_kernel_call<D, 1>(pipe, grid, kp, s);
    case CacheKind::Int4: return comp_kernel_call<D, 2>(pipe, grid, kp, s);
    case CacheKind::Rk4: return comp_kernel_call<D, 3>(pipe, grid, kp, s);
    default:
      if (kp.ext) return comp_kernel_call<D, 6>(pipe, grid, kp, s);  // EXT: the default K decode only
      switch (e8p_decode_fmt()) {
        case 5: return comp_kernel_call<D, 5>(pipe, grid, kp, s);
        case 4: return comp_kernel_call<D, 4>(pipe, grid, kp, s);
        default: return comp_kernel_call<D, 6>(pipe, grid, kp, s);
      }
  }
}

// Log-sum-exp merge of the splits: one CTA per (output row, CW-column chunk), grid (n_work,
// n_kv_heads, M * D / CW); CTAs whose row is past the tile's end exit. The threads split both
// the chunk's CW / 4 float4 columns and the splits; each thread's partial rows are requested
// first (all of them at once when they fit in registers: they do not wait for the weights),
// while warp 0 reads the splits' (m, l) and sets the weights in shared memory; then each thread
// sums its splits in order and the split groups are summed in shared memory. CW = 64 needs an
// output rotation of none or H_64 per group (the compressed formats' V rotation), done by warp 0
// with register and shuffle butterflies (the additions of smem_rotate, in its order); H_D over
// the whole row needs CW = D.
template <int D, int CW>
__global__ void __launch_bounds__(kThreads) merge_kernel(KernelParams p) {
  constexpr int NCH = D / CW, C4 = CW / 4, SG = kThreads / C4, NS = (kMaxSplits + SG - 1) / SG;
  constexpr bool kHoist = NS <= 16;  // the partials in registers (16 float4) before the weights
  __shared__ float w_s[kMaxSplits];
  __shared__ float4 red[kThreads];
  __shared__ float row[CW];
  __shared__ float inv_den;
  const WorkItem wi = work_item(p);
  const int gr = wi.row0 + int(blockIdx.z) / NCH;
  const int col0 = (int(blockIdx.z) % NCH) * CW;
  const int kvh = blockIdx.y;
  const int tok0 = wi.tok0, n_tok = wi.n_tok;
  const int g = p.group;
  if (gr >= n_tok * g) return;
  // Launched as a programmatic dependent of the decode kernel (launch_merge): everything above
  // may run while that kernel's last CTAs finish; its partials are read only after this wait.
  // Then a programmatic dependent of this kernel (the next step's register decode kernel) may
  // be scheduled: its CTAs read their work items and page ids while these merge. Its grid is
  // capped at the planned CTAs per SM (pad_for_ctas_per_sm); uncapped, the early CTAs bunched
  // on some SMs (rk2v4-e8 batch 1 32K: 1.21-1.26x the time, H200, sessions 9 and 10).
  const size_t grow = size_t(tok0 + gr / g) * p.n_heads + kvh * g + gr % g;
  // Thread (split group sg, float4 column c): splits sg, sg + SG, ...
  const int c = threadIdx.x % C4, sg = threadIdx.x / C4;
  const size_t stride = size_t(p.n_rows_total) * (D / 4);
  const float4* src = reinterpret_cast<const float4*>(p.part_o) + grow * (D / 4) + col0 / 4 + c;
  // Every line read below is asked of the L2 before the wait (a prefetch: no value is used, and
  // the decode kernel's writes to these lines go to the L2, which holds the one copy). Read
  // only after the wait, the first (m, l) took ~0.85 us, and a load of a line this CTA had
  // touched before ~0.16 us (H200, session 12, timestamps in this kernel).
  constexpr int NML = (kMaxSplits + 31) / 32;
  const float2* ml_src = reinterpret_cast<const float2*>(p.part_ml) + grow;
  if (threadIdx.x < 32) {
#pragma unroll
    for (int i = 0; i < NML; ++i) {
      const int s = threadIdx.x + 32 * i;
      if (s < p.n_splits) prefetch_l2(ml_src + size_t(s) * p.n_rows_total);
    }
  }
  if (c % 8 == 0) {  // one thread per 128-byte line
    for (int s = sg; s < p.n_splits; s += SG) prefetch_l2(src + size_t(s) * stride);
  }
  pdl_wait();
  pdl_launch_dependents();
  float4 v[kHoist ? NS : 1];
  if constexpr (kHoist) {
#pragma unroll
    for (int i = 0; i < NS; ++i) {
      const int s = sg + i * SG;
      v[i] = s < p.n_splits ? src[size_t(s) * stride] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  if (threadIdx.x < 32) {
    // Warp 0: every (m, l) pair of the row requested at once (one round trip; a loop of
    // dependent reads took one per 32 splits, twice), then the max, the weights and their sum.
    float2 ml[NML];
#pragma unroll
    for (int i = 0; i < NML; ++i) {
      const int s = threadIdx.x + 32 * i;
      ml[i] = s < p.n_splits ? ml_src[size_t(s) * p.n_rows_total] : make_float2(-INFINITY, 0.0f);
    }
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NML; ++i) mx = fmaxf(mx, ml[i].x);
    mx = warp_max(mx);
    float den = 0.0f;
#pragma unroll
    for (int i = 0; i < NML; ++i) {
      const int s = threadIdx.x + 32 * i;
      if (s < p.n_splits) {
        const float w = ml[i].x == -INFINITY ? 0.0f : exp2f(ml[i].x - mx);
        w_s[s] = w;
        den += w * ml[i].y;
      }
    }
    den = warp_sum(den);
    if (threadIdx.x == 0) inv_den = 1.0f / den;
  }
  __syncthreads();
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if constexpr (kHoist) {
#pragma unroll
    for (int i = 0; i < NS; ++i) {
      const int s = sg + i * SG;
      if (s < p.n_splits) {
        const float w = w_s[s];
        acc.x += w * v[i].x;
        acc.y += w * v[i].y;
        acc.z += w * v[i].z;
        acc.w += w * v[i].w;
      }
    }
  } else {
#pragma unroll 4
    for (int s = sg; s < p.n_splits; s += SG) {
      const float w = w_s[s];
      const float4 x = src[size_t(s) * stride];
      acc.x += w * x.x;
      acc.y += w * x.y;
      acc.z += w * x.z;
      acc.w += w * x.w;
    }
  }
  red[sg * C4 + c] = acc;
  __syncthreads();
  auto group_sum = [&](int col) {  // the split groups' sums of float4 column col, in group order
    float4 t = red[col];
    for (int k = 1; k < SG; ++k) {
      const float4 u = red[k * C4 + col];
      t.x += u.x;
      t.y += u.y;
      t.z += u.z;
      t.w += u.w;
    }
    return t;
  };
  const bool rot64 = CW == D ? p.o_rot != 0 : p.o_rot == 2;  // CW = 64: H_64 (rot 2; rot 1 when D = 64)
  if (CW == 64) {
    if (threadIdx.x >= 32) return;
    // warp 0, lanes 0..15: values 4 lane .. 4 lane + 3 of the chunk (lanes 16..31 only shuffle)
    const int l = threadIdx.x % C4;
    float x[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
    if (threadIdx.x < C4) {
      const float4 t = group_sum(l);
      x[0][0] = t.x * inv_den;
      x[0][1] = t.y * inv_den;
      x[0][2] = t.z * inv_den;
      x[0][3] = t.w * inv_den;
    }
    if (rot64) {
      warp_butterflies<1, 4, 64>(x, 64);
      const float sc = 1.0f / sqrtf(64.0f);  // smem_rotate's constant
#pragma unroll
      for (int e = 0; e < 4; ++e) x[0][e] *= sc;
    }
    if (threadIdx.x < C4) {
      uint16_t* dst = p.out + size_t(tok0 + gr / g) * p.out_ld + size_t(kvh * g + gr % g) * D + col0 + 4 * l;
#pragma unroll
      for (int e = 0; e < 4; ++e) dst[e] = f32_to_bf16_bits(x[0][e]);
    }
    return;
  }
  if (sg == 0) {
    const float4 t = group_sum(c);
    row[4 * c] = t.x * inv_den;
    row[4 * c + 1] = t.y * inv_den;
    row[4 * c + 2] = t.z * inv_den;
    row[4 * c + 3] = t.w * inv_den;
  }
  __syncthreads();
  smem_rotate<CW>(row, 1, CW, p.o_rot);
  for (int d = threadIdx.x; d < CW; d += kThreads)
    p.out[size_t(tok0 + gr / g) * p.out_ld + size_t(kvh * g + gr % g) * D + col0 + d] = f32_to_bf16_bits(row[d]);
}

// Launches merge_kernel for tiles of `rows` rows: 64-column chunks unless the output rotation
// spans the whole row. A programmatic dependent launch (launch_pdl).
//
// decode_smem_per_sm > 0: the shared memory the decode kernel's CTAs hold on one SM. The merge
// then asks for a carveout with room for them: the next step's decode CTAs, scheduled early
// (PDL), can then join an SM that still runs merge CTAs. At the merge's own (small) carveout they
// waited for the SM to drain: rk2v4-e8, 32/8/128 batch 1 32K, 124 of 264 CTAs started up to
// 1.7 us late (H200, session 11). The largest carveout for every format cost int4 and rk4v4-e8
// at head_dim 256 up to 1.08x (their decode CTAs then run with less L1).
template <int D>
void launch_merge(const KernelParams& kp, int n_work, int rows, cudaStream_t s, int decode_smem_per_sm) {
  const bool full = kp.o_rot == 1 || D == 64;
  const dim3 grid(unsigned(n_work), unsigned(kp.n_kv_heads), unsigned(full ? rows : rows * (D / 64)));
  const int per_sm = int(smem_limits().per_sm);
  const int carveout = decode_smem_per_sm > 0 ? std::min(100, (100 * decode_smem_per_sm + per_sm - 1) / per_sm) : -1;
  if (full) {
    launch_pdl(merge_kernel<D, D>, grid, 0, kp, s, carveout);
  } else {
    launch_pdl(merge_kernel<D, 64>, grid, 0, kp, s, carveout);
  }
}

template <int D, int KIND, int MT>
void launch_kernel(const KernelParams& kp, int n_work, cudaStream_t s) {
  using L = SmemLayout<D, KIND, MT>;
  static bool configured = false;  // NOTE: per instantiation; the attribute is per function
  if (!configured) {
    NINFER_CUDA_CHECK(cudaFuncSetAttribute(paged_attention_kernel<D, KIND, MT>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, L::kBytes));
    configured = true;
  }
  const dim3 grid(unsigned(n_work), unsigned(kp.n_kv_heads), unsigned(kp.n_splits));
  paged_attention_kernel<D, KIND, MT><<<grid, kThreads, L::kBytes, s>>>(kp);
  NINFER_CUDA_LAUNCH_CHECK();
  if (kp.n_splits > 1) {
    launch_merge<D>(kp, n_work, L::M, s);
  }
}

template <int D, int KIND>
void launch_decode(const KernelParams& kp, int n_work, cudaStream_t s) {
  const dim3 grid(unsigned(n_work), unsigned(kp.n_kv_heads), unsigned(kp.n_splits));
  static bool configured = false;
  int decode_smem = 0;  // per SM, when capped (comp_kernel_call)
  if constexpr (KIND == 0) {
    using L = DecodeLayout<D, 0>;
    if (!configured) {  // both variants at once
      NINFER_CUDA_CHECK(cudaFuncSetAttribute(decode_attention_kernel<D, 0, false>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, L::kBytes));
      NINFER_CUDA_CHECK(cudaFuncSetAttribute(decode_attention_kernel<D, 0, true>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, L::kBytes));
      configured = true;
    }
    if (kp.ext) decode_attention_kernel<D, 0, true><<<grid, kThreads, L::kBytes, s>>>(kp);
    else decode_attention_kernel<D, 0, false><<<grid, kThreads, L::kBytes, s>>>(kp);
  } else {
    // int8 and the compressed kinds: straight from the codes (attention_compressed.cuh), 8-row tiles.
    decode_smem = comp_call<D>(CacheKind(kp.fmt), grid, kp, s);
  }
  NINFER_CUDA_LAUNCH_CHECK();
  if (kp.n_splits > 1) {
    launch_merge<D>(kp, n_work, KIND == 0 ? 16 : kCompRows, s, decode_smem);
  }
}

template <int D, int KIND>
void dispatch_mt(const KernelParams& kp, int cls, int n_work, cudaStream_t s) {
  if (cls == 0) {
    launch_decode<D, KIND>(kp, n_work, s);
  } else {
    launch_kernel<D, KIND, (D == 256 ? 2 : 4)>(kp, n_work, s);
  }
}

template <int D>
void dispatch_kind(const KernelParams& kp, CacheKind kind, int cls, int n_work, cudaStream_t s) {
  if (kind == CacheKind::Bf16) {
    dispatch_mt<D, 0>(kp, cls, n_work, s);
  } else if (kind == CacheKind::Int8) {
    dispatch_mt<D, 1>(kp, cls, n_work, s);
  } else if (cache_lowbit(kind)) {
    if (cls == 0) launch_decode_lowbit<D>(kind, kp, n_work, s);
    else launch_kernel<D, 3, (D == 256 ? 2 : 4)>(kp, n_work, s);
  } else {
    dispatch_mt<D, 2>(kp, cls, n_work, s);
  }
}

template <int D, int KIND, int MT>
int occupancy_of() {
  using L = SmemLayout<D, KIND, MT>;
  NINFER_CUDA_CHECK(cudaFuncSetAttribute(paged_attention_kernel<D, KIND, MT>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, L::kBytes));
  int n = 0;
  NINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, paged_attention_kernel<D, KIND, MT>, kThreads,
                                                                  L::kBytes));
  return n;
}

// ext: of the decode kernels' EXT variants (KernelParams::ext).
template <int D, int KIND>
int occupancy_decode(CacheKind kind, bool ext) {
  int n = 0;
  if constexpr (KIND == 0) {
    using L = DecodeLayout<D, 0>;
    const auto kernel = ext ? decode_attention_kernel<D, 0, true> : decode_attention_kernel<D, 0, false>;
    NINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kBytes));
    NINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, L::kBytes));
  } else {
    KernelParams kp{};
    kp.ext = ext ? 1 : 0;
    n = comp_call<D>(kind, dim3(0), kp, nullptr);
  }
  return n;
}

template <int D>
int occupancy_d(CacheKind kind, int cls, bool ext) {
  constexpr int MTp = D == 256 ? 2 : 4;
  if (kind == CacheKind::Bf16) return cls == 0 ? occupancy_decode<D, 0>(kind, ext) : occupancy_of<D, 0, MTp>();
  if (kind == CacheKind::Int8) return cls == 0 ? occupancy_decode<D, 1>(kind, ext) : occupancy_of<D, 1, MTp>();
  if (cache_lowbit(kind)) {
    if (cls == 1) return occupancy_of<D, 3, MTp>();
    int n = 0;
    KernelParams kp{};
    kp.ext = ext ? 1 : 0;
    launch_decode_lowbit<D>(kind, kp, 0, nullptr, true, &n);
    return n;
  }
  return cls == 0 ? occupancy_decode<D, 2>(kind, ext) : occupancy_of<D, 2, MTp>();
}

// The sm_90 kernel's parameters (attention_prefill_sm90.h) for the prefill-tile class of kp.
PrefillSm90Params prefill_sm90_params(const KernelParams& kp, const AttnShape& sh, int n_work, int n_pool_blocks) {
  PrefillSm90Params pp;
  pp.q = kp.q;
  pp.q_ld = kp.q_ld;
  pp.k_pool = kp.k_pool;
  pp.v_pool = kp.v_pool;
  pp.tables = kp.tables;
  pp.work = kp.work;
  pp.n_work = n_work;
  pp.n_heads = kp.n_heads;
  pp.n_kv_heads = kp.n_kv_heads;
  pp.head_dim = sh.head_dim;
  pp.group = kp.group;
  pp.q_rot = kp.q_rot;
  pp.o_rot = kp.o_rot;
  pp.window = sh.window;
  pp.scale_log2 = kp.scale_log2;
  pp.cap2 = kp.cap2;
  pp.cap_k = kp.cap_k;
  pp.n_splits = kp.n_splits;
  pp.out = kp.out;
  pp.out_ld = kp.out_ld;
  pp.part_o = kp.part_o;
  pp.part_ml = kp.part_ml;
  pp.n_rows_total = kp.n_rows_total;
  pp.kind = sh.kind;
  pp.k_cb = kp.k_cb;
  pp.v_cb = kp.v_cb;
  pp.k_blk = kp.k_blk;
  pp.v_blk = kp.v_blk;
  pp.e8p_abs = kp.e8p_abs;
  pp.n_pool_blocks = n_pool_blocks;
  return pp;
}

void launch_merge_any(const KernelParams& kp, int head_dim, int n_work, int rows, cudaStream_t s) {
  switch (head_dim) {
    case 64: launch_merge<64>(kp, n_work, rows, s); break;
    case 128: launch_merge<128>(kp, n_work, rows, s); break;
    default: launch_merge<256>(kp, n_work, rows, s); break;
  }
}

// The prefill-tile class on the sm_90 kernel. bf16 pages: the kernel on the pools, then the
// merge of its splits. Other kinds: per segment of plan()'s, the segment's pages expanded into
// the bf16 scratch pool, then the kernel on the scratch pool with the segment's tables and key
// tiles, folding the earlier segments' partial (slot 0) in (one segment: the planned splits).
void run_prefill_sm90(const KernelParams& kp, const AttnShape& sh, int n_work, int n_pool_blocks, const int32_t* base,
                      const std::vector<PrefillSegment>& segs, uint16_t* scratch, int scratch_pages, cudaStream_t s) {
  if (sh.kind == CacheKind::Bf16) {
    launch_prefill_sm90(prefill_sm90_params(kp, sh, n_work, n_pool_blocks), s);
    if (kp.n_splits > 1) launch_merge_any(kp, sh.head_dim, n_work, kPrefillSm90Rows, s);
    return;
  }
  const size_t side = size_t(scratch_pages) * sh.n_kv_heads * kPage * sh.head_dim;
  uint16_t* sk = scratch;
  uint16_t* sv = scratch + side;
  const PrefillSm90Params src = prefill_sm90_params(kp, sh, n_work, 0);
  for (size_t i = 0; i < segs.size(); ++i) {
    const PrefillSegment& g = segs[i];
    launch_prefill_expand(src, base + g.pairs_off, g.n_pairs, sk, sv, s);
    PrefillSm90Params pp = prefill_sm90_params(kp, sh, n_work, scratch_pages * sh.n_kv_heads);
    pp.kind = CacheKind::Bf16;
    pp.k_pool = reinterpret_cast<const uint8_t*>(sk);
    pp.v_pool = reinterpret_cast<const uint8_t*>(sv);
    pp.tables = base + g.table_off;
    pp.kt_seg_lo = g.kt_lo;
    pp.kt_seg_hi = g.kt_hi;
    pp.seg_acc = i > 0 ? 1 : 0;
    pp.seg_to_part = i + 1 < segs.size() ? 1 : 0;
    launch_prefill_sm90(pp, s);
  }
  if (segs.size() == 1 && kp.n_splits > 1) launch_merge_any(kp, sh.head_dim, n_work, kPrefillSm90Rows, s);
}

int mt_for(int cls, int head_dim) { return cls == 0 ? 1 : (head_dim == 256 ? 2 : 4); }

}  // namespace

PagedAttention::PagedAttention(const AttnShape& shape) : shape_(shape) {
  if (shape.head_dim != 64 && shape.head_dim != 128 && shape.head_dim != 256)
    throw std::runtime_error("CUDA attention supports head_dim 64, 128 and 256, not " + std::to_string(shape.head_dim));
  if (shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0)
    throw std::runtime_error("CUDA attention: n_heads must be a multiple of n_kv_heads");
  int dev = 0;
  NINFER_CUDA_CHECK(cudaGetDevice(&dev));
  NINFER_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, dev));
  cls_[0].mt = 1;
  cls_[1].mt = mt_for(1, shape.head_dim);
  cls_[0].rows = decode_work_rows(shape.kind);
  cls_[1].rows = 16 * cls_[1].mt;
  if (shape.kind == CacheKind::Rk2) {
    const E8pTables t = e8p_device_tables();
    e8p_abs_ = t.abs;
    e8p_mag_ = t.mag;
    e8p_sgn_ = t.sgn;
  }
  if (shape.window < 0) throw std::runtime_error("CUDA attention: the sliding window must be >= 0 (0: none)");
  if (!(shape.softcap >= 0.0f) || std::isinf(shape.softcap))
    throw std::runtime_error("CUDA attention: the softcap must be finite and >= 0 (0: none)");
  const bool ext = shape.window > 0 || shape.softcap > 0.0f;
  for (int c = 0; c < 2; ++c) {
    const int d = shape.head_dim;
    const int occ = d == 64 ? occupancy_d<64>(shape.kind, c, ext)
                            : (d == 128 ? occupancy_d<128>(shape.kind, c, ext) : occupancy_d<256>(shape.kind, c, ext));
    if (occ < 1) throw std::runtime_error("CUDA attention kernel cannot be resident (shared memory too large?)");
    cls_[c].slots = occ * num_sms_;
  }
  slots_prefill_[0] = cls_[1].slots;
  if (prefill_sm90_available()) slots_prefill_[1] = prefill_sm90_ctas_per_sm(shape.head_dim) * num_sms_;
}

PagedAttention::~PagedAttention() {
  if (pinned_) cudaFreeHost(pinned_);
  if (d_meta_) cudaFree(d_meta_);
  if (d_part_) cudaFree(d_part_);
  if (d_scratch_) cudaFree(d_scratch_);
}

void PagedAttention::plan(const AttnSeq* seqs, int n_seqs, int n_tokens_total, cudaStream_t s) {
  const int g = shape_.n_heads / shape_.n_kv_heads;
  n_rows_total_ = n_tokens_total * shape_.n_heads;
  // The prefill-tile kernel of this plan: its tile rows and resident slots.
  prefill_sm90_ = slots_prefill_[1] > 0 && (forced_prefill_ == 2 || (forced_prefill_ == 0 && prefill_sm90_default()));
  cls_[1].rows = prefill_sm90_ ? kPrefillSm90Rows : 16 * cls_[1].mt;
  cls_[1].slots = slots_prefill_[prefill_sm90_ ? 1 : 0];
  int max_page = 0;
  // Layout of the metadata upload: the page tables, then the work items of class 0 and of class
  // 1 (kWorkInts each, 16-byte aligned).
  host_meta_.clear();
  int max_pages[2] = {0, 0};  // the most pages a work item of the class walks (those its rows see)
  struct PSeq {
    int toff, first, last;  // its table's offset; the first and last page its rows see
  };
  std::vector<PSeq> pseqs;  // the prefill class's chunks
  for (Class& c : cls_) c.work.clear();
  size_t toff = 0;
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq& q = seqs[i];
    const int need = (q.start_pos + q.n_tokens + kPage - 1) / kPage;
    if (q.n_tokens <= 0 || q.n_blocks < need)
      throw std::runtime_error("CUDA attention: a chunk has no tokens or too few pages for its length");
    host_meta_.insert(host_meta_.end(), q.block_table, q.block_table + q.n_blocks);
    for (int b = 0; b < q.n_blocks; ++b) max_page = std::max(max_page, int(q.block_table[b]));
    const int rows = q.n_tokens * g;
    const int cls = rows <= 16 ? 0 : 1;
    if (cls == 1) {  // the pages its rows see, for the expansion into the scratch pool
      const int lo = shape_.window > 0 ? std::max(0, q.start_pos - shape_.window + 1) : 0;
      pseqs.push_back({int(toff), lo / kPage, need - 1});
    }
    const int M = cls_[cls].rows;
    for (int r0 = 0; r0 < rows; r0 += M) {
      // The tile's rows see keys [lo, n_keys): lo from its first row's window (0 without one).
      // Its splits walk only the pages from lo's on (split_pages, attention.cu's kernels).
      const int n_keys = q.start_pos + (std::min(r0 + M, rows) - 1) / g + 1;
      const int lo = shape_.window > 0 ? std::max(0, q.start_pos + r0 / g - shape_.window + 1) : 0;
      const int pfirst = lo / kPage;
      const int32_t item[kWorkInts] = {r0, q.tok0, q.n_tokens, q.start_pos, int32_t(toff), pfirst, 0, 0};
      cls_[cls].work.insert(cls_[cls].work.end(), item, item + kWorkInts);
      max_pages[cls] = std::max(max_pages[cls], (n_keys + kPage - 1) / kPage - pfirst);
    }
    toff += size_t(q.n_blocks);
  }
  n_pool_blocks_ = (max_page + 1) * shape_.n_kv_heads;
  size_t off_work[2];
  for (int c = 0; c < 2; ++c) {
    host_meta_.resize((host_meta_.size() + 3) / 4 * 4);  // 16-byte aligned work items
    off_work[c] = host_meta_.size();
    host_meta_.insert(host_meta_.end(), cls_[c].work.begin(), cls_[c].work.end());
  }

  // Splits: when the (tile, kv head) CTAs do not fill the GPU's resident slots, split the KV
  // range so that they fill one wave (rounded down: a second, partly filled wave would cost a
  // whole page walk), keeping at least 4 pages per split (shorter splits cost more in
  // prologue and merge than they gain) and at most 64 (the compressed kinds' decode kernel:
  // 128; its CTAs are cheap to start and batch 1 with 2 kv heads needs them); prefill-class
  // partials are bounded to 256 MiB.
  size_t part_need = 0;
  for (int c = 0; c < 2; ++c) {
    Class& k = cls_[c];
    k.n_work = int(k.work.size() / kWorkInts);
    if (k.n_work == 0) {
      k.splits = 1;
      continue;
    }
    const int ctas = k.n_work * shape_.n_kv_heads;
    int splits = std::max(1, k.slots / ctas);
    // rk2v4-e8's register kernel runs 3 CTAs per SM at head_dim <= 128 (PIPE 1). Its CTAs each
    // fill 64 KiB of table copies (FMT 6) besides the Q prologue and the merge rows; below 16
    // pages per split that costs more than the third CTA gains: plan one wave of 2 per SM then
    // (H200, 32/8/128, batch 1, 32K: 32 splits 0.0214 ms against the 49 of 3 per SM 0.0238;
    // at 128K, 42 pages per split, 49 stay the faster).
    if (c == 0 && shape_.kind == CacheKind::Rk2 && k.slots > 2 * num_sms_ && max_pages[c] < 16 * splits)
      splits = std::max(1, 2 * num_sms_ / ctas);
    // The same at 2 CTAs per SM (the register kernel at head_dim 256, and int4 and rk4v4-e8 at
    // 128): below 6 pages per split a second CTA per SM costs more (its prologue, its
    // partial rows and twice the merge's) than it gains: one wave of 1 per SM (H200,
    // 16/2/256, batch 1, 32K, 4 pages per split: rk2v4-e8 64 splits 0.0148 ms against 128
    // 0.0156, int4 0.0138 against 0.0144; 24/4/256 at 7.8 pages per split: 66 stay faster).
    if (c == 0 && cls_[0].rows == kCompRows && shape_.kind != CacheKind::Bf16 && k.slots == 2 * num_sms_ &&
        max_pages[c] < 6 * splits)
      splits = std::max(1, num_sms_ / ctas);
    splits = std::min(splits, std::max(1, max_pages[c] / 4));
    splits = std::min(splits, c == 0 && shape_.kind != CacheKind::Bf16 ? kMaxSplits : 64);
    const size_t row_bytes = size_t(n_rows_total_) * (size_t(shape_.head_dim) + 2) * 4;
    while (splits > 1 && size_t(splits) * row_bytes > (size_t(256) << 20)) --splits;
    // The kernels give each split ceil(pages / splits) pages, so the last splits of the longest
    // sequence can be empty (32K = 512 pages in 33 splits: 32 of 16 pages and one of none). Those
    // CTAs and their partial rows are dropped; no split gets more pages. (H200, 32/8/128 batch
    // 1 32K, graph: rk2v4-e8 15.80 -> 15.65 us, int4 14.47 -> 14.39.)
    const int pps = (max_pages[c] + splits - 1) / splits;
    splits = (max_pages[c] + pps - 1) / pps;
    if (forced_splits_ > 0) splits = std::min(forced_splits_, kMaxSplits);
    k.splits = splits;
    if (splits > 1) part_need = std::max(part_need, size_t(splits) * row_bytes);
    // The register decode kernel's grid, when it is one wave of fewer CTAs per SM than fit,
    // is capped at that many per SM (pad_for_ctas_per_sm); NINFER_CUDA_CTA_CAP=0: uncapped.
    k.ctas_per_sm = 0;
    if (c == 0 && cls_[0].rows == kCompRows && cta_cap_enabled()) {
      const int occ = k.slots / num_sms_;
      const int cps = int((size_t(ctas) * size_t(splits) + size_t(num_sms_) - 1) / size_t(num_sms_));
      if (cps < occ) k.ctas_per_sm = cps;
    }
    if (c == 0 && cls_[0].rows == kCompRows && forced_cap_ >= 0) k.ctas_per_sm = forced_cap_;
  }
  // Compressed kinds on the sm_90 prefill kernel: the pages the prefill class sees, expanded to
  // bf16 into a scratch pool of at most kPrefillScratchBytes (run_prefill_sm90). When they all
  // fit, one segment holds them and the planned splits stand; otherwise segments of L pages of
  // every chunk, one after the other, each folding the last one's partial (one split each).
  segs_.clear();
  std::vector<int32_t> seg_meta;  // the remapped tables, then per segment its (source, scratch) page pairs
  if (prefill_sm90_ && shape_.kind != CacheKind::Bf16 && !pseqs.empty()) {
    const size_t page_bytes = size_t(shape_.n_kv_heads) * kPage * shape_.head_dim * 2 * 2;  // K and V, bf16
    const int cap = std::max(2, forced_scratch_pages_ > 0 ? forced_scratch_pages_ : int(kPrefillScratchBytes / page_bytes)) / 2 * 2;
    long total = 0;
    int max_last = 0;
    for (const PSeq& q : pseqs) {
      total += q.last - q.first + 1;
      max_last = std::max(max_last, q.last);
    }
    const bool one = total <= cap;
    const int L = one ? max_last + 1 : std::max(2, cap / int(pseqs.size()) / 2 * 2);
    const int ppt = shape_.head_dim == 256 ? 1 : 2;  // pages per key tile of the kernel
    // One table for every segment: scratch ids packed in order (one segment), or chunk i's page
    // pg at i L + pg % L (several: a segment holds L pages of each chunk at most).
    seg_meta.assign(toff, 0);
    int used = 0;
    for (size_t i = 0; i < pseqs.size(); ++i)
      for (int pg = pseqs[i].first; pg <= pseqs[i].last; ++pg)
        seg_meta[pseqs[i].toff + pg] = one ? used++ : int(i) * L + pg % L;
    if (!one) used = int(pseqs.size()) * L;
    for (int s0 = 0; s0 <= max_last; s0 += L) {
      PrefillSegment g;
      g.kt_lo = one ? 0 : s0 / ppt;
      g.kt_hi = one ? (1 << 30) : (s0 + L) / ppt;
      g.table_off = 0;
      seg_meta.resize((seg_meta.size() + 3) / 4 * 4);
      g.pairs_off = seg_meta.size();
      for (const PSeq& q : pseqs) {
        for (int pg = std::max(q.first, s0); pg <= std::min(q.last, s0 + L - 1); ++pg) {
          const int32_t src = host_meta_[q.toff + pg], dst = seg_meta[q.toff + pg];
          seg_meta.push_back(src);
          seg_meta.push_back(dst);
          ++g.n_pairs;
        }
      }
      if (g.n_pairs == 0) {
        seg_meta.resize(g.pairs_off);
        continue;
      }
      segs_.push_back(g);
    }
    if (segs_.size() > 1) {
      cls_[1].splits = 1;
      part_need = std::max(part_need, size_t(n_rows_total_) * (size_t(shape_.head_dim) + 2) * 4);
    }
    if (used > scratch_pages_) {
      if (d_scratch_) NINFER_CUDA_CHECK(cudaFree(d_scratch_));
      d_scratch_ = nullptr;
      NINFER_CUDA_CHECK(cudaMalloc(&d_scratch_, size_t(used) * page_bytes));
      NINFER_CUDA_CHECK(cudaMemsetAsync(d_scratch_, 0, size_t(used) * page_bytes, s));  // finite everywhere
      scratch_pages_ = used;
    }
  }
  if (part_need > d_part_bytes_) {
    if (d_part_) NINFER_CUDA_CHECK(cudaFree(d_part_));
    d_part_ = nullptr;
    NINFER_CUDA_CHECK(cudaMalloc(&d_part_, part_need));
    d_part_bytes_ = part_need;
  }
  host_meta_.resize((host_meta_.size() + 3) / 4 * 4);
  const size_t seg_base = host_meta_.size();
  host_meta_.insert(host_meta_.end(), seg_meta.begin(), seg_meta.end());
  for (PrefillSegment& g : segs_) {
    g.pairs_off += seg_base;
    g.table_off += seg_base;
  }
  const size_t bytes = host_meta_.size() * 4;
  if (bytes > pinned_bytes_) {
    // The previous upload may still be in flight from the old buffer.
    NINFER_CUDA_CHECK(cudaStreamSynchronize(s));
    if (pinned_) NINFER_CUDA_CHECK(cudaFreeHost(pinned_));
    if (d_meta_) NINFER_CUDA_CHECK(cudaFree(d_meta_));
    pinned_bytes_ = std::max(bytes * 2, size_t(1) << 16);
    NINFER_CUDA_CHECK(cudaMallocHost(&pinned_, pinned_bytes_));
    NINFER_CUDA_CHECK(cudaMalloc(&d_meta_, pinned_bytes_));
    d_meta_bytes_ = pinned_bytes_;
  } else {
    // NOTE: the pinned buffer is reused; the caller's forward ends with a synchronising copy,
    // and this synchronise protects the case where it does not.
    NINFER_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  std::memcpy(pinned_, host_meta_.data(), bytes);
  NINFER_CUDA_CHECK(cudaMemcpyAsync(d_meta_, pinned_, bytes, cudaMemcpyHostToDevice, s));
  const int32_t* base = static_cast<const int32_t*>(d_meta_);
  d_tables_ = base;
  cls_[0].d_work = base + off_work[0];
  cls_[1].d_work = base + off_work[1];
}

void PagedAttention::run(const float* q, int q_ld, const uint8_t* k_pool, const uint8_t* v_pool, uint16_t* out,
                         int out_ld, cudaStream_t s, bool history_ready, bool q_ready) {
  for (int c = 0; c < 2; ++c) {
    const Class& k = cls_[c];
    if (k.n_work == 0) continue;
    KernelParams kp{};
    kp.q = q;
    kp.q_ld = q_ld;
    kp.k_pool = k_pool;
    kp.v_pool = v_pool;
    kp.tables = d_tables_;
    kp.work = k.d_work;
    kp.n_heads = shape_.n_heads;
    kp.n_kv_heads = shape_.n_kv_heads;
    kp.group = shape_.n_heads / shape_.n_kv_heads;
    kp.q_rot = shape_.q_rotation;
    kp.o_rot = shape_.o_rotation;
    kp.scale_log2 = kLog2e / std::sqrt(float(shape_.head_dim));
    kp.n_splits = k.splits;
    kp.out = out;
    kp.out_ld = out_ld;
    kp.part_o = d_part_;
    kp.part_ml = d_part_ ? d_part_ + size_t(k.splits) * n_rows_total_ * shape_.head_dim : nullptr;
    kp.n_rows_total = n_rows_total_;
    kp.fmt = int(shape_.kind);
    kp.k_cb = int(cache_code_bytes(shape_.kind, shape_.head_dim, 0));
    kp.v_cb = int(cache_code_bytes(shape_.kind, shape_.head_dim, 1));
    kp.k_blk = int(cache_block_bytes(shape_.kind, shape_.head_dim, 0));
    kp.v_blk = int(cache_block_bytes(shape_.kind, shape_.head_dim, 1));
    kp.e8p_abs = e8p_abs_;
    kp.e8p_mag = e8p_mag_;
    kp.e8p_sgn = e8p_sgn_;
    kp.ctas_per_sm = k.ctas_per_sm;
    kp.history_ready = history_ready && history_early_enabled() ? 1 : 0;
    kp.q_ready = q_ready && q_early_enabled() ? 1 : 0;
    kp.ext = shape_.window > 0 || shape_.softcap > 0.0f ? 1 : 0;
    kp.window = shape_.window;
    kp.cap2 = shape_.softcap > 0.0f ? shape_.softcap * kLog2e : 0.0f;
    kp.cap_k = shape_.softcap > 0.0f ? 2.0f / shape_.softcap : 0.0f;
    if (c == 1 && prefill_sm90_) {
      run_prefill_sm90(kp, shape_, k.n_work, n_pool_blocks_, static_cast<const int32_t*>(d_meta_), segs_, d_scratch_,
                       scratch_pages_, s);
      continue;
    }
    switch (shape_.head_dim) {
      case 64: dispatch_kind<64>(kp, shape_.kind, c, k.n_work, s); break;
      case 128: dispatch_kind<128>(kp, shape_.kind, c, k.n_work, s); break;
      default: dispatch_kind<256>(kp, shape_.kind, c, k.n_work, s); break;
    }
  }
}

}  // namespace ninfer::cuda
