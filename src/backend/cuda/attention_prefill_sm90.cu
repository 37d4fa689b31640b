// Prefill attention for Hopper (sm_90a) in the FlashAttention-3 style, over the paged KV cache
// in every CUDA format (layout: kv_cache.h; contract: PagedAttention::run in attention.h;
// host interface: attention_prefill_sm90.h). This file is compiled for sm_90a only
// (src/backend/cuda/CMakeLists.txt); attention.cu dispatches the prefill-tile class to it on a
// compute capability 9.0 device.
//
// Work: a CTA takes 128 query rows (row = token * group + q head of one kv head, as every
// kernel of attention.cu orders them) of one chunk and kv head, and one KV split (a range of
// key tiles). Its 384 threads are three warpgroups:
//  - warpgroup 0, the producer: fills a ring of STAGES shared K/V tiles of BN keys (BN = 128,
//    two pages; 64 at head_dim 256; STAGES: PfCfg) from bf16 pages, as stored, by the bulk
//    tensor copy engine (one 3-d tensor map per pool: [blocks][64 slots][D], boxes of 64 slots x 64 columns,
//    128-byte swizzle) completing on the stage's `full` mbarrier. Pages of the other formats
//    are first expanded once per layer into a bf16 scratch pool by prefill_expand_kernel
//    (PagedAttention::run; the codecs' own device functions, kv_codecs.cuh expand_block8,
//    kv_lowbit.cuh expand_lowbit8): expanding them in this kernel's producer cost every CTA
//    of a kv head the whole walk again (7-9x the bf16 time at 32K on the H200).
//  - warpgroups 1 and 2, the consumers, 64 rows each: Q (fp32, post rope) is loaded, rotated
//    by the format's K rotation in registers, rounded to bf16 and stored once in shared
//    memory; per key tile S = Q K^T by wgmma (m64nBNk16, A and B from shared memory, fp32
//    accumulators), masking (causal, sliding window, rows past the chunk) only on tiles that
//    cross a boundary, the online softmax in registers (base 2: scores times
//    scale * log2 e, exp2), P rounded to bf16 in registers as wgmma's A operand for
//    O += P V (m64nDk16, V from shared memory as its transposed, MN-major B operand), then
//    an arrive on the stage's `empty` mbarrier. Key tiles wholly outside the causal range or
//    the window are never loaded.
// Shared memory (each 64-column block 1024-byte aligned, as the 128-byte swizzle needs): Q
// [D / 64][128 rows][128 B]; STAGES x (K [D / 64][BN][128 B], V likewise); the mbarriers.
// 128-byte swizzle: the 16-byte chunk c of row r of a block lives at chunk c ^ (r % 8).
// Epilogue: one split: O / l, the V rotation applied back in registers, bf16 out; several:
// O, m, l as fp32 partials for attention.cu's merge_kernel (same layout as write_tile's).
//
// Error budget: attention.h's prefill budget (Q and P rounded to bf16, dequantised values
// rounded to bf16, fp32 accumulation); only the order of the fp32 sums differs.
#include <cuda.h>
#include <cuda_fp16.h>
#include <cudaTypedefs.h>

#include <cmath>
#include <stdexcept>

#include "backend/cuda/attention_prefill_sm90.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/kv_codecs.cuh"
#include "backend/cuda/kv_lowbit.cuh"
#include "backend/cuda/sm90_ops.cuh"
#include "core/env.h"

namespace ninfer::cuda {
namespace {

constexpr int kThreadsPf = 384;

// ST: stages of the K/V ring. 4 at head_dim 64; at 128 three (225 KiB of the 227 available;
// two with NINFER_CUDA_PREFILL_DEEP=0); at 256 two (three would not fit).
template <int D, int ST>
struct PfCfg {
  static constexpr int BN = D == 256 ? 64 : 128;   // keys per tile
  static constexpr int PPT = BN / 64;              // pages per tile
  static constexpr int STAGES = ST;
  static constexpr int SUB = D / 64;               // 64-column (128-byte) blocks of a row
  static constexpr int QBLK = 128 * 128;           // one block of Q: 128 rows x 128 B
  static constexpr int KVBLK = BN * 128;           // one block of a K or V tile
  static constexpr int oStage = SUB * QBLK;
  static constexpr int kSide = SUB * KVBLK;
  static constexpr int kStage = 2 * kSide;         // K, then V
  static constexpr int oBar = oStage + STAGES * kStage;
  static constexpr int kBytes = oBar + 2 * STAGES * 8 + 1024;  // + slack to align the base to 1024
  static constexpr int kTxBytes = 2 * BN * D * 2;  // bytes the copy engine writes per stage
  static_assert(kBytes <= 227 * 1024, "shared memory of the K/V ring");
};

// Registers per thread after setmaxnreg: the consumers hold O (D / 2), S (BN / 2) and P
// (BN / 4) per thread; the producer is one issuing thread. NOTE: setmaxnreg.inc only takes
// registers the CTA itself released, so the three warpgroups' budgets must sum to at most the
// launch allocation, 384 threads x 168 (__launch_bounds__(384, 1)) = 128 x 504; asking for
// more hangs the consumers in setmaxnreg (seen on the H200: 80 + 2 x 216 never started).
constexpr int kRegBudget128 = 504;
constexpr int kConsumerRegs = 240, kProducerRegs = 24;
static_assert(kProducerRegs + 2 * kConsumerRegs <= kRegBudget128, "register split");

// One unit of the expansion (prefill_expand_kernel): 8 consecutive values (chunk c) of key row
// r of a stored block, raw (codes and the scale bits that cover them), loaded before any is
// decoded so that a batch of loads is in flight at once.
struct RawUnit {
  uint2 code;
  uint32_t sc;
};

__device__ __forceinline__ RawUnit load_unit(const PrefillSm90Params& p, int side, const uint8_t* blk, int r, int c,
                                             int D) {
  RawUnit u;
  u.code = make_uint2(0, 0);
  const int cb = side == 0 ? p.k_cb : p.v_cb;
  const uint8_t* scales = blk + kCachePageSize * cb;
  if (p.kind == CacheKind::Int8 && side == 1) {  // V codes dim-major: [D][64]
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      lo |= uint32_t(blk[(8 * c + i) * kCachePageSize + r]) << (8 * i);
      hi |= uint32_t(blk[(8 * c + 4 + i) * kCachePageSize + r]) << (8 * i);
    }
    u.code = make_uint2(lo, hi);
  } else {
    const int bpb = cb / (D / 8);  // code bytes per 8 values: 8 (int8, fp8), 4, or 2 (rk2v4-e8 K)
    const uint8_t* row = blk + r * cb;
    if (bpb == 8) u.code = *reinterpret_cast<const uint2*>(row + 8 * c);
    else if (bpb == 4) u.code.x = *reinterpret_cast<const uint32_t*>(row + 4 * c);
    else u.code.x = *reinterpret_cast<const uint16_t*>(row + 2 * c);
  }
  if (cache_lowbit(p.kind)) {
    if (cache_side_nvfp4(p.kind, side)) u.sc = scales[r * (D / 16) + c / 2];  // e4m3 per 16 values
    else u.sc = *reinterpret_cast<const uint16_t*>(scales + r * 2);           // fp16 per row
  } else {
    u.sc = *reinterpret_cast<const uint16_t*>(scales + (r * (D / 64) + c / 8) * 2);  // fp16 per 64-group
  }
  return u;
}

// The unit's 8 values as 4 bf16x2 words, through the formats' own expansions.
__device__ __forceinline__ uint4 expand_unit(const PrefillSm90Params& p, int side, const RawUnit& u) {
  uint4 w;
  if (cache_lowbit(p.kind)) {
    const bool nv = cache_side_nvfp4(p.kind, side);
    const uint8_t scb = uint8_t(u.sc);
    const float mul = nv ? 1.0f : __half2float(__ushort_as_half(uint16_t(u.sc)));
    w = expand_lowbit8(nv, reinterpret_cast<const uint8_t*>(&u.code), &scb, 0, mul);
  } else {
    const float s = __half2float(__ushort_as_half(uint16_t(u.sc)));
    float v[8];
    if (p.kind == CacheKind::Int8) {  // int8: code times its group's fp16 scale (kv/codecs/int8.cpp)
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = float(int8_t(((i < 4 ? u.code.x : u.code.y) >> (8 * (i % 4))) & 0xFF)) * s;
    } else {
      expand_block8(int(p.kind), side, reinterpret_cast<const uint8_t*>(&u.code), 0, s, p.e8p_abs, v);
    }
    w.x = cvt_bf16x2(v[0], v[1]);
    w.y = cvt_bf16x2(v[2], v[3]);
    w.z = cvt_bf16x2(v[4], v[5]);
    w.w = cvt_bf16x2(v[6], v[7]);
  }
  return w;
}

// One (page, kv head) block of a compressed pool expanded to the bf16 page layout
// ([64 slots][D], row-major) of a scratch pool: grid (pair, kv head, side), pairs[2 i] the
// source page id, pairs[2 i + 1] the scratch page id. The values are the formats' own
// expansions rounded to bf16 (the prefill error budget's "dequantised values rounded to bf16"),
// still in the rotated basis: the attention kernel rotates Q and O as for the stored pages.
template <int D>
__global__ void __launch_bounds__(128) prefill_expand_kernel(const __grid_constant__ PrefillSm90Params p,
                                                             const int32_t* __restrict__ pairs, uint16_t* dst_k,
                                                             uint16_t* dst_v) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int CPR = D / 8, NU = kCachePageSize * CPR / 128, BATCH = NU < 8 ? NU : 8;
  const int side = blockIdx.z, kvh = blockIdx.y;
  const int2 pr = *reinterpret_cast<const int2*>(pairs + 2 * blockIdx.x);
  const size_t bb = side == 0 ? size_t(p.k_blk) : size_t(p.v_blk);
  const uint8_t* blk = (side == 0 ? p.k_pool : p.v_pool) + (size_t(pr.x) * p.n_kv_heads + kvh) * bb;
  uint16_t* dst = (side == 0 ? dst_k : dst_v) + (size_t(pr.y) * p.n_kv_heads + kvh) * kCachePageSize * D;
#pragma unroll 1
  for (int u0 = 0; u0 < NU; u0 += BATCH) {
    RawUnit raw[BATCH];
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int u = threadIdx.x + 128 * (u0 + i);
      raw[i] = load_unit(p, side, blk, u / CPR, u % CPR, D);
    }
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int u = threadIdx.x + 128 * (u0 + i);
      *reinterpret_cast<uint4*>(dst + size_t(u) * 8) = expand_unit(p, side, raw[i]);
    }
  }
#endif
}

// The butterflies of a normalised Hadamard transform of length n (D, or 64 per group) on one
// row held by a warp, E = D / 32 consecutive values per lane (value lane * E + e).
template <int D>
__device__ __forceinline__ void lane_hadamard(float (&x)[D / 32], int n, int lane) {
  constexpr int E = D / 32;
#pragma unroll
  for (int h = 1; h < D; h <<= 1) {
    if (h >= n) break;
    if (h < E) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        if (e & h) continue;
        const float a = x[e], b = x[e + h];
        x[e] = a + b;
        x[e + h] = a - b;
      }
    } else {
      const int m = h / E;
      const bool hi = lane & m;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float y = __shfl_xor_sync(0xffffffffu, x[e], m);
        x[e] = hi ? y - x[e] : x[e] + y;
      }
    }
  }
  const float sc = rsqrtf(float(n));
#pragma unroll
  for (int e = 0; e < E; ++e) x[e] *= sc;
}

// The same transform on the two rows of a thread's wgmma accumulators o[D / 2] (column
// 8 j + 2 (lane % 4) + e % 2 of rows e / 2): column bit 0 is in the thread, bits 1-2 across
// the quad's lanes, bits 3 and up in the thread again.
template <int D>
__device__ __forceinline__ void acc_hadamard(float (&o)[D / 2], int n, int lane) {
#pragma unroll
  for (int h = 1; h < D; h <<= 1) {
    if (h >= n) break;
    if (h == 1) {
#pragma unroll
      for (int i = 0; i < D / 2; i += 2) {
        const float a = o[i], b = o[i + 1];
        o[i] = a + b;
        o[i + 1] = a - b;
      }
    } else if (h < 8) {
      const int m = h / 2;
      const bool hi = lane & m;
#pragma unroll
      for (int i = 0; i < D / 2; ++i) {
        const float y = __shfl_xor_sync(0xffffffffu, o[i], m);
        o[i] = hi ? y - o[i] : o[i] + y;
      }
    } else {
      const int jh = h / 8;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        if (j & jh) continue;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float a = o[4 * j + e], b = o[4 * (j + jh) + e];
          o[4 * j + e] = a + b;
          o[4 * (j + jh) + e] = a - b;
        }
      }
    }
  }
  const float sc = rsqrtf(float(n));
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] *= sc;
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t da, uint64_t db, int acc) {
  if constexpr (N == 64) sm90::wgmma_ss_n64(d, da, db, acc);
  else sm90::wgmma_ss_n128(d, da, db, acc);
}
template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (N == 64) sm90::wgmma_rs_n64(d, a, db);
  else if constexpr (N == 128) sm90::wgmma_rs_n128(d, a, db);
  else sm90::wgmma_rs_n256(d, a, db);
}

template <int D, int ST>
__global__ void __launch_bounds__(kThreadsPf, 1)
    prefill_sm90_kernel(const __grid_constant__ PrefillSm90Params p, const __grid_constant__ CUtensorMap tm_k,
                        const __grid_constant__ CUtensorMap tm_v) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = PfCfg<D, ST>;
  constexpr int BN = C::BN, PPT = C::PPT, STAGES = C::STAGES;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* sm = smem_raw + ((1024 - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  const uint32_t sm_base = sm90::smem_u32(sm);
  const uint32_t bar_full = sm_base + C::oBar, bar_empty = bar_full + 8 * STAGES;

  // ---- the tile: rows [row0, row_end) of one chunk, kv head kvh, key tiles [kt_begin, kt_end) ----
  const int item = p.n_work - 1 - int(blockIdx.x);  // the longest causal walks first
  const int4 wi = *reinterpret_cast<const int4*>(p.work + 8 * item);
  const int32_t* table = p.tables + p.work[8 * item + 4];
  const int row0 = wi.x, tok0 = wi.y, start = wi.w, G = p.group;
  const int kvh = blockIdx.y, split = blockIdx.z;
  const int R = wi.z * G;
  const int row_end = min(row0 + 128, R);
  const int pos_lo = start + row0 / G, pos_hi = start + (row_end - 1) / G;  // positions of the tile's rows
  const int k_lo = p.window > 0 ? max(0, pos_lo - p.window + 1) : 0;
  // The key tiles the rows see, within this launch's segment [kt_seg_lo, kt_seg_hi).
  const int kt_lo = max(k_lo / BN, p.kt_seg_lo), n_kt = max(0, min(pos_hi / BN + 1, p.kt_seg_hi) - kt_lo);
  const int per = (n_kt + p.n_splits - 1) / p.n_splits;
  const int kt_begin = kt_lo + min(n_kt, split * per), kt_end = kt_lo + min(n_kt, split * per + per);
  const int n_it = kt_end - kt_begin;
  const int first_page = k_lo / kCachePageSize, last_page = pos_hi / kCachePageSize;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      sm90::mbar_init(bar_full + 8 * s, 1);
      sm90::mbar_init(bar_empty + 8 * s, 8);  // one arrive per consumer warp
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128, lane = threadIdx.x % 32;
  if (wg == 0) {
    // ================= producer =================
    sm90::regs_dec<kProducerRegs>();
    {
      if (threadIdx.x == 0) {
        int nx[PPT];
        auto page_ids = [&](int kt, int (&ids)[PPT]) {
#pragma unroll
          for (int q = 0; q < PPT; ++q) {
            const int pg = kt * PPT + q;
            // A tile's pages below the first one its rows see (a window's; such pages may be
            // freed) or past the last: the nearest page they see instead (finite, masked).
            ids[q] = table[min(max(pg, first_page), last_page)];
          }
        };
        if (n_it > 0) page_ids(kt_begin, nx);
        for (int it = 0; it < n_it; ++it) {
          const int stage = it % STAGES;
          const uint32_t parity = uint32_t(it / STAGES) & 1u;
          int ids[PPT];
#pragma unroll
          for (int q = 0; q < PPT; ++q) ids[q] = nx[q];
          if (it + 1 < n_it) page_ids(kt_begin + it + 1, nx);  // one tile ahead: its latency overlaps
          sm90::mbar_wait(bar_empty + 8 * stage, parity ^ 1u);
          const uint32_t full = bar_full + 8 * stage;
          sm90::mbar_expect_tx(full, C::kTxBytes);
          const uint32_t st = sm_base + C::oStage + stage * C::kStage;
#pragma unroll
          for (int q = 0; q < PPT; ++q) {
            const int z = ids[q] * p.n_kv_heads + kvh;
#pragma unroll
            for (int b = 0; b < C::SUB; ++b) {
              sm90::tma_load_3d(st + b * C::KVBLK + q * 64 * 128, &tm_k, 64 * b, 0, z, full);
              sm90::tma_load_3d(st + C::kSide + b * C::KVBLK + q * 64 * 128, &tm_v, 64 * b, 0, z, full);
            }
          }
        }
      }
    }
    return;
  }

  // ================= consumers: warpgroup cw (0, 1) owns rows [64 cw, 64 cw + 64) =================
  sm90::regs_inc<kConsumerRegs>();
  const int cw = wg - 1, wq = (threadIdx.x / 32) % 4, gq = lane / 4, cq = lane % 4;

  // ---- Q: fp32 -> K rotation -> bf16, swizzled [D / 64][128 rows][128 B] ----
  {
    constexpr int E = D / 32;
    const int n_rot = p.q_rot == 1 ? D : 64;
#pragma unroll 1
    for (int i = 0; i < 16; ++i) {
      const int lr = 64 * cw + 16 * wq + i, gr = row0 + lr;
      float x[E];
      if (gr < R) {
        const float* src = p.q + size_t(tok0 + gr / G) * p.q_ld + size_t(kvh * G + gr % G) * D + lane * E;
        if constexpr (E == 2) {
          const float2 v = *reinterpret_cast<const float2*>(src);
          x[0] = v.x;
          x[1] = v.y;
        } else {
#pragma unroll
          for (int e = 0; e < E; e += 4) {
            const float4 v = *reinterpret_cast<const float4*>(src + e);
            x[e] = v.x;
            x[e + 1] = v.y;
            x[e + 2] = v.z;
            x[e + 3] = v.w;
          }
        }
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e) x[e] = 0.0f;
      }
      if (p.q_rot != 0) lane_hadamard<D>(x, n_rot, lane);
      const int col = lane * E, b = col / 64, ch = (col % 64) / 8;
      uint8_t* dst = sm + b * C::QBLK + lr * 128 + ((ch ^ (lr % 8)) * 16) + (col % 8) * 2;
      if constexpr (E == 2) {
        *reinterpret_cast<uint32_t*>(dst) = cvt_bf16x2(x[0], x[1]);
      } else if constexpr (E == 4) {
        *reinterpret_cast<uint2*>(dst) = make_uint2(cvt_bf16x2(x[0], x[1]), cvt_bf16x2(x[2], x[3]));
      } else {
        *reinterpret_cast<uint4*>(dst) =
            make_uint4(cvt_bf16x2(x[0], x[1]), cvt_bf16x2(x[2], x[3]), cvt_bf16x2(x[4], x[5]), cvt_bf16x2(x[6], x[7]));
      }
    }
    sm90::fence_proxy_async();
    sm90::named_barrier(1 + cw, 128);
  }

  // This thread's two rows and the positions they see up to (-1: past the chunk, no key).
  const int grA = row0 + 64 * cw + 16 * wq + gq, grB = grA + 8;
  const int posA = grA < R ? start + grA / G : -1, posB = grB < R ? start + grB / G : -1;
  const bool rows_full = row0 + 128 <= R;
  const float sl2 = p.cap2 != 0.0f ? 1.0f : p.scale_log2;  // capped scores are in log2 units already

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float s[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) s[i] = 0.0f;
  float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
  const uint32_t q_addr = sm_base + 64 * cw * 128;
  uint32_t pa[BN / 16][4];  // P of the last tile, bf16 pairs in wgmma's A layout

  auto stage_addr = [&](int it) { return sm_base + C::oStage + (it % STAGES) * C::kStage; };
  auto wait_full = [&](int it) { sm90::mbar_wait(bar_full + 8 * (it % STAGES), uint32_t(it / STAGES) & 1u); };
  auto release = [&](int it) {
    __syncwarp();
    if (lane == 0) sm90::mbar_arrive(bar_empty + 8 * (it % STAGES));
  };
  // S = Q K^T of tile it, issued (one commit group).
  auto issue_s = [&](int it) {
    const uint32_t st = stage_addr(it);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t da = sm90::desc_sw128(q_addr + (kk / 4) * C::QBLK + (kk % 4) * 32, 16, 1024);
      const uint64_t db = sm90::desc_sw128(st + (kk / 4) * C::KVBLK + (kk % 4) * 32, 16, 1024);
      wgmma_ss<BN>(s, da, db, kk > 0 ? 1 : 0);
    }
    sm90::wg_commit();
  };
  // O += P V of tile it, issued (one commit group).
  auto issue_pv = [&](int it) {
    const uint32_t st = stage_addr(it) + C::kSide;
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      wgmma_rs<D>(o, pa[kk], sm90::desc_sw128(st + kk * 16 * 128, C::KVBLK, 1024));
    sm90::wg_commit();
  };
  // Masks S of tile it where it crosses the causal edge, the window's edge or the chunk's end,
  // moves the running maxima, turns S into P = exp2(S scale - m) in place (fp32), adds the row
  // sums; returns the rescale factors of O's two rows.
  auto softmax = [&](int it, float& alA, float& alB) {
    const int key0 = (kt_begin + it) * BN;
    if (p.cap2 != 0.0f) {  // soft cap (before the mask: a capped -inf would be -cap), log2 units
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) s[i] = softcap_log2(s[i] * p.scale_log2, p.cap2, p.cap_k);
    }
    const bool full = rows_full && key0 + BN - 1 <= pos_lo && (p.window <= 0 || key0 > pos_hi - p.window);
    if (!full) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + 8 * j + 2 * cq + (e & 1);
          const int pos = e < 2 ? posA : posB;
          const bool ok = key <= pos && (p.window <= 0 || key > pos - p.window);
          if (!ok) s[4 * j + e] = -INFINITY;
        }
    }
    float mxA = -INFINITY, mxB = -INFINITY;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      mxA = fmaxf(mxA, fmaxf(s[4 * j], s[4 * j + 1]));
      mxB = fmaxf(mxB, fmaxf(s[4 * j + 2], s[4 * j + 3]));
    }
    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
    const float nA = fmaxf(mA, mxA * sl2), nB = fmaxf(mB, mxB * sl2);
    const float bA = nA == -INFINITY ? 0.0f : nA, bB = nB == -INFINITY ? 0.0f : nB;
    alA = fast_exp2(mA - bA);  // 0 while a row has seen no key
    alB = fast_exp2(mB - bB);
    mA = nA;
    mB = nB;
    float sumA = 0.0f, sumB = 0.0f;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      s[4 * j] = fast_exp2(fmaf(s[4 * j], sl2, -bA));
      s[4 * j + 1] = fast_exp2(fmaf(s[4 * j + 1], sl2, -bA));
      s[4 * j + 2] = fast_exp2(fmaf(s[4 * j + 2], sl2, -bB));
      s[4 * j + 3] = fast_exp2(fmaf(s[4 * j + 3], sl2, -bB));
      sumA += s[4 * j] + s[4 * j + 1];
      sumB += s[4 * j + 2] + s[4 * j + 3];
    }
    lA = lA * alA + sumA;
    lB = lB * alB + sumB;
  };
  auto rescale_o = [&](float alA, float alB) {
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j] *= alA;
      o[4 * j + 1] *= alA;
      o[4 * j + 2] *= alB;
      o[4 * j + 3] *= alB;
    }
  };
  auto pack_p = [&] {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      pa[j / 2][(j % 2) * 2] = cvt_bf16x2(s[4 * j], s[4 * j + 1]);
      pa[j / 2][(j % 2) * 2 + 1] = cvt_bf16x2(s[4 * j + 2], s[4 * j + 3]);
    }
  };

  if (p.pipe == 0 || n_it == 0) {
    // One tile at a time: S, softmax, P V (the two consumer warpgroups overlap each other).
#pragma unroll 1
    for (int it = 0; it < n_it; ++it) {
      wait_full(it);
      sm90::wg_fence();
      issue_s(it);
      sm90::wg_wait<0>();
      sm90::reg_fence(s);
      float alA, alB;
      softmax(it, alA, alB);
      rescale_o(alA, alB);
      pack_p();
      sm90::wg_fence();
      issue_pv(it);
      sm90::wg_wait<0>();
      sm90::reg_fence(o);
      sm90::reg_fence_u(pa);
      release(it);
    }
  } else {
    // Overlapped (FlashAttention-3's intra-warpgroup pipelining): S of tile it is issued with
    // P V of tile it - 1, and the softmax of tile it runs while that P V is in flight; O is
    // rescaled once the P V has landed. pa stays live (reg_fence_u) until its MMA is done.
    // pipe 2 adds FlashAttention-3's ping-pong between the two consumer warpgroups: each issue
    // phase (the MMAs of one step) waits for the other warpgroup's last phase to be issued
    // (named barrier 3 + cw: bar.sync by this warpgroup, bar.arrive by the other), so one
    // warpgroup's softmax runs while the other's MMAs occupy the tensor cores. Both walk the
    // same n_it tiles, so both have n_it + 1 phases; warpgroup 1 opens warpgroup 0's first
    // phase and does not pass on after its last, leaving no arrival unconsumed.
    const bool pp = p.pipe == 2;
    int phase = 0;
    auto turn_begin = [&] {
      if (pp) sm90::named_barrier(3 + cw, 256);
    };
    auto turn_end = [&] {
      if (pp && !(cw == 1 && phase == n_it)) sm90::named_barrier_arrive(3 + (1 - cw), 256);
      ++phase;
    };
    if (pp && cw == 1) sm90::named_barrier_arrive(3, 256);
    wait_full(0);
    turn_begin();
    sm90::wg_fence();
    issue_s(0);
    turn_end();
    sm90::wg_wait<0>();
    sm90::reg_fence(s);
    {
      float alA, alB;
      softmax(0, alA, alB);
    }
    pack_p();
#pragma unroll 1
    for (int it = 1; it < n_it; ++it) {
      wait_full(it);
      turn_begin();
      sm90::wg_fence();
      issue_s(it);
      issue_pv(it - 1);
      turn_end();
      sm90::wg_wait<1>();
      sm90::reg_fence(s);
      float alA, alB;
      softmax(it, alA, alB);
      sm90::wg_wait<0>();
      sm90::reg_fence(o);
      sm90::reg_fence_u(pa);
      release(it - 1);
      rescale_o(alA, alB);
      pack_p();
    }
    turn_begin();
    sm90::wg_fence();
    issue_pv(n_it - 1);
    turn_end();
    sm90::wg_wait<0>();
    sm90::reg_fence(o);
    sm90::reg_fence_u(pa);
    release(n_it - 1);
  }

  // ---- epilogue ----
  lA += __shfl_xor_sync(0xffffffffu, lA, 1);
  lA += __shfl_xor_sync(0xffffffffu, lA, 2);
  lB += __shfl_xor_sync(0xffffffffu, lB, 1);
  lB += __shfl_xor_sync(0xffffffffu, lB, 2);
  const size_t growA = size_t(tok0 + grA / G) * p.n_heads + kvh * G + grA % G;
  const size_t growB = size_t(tok0 + grB / G) * p.n_heads + kvh * G + grB % G;
  if (p.seg_acc) {
    // Earlier segments' (O, m, l) of these rows, from partial slot 0, folded into this one's.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gr = h == 0 ? grA : grB;
      if (gr >= R) continue;
      const size_t grow = h == 0 ? growA : growB;
      const float2 ml = *reinterpret_cast<const float2*>(p.part_ml + grow * 2);
      float& m = h == 0 ? mA : mB;
      float& l = h == 0 ? lA : lB;
      const float mx = fmaxf(m, ml.x), base = mx == -INFINITY ? 0.0f : mx;
      const float a = fast_exp2(ml.x - base), b = fast_exp2(m - base);
      const float* src = p.part_o + grow * D + 2 * cq;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        const float2 v = *reinterpret_cast<const float2*>(src + 8 * j);
        o[4 * j + 2 * h] = fmaf(o[4 * j + 2 * h], b, v.x * a);
        o[4 * j + 2 * h + 1] = fmaf(o[4 * j + 2 * h + 1], b, v.y * a);
      }
      l = l * b + ml.y * a;
      m = mx;
    }
  }
  if (p.n_splits == 1 && !p.seg_to_part) {
    const float iA = lA > 0.0f ? 1.0f / lA : 0.0f, iB = lB > 0.0f ? 1.0f / lB : 0.0f;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j] *= iA;
      o[4 * j + 1] *= iA;
      o[4 * j + 2] *= iB;
      o[4 * j + 3] *= iB;
    }
    if (p.o_rot != 0) acc_hadamard<D>(o, p.o_rot == 1 ? D : 64, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gr = h == 0 ? grA : grB;
      if (gr >= R) continue;
      uint16_t* dst = p.out + size_t(tok0 + gr / G) * p.out_ld + size_t(kvh * G + gr % G) * D + 2 * cq;
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<uint32_t*>(dst + 8 * j) = cvt_bf16x2(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gr = h == 0 ? grA : grB;
      if (gr >= R) continue;
      const size_t prow = size_t(split) * p.n_rows_total + (h == 0 ? growA : growB);
      float* dst = p.part_o + prow * D + 2 * cq;
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
      if (cq == 0) {
        p.part_ml[prow * 2] = h == 0 ? mA : mB;
        p.part_ml[prow * 2 + 1] = h == 0 ? lA : lB;
      }
    }
  }
#endif
}

// ---------------------------------------------------------------------------------------
// Host side.

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// [blocks][64 slots][D] bf16 of one pool; boxes of 64 columns x 64 slots, 128-byte swizzle.
CUtensorMap pool_map(const uint8_t* pool, int D, int n_blocks) {
  CUtensorMap m{};
  const cuuint64_t dims[3] = {cuuint64_t(D), cuuint64_t(kCachePageSize), cuuint64_t(n_blocks)};
  const cuuint64_t strides[2] = {cuuint64_t(D) * 2, cuuint64_t(D) * 2 * kCachePageSize};
  const cuuint32_t box[3] = {64, cuuint32_t(kCachePageSize), 1};
  const cuuint32_t estr[3] = {1, 1, 1};
  const CUresult r = tensor_map_encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<uint8_t*>(pool), dims,
                                          strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw std::runtime_error("cuTensorMapEncodeTiled failed for the KV pool (" + std::to_string(int(r)) + ")");
  return m;
}

// The ring depth of the head_dim-D kernel: 4 at 64, 2 at 256; at 128 two, or three with the
// deep ring (Schedule::deep).
template <int D>
constexpr int default_stages() {
  return D == 64 ? 4 : 2;
}

// The consumer schedule and ring per head_dim. Measured against SDPA cuDNN in one device call
// (H100, 2026-12-08, bench/prefill_variants.sh, bf16 pages): at 128 the ping-pong schedule with
// the three-stage ring (4K 0.82x -> 0.91x, 32K 1.00x -> 1.09x of cuDNN); at 256 the
// one-tile-at-a-time schedule (ping-pong there: 1.00x -> 0.77-0.80x). NINFER_CUDA_PREFILL_PIPE,
// _PINGPONG and _DEEP, when set, apply at every head_dim (docs/GPU.md).
struct Schedule {
  int pipe;   // 0: one tile at a time; 1: S of a tile issued with P V of the last; 2: + ping-pong
  bool deep;  // head_dim 128: three K/V stages
};
template <int D>
Schedule schedule() {
  static const Schedule v = [] {
    const bool pipe = env_switch("NINFER_CUDA_PREFILL_PIPE", D == 128);
    const bool pingpong = env_switch("NINFER_CUDA_PREFILL_PINGPONG", D == 128);
    return Schedule{pipe ? (pingpong ? 2 : 1) : 0, env_switch("NINFER_CUDA_PREFILL_DEEP", D == 128)};
  }();
  return v;
}

template <int D, int ST>
void configure() {
  static bool done = false;  // NOTE: per instantiation; the attribute is per function
  if (!done) {
    NINFER_CUDA_CHECK(cudaFuncSetAttribute(prefill_sm90_kernel<D, ST>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           PfCfg<D, ST>::kBytes));
    done = true;
  }
}

template <int D, int ST>
void launch_ds(const PrefillSm90Params& p, cudaStream_t s) {
  configure<D, ST>();
  const CUtensorMap mk = pool_map(p.k_pool, D, p.n_pool_blocks), mv = pool_map(p.v_pool, D, p.n_pool_blocks);
  const dim3 grid(unsigned(p.n_work), unsigned(p.n_kv_heads), unsigned(p.n_splits));
  prefill_sm90_kernel<D, ST><<<grid, kThreadsPf, PfCfg<D, ST>::kBytes, s>>>(p, mk, mv);
  NINFER_CUDA_LAUNCH_CHECK();
}

template <int D>
void launch_d(const PrefillSm90Params& params, cudaStream_t s) {
  const Schedule sc = schedule<D>();
  PrefillSm90Params p = params;
  p.pipe = sc.pipe;
  if constexpr (D == 128) {
    if (sc.deep) return launch_ds<D, 3>(p, s);
  }
  launch_ds<D, default_stages<D>()>(p, s);
}

template <int D>
int occupancy() {
  constexpr int ST = default_stages<D>();
  configure<D, ST>();
  int n = 0;
  NINFER_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, prefill_sm90_kernel<D, ST>, kThreadsPf, PfCfg<D, ST>::kBytes));
  return n;
}

}  // namespace

bool prefill_sm90_default() {
  static const bool v = env_switch("NINFER_CUDA_PREFILL_SM90", true);
  return v;
}

bool prefill_sm90_available() {
  static const bool v = [] {
    int dev = 0, major = 0, minor = 0;
    NINFER_CUDA_CHECK(cudaGetDevice(&dev));
    NINFER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    NINFER_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    return major == 9 && minor == 0 && tensor_map_encoder() != nullptr;
  }();
  return v;
}

int prefill_sm90_ctas_per_sm(int head_dim) {
  switch (head_dim) {
    case 64: return occupancy<64>();
    case 128: return occupancy<128>();
    default: return occupancy<256>();
  }
}

void launch_prefill_sm90(const PrefillSm90Params& params, cudaStream_t s) {
  if (params.kind != CacheKind::Bf16) throw std::runtime_error("launch_prefill_sm90: bf16 pages only (expand others first)");
  switch (params.head_dim) {  // the schedule per head_dim: schedule<D>()
    case 64: launch_d<64>(params, s); break;
    case 128: launch_d<128>(params, s); break;
    default: launch_d<256>(params, s); break;
  }
}

void launch_prefill_expand(const PrefillSm90Params& src, const int32_t* pairs, int n_pairs, uint16_t* dst_k,
                           uint16_t* dst_v, cudaStream_t s) {
  if (n_pairs <= 0) return;
  const dim3 grid(unsigned(n_pairs), unsigned(src.n_kv_heads), 2u);
  switch (src.head_dim) {
    case 64: prefill_expand_kernel<64><<<grid, 128, 0, s>>>(src, pairs, dst_k, dst_v); break;
    case 128: prefill_expand_kernel<128><<<grid, 128, 0, s>>>(src, pairs, dst_k, dst_v); break;
    default: prefill_expand_kernel<256><<<grid, 128, 0, s>>>(src, pairs, dst_k, dst_v); break;
  }
  NINFER_CUDA_LAUNCH_CHECK();
}

}  // namespace ninfer::cuda
