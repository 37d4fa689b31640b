// Append kernels: encode new K/V rows into their cache pages (layout and bit-exactness rules
// in kv_cache.h).
#include <cuda_fp16.h>

#include <mutex>
#include <stdexcept>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/e8p_alu.h"
#include "backend/cuda/e8p_tables.h"
#include "backend/cuda/kv_cache.h"
#include "backend/cuda/kv_codecs.cuh"
#include "kv/codecs/rk2v4_e8.h"
#include "kv/codecs/rk4v4_e8.h"

namespace ninfer::cuda {
namespace {

__global__ void append_bf16_kernel(KvAppendParams p) {
  const int t = blockIdx.x, h = blockIdx.y, side = blockIdx.z;
  const int d = p.head_dim;
  const float* x = p.src + size_t(t) * p.ld + (side == 0 ? p.k_col : p.v_col) + size_t(h) * d;
  uint8_t* pool = side == 0 ? p.k_pool : p.v_pool;
  const size_t block = size_t(kCachePageSize) * d * 2;
  uint16_t* row = reinterpret_cast<uint16_t*>(pool + (size_t(p.tok_page[t]) * p.n_kv_heads + h) * block +
                                              size_t(p.tok_slot[t]) * d * 2);
  for (int i = threadIdx.x; i < d; i += blockDim.x) row[i] = f32_to_bf16_bits(x[i]);
}

constexpr int kMaxD = 256;

// One warp per (token, kv head, side); 4 warps per block.
__global__ void append_int8_kernel(KvAppendParams p) {
  __shared__ float buf[4][kMaxD];
  // The attention decode kernel that follows (a programmatic dependent launch) may start now:
  // it reads its start-up tables, work item and page ids, then waits for this grid before it
  // reads Q and the pages.
  pdl_launch_dependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int item = blockIdx.x * 4 + warp;
  if (item >= p.n_tokens * p.n_kv_heads * 2) return;
  const int side = item % 2, h = (item / 2) % p.n_kv_heads, t = item / (2 * p.n_kv_heads);
  const int d = p.head_dim;
  float* x = buf[warp];
  const float* src = p.src + size_t(t) * p.ld + (side == 0 ? p.k_col : p.v_col) + size_t(h) * d;
  load_row_for_codec(src, d, x, lane);
  if (side == 0 && p.k_rotate) hadamard_blocks_rn(x, d, d, lane);
  uint8_t* pool = side == 0 ? p.k_pool : p.v_pool;
  uint8_t* blk = pool + (size_t(p.tok_page[t]) * p.n_kv_heads + h) * cache_block_bytes(CacheKind::Int8, d, side);
  // K codes are slot-major, V codes dim-major (kv_cache.h).
  int8_t* codes = reinterpret_cast<int8_t*>(blk + (side == 0 ? size_t(p.tok_slot[t]) * d : size_t(p.tok_slot[t])));
  const int cstride = side == 0 ? 1 : kCachePageSize;
  uint16_t* scales = reinterpret_cast<uint16_t*>(blk + size_t(kCachePageSize) * d + size_t(p.tok_slot[t]) * (d / 32));
  for (int g = 0; g < d; g += 64) {
    const float a = x[g + lane], b = x[g + 32 + lane];
    const float amax = warp_max(fmaxf(fabsf(a), fabsf(b)));
    float raw = __fdiv_rn(amax, 127.0f);
    if (!(raw < 65504.0f)) raw = 65504.0f;
    const uint16_t bits = f32_to_f16_bits(raw);
    const float s = f16_bits_to_f32(bits);
    if (lane == 0) scales[g / 64] = bits;
    const float qa = s > 0.0f ? fminf(fmaxf(rintf(__fdiv_rn(a, s)), -127.0f), 127.0f) : 0.0f;
    const float qb = s > 0.0f ? fminf(fmaxf(rintf(__fdiv_rn(b, s)), -127.0f), 127.0f) : 0.0f;
    codes[(g + lane) * cstride] = int8_t(qa);
    codes[(g + 32 + lane) * cstride] = int8_t(qb);
  }
}


// rk4v4_e8.h e8l32::stage_div with its tables as scalars (device code cannot index a host
// constexpr array): the divisor of candidate c (0..3) of a scale-search stage, given the best
// divisor of the earlier stages.
static_assert(codecs::e8l32::kScaleStages == 3, "e8l32_stage_div follows rk4v4_e8.h");
constexpr float kDiv0 = codecs::e8l32::kAmaxDivs[0], kDiv1 = codecs::e8l32::kAmaxDivs[1],
                kDiv2 = codecs::e8l32::kAmaxDivs[2], kDiv3 = codecs::e8l32::kAmaxDivs[3];
constexpr float kStep10 = codecs::e8l32::kDivSteps[0][0], kStep11 = codecs::e8l32::kDivSteps[0][1],
                kStep12 = codecs::e8l32::kDivSteps[0][2], kStep13 = codecs::e8l32::kDivSteps[0][3];
constexpr float kStep20 = codecs::e8l32::kDivSteps[1][0], kStep21 = codecs::e8l32::kDivSteps[1][1],
                kStep22 = codecs::e8l32::kDivSteps[1][2], kStep23 = codecs::e8l32::kDivSteps[1][3];
__device__ __forceinline__ float e8l32_stage_div(int stage, int c, float best_div) {
  if (stage == 0) return c == 0 ? kDiv0 : c == 1 ? kDiv1 : c == 2 ? kDiv2 : kDiv3;
  const float step = stage == 1 ? (c == 0 ? kStep10 : c == 1 ? kStep11 : c == 2 ? kStep12 : kStep13)
                                : (c == 0 ? kStep20 : c == 1 ? kStep21 : c == 2 ? kStep22 : kStep23);
  return __fadd_rn(best_div, step);
}

// Compressed kinds (int4, rk4v4-e8, rk2v4-e8): one warp per (token, kv head, side), 4 warps
// per block. The prepared row (NaN -> 0, clamp, rotation) lives in shared memory; per 64-group
// the warp computes amax (and the rms tree of rk2v4-e8 K), then every lane encodes one
// (scale candidate, 8-dim block) pair: 4 x 8 lanes for the 32-bit E8 code (three stages of 4
// candidates, rk4v4_e8.h e8l32::stage_div), 2 x 8 for E8P.
// The candidates' errors are summed in block order through shuffles, exactly as the CPU loop.
__global__ void append_compressed_kernel(KvAppendParams p, E8pTables e8p) {
  __shared__ float buf[4][kMaxD];
  // The attention decode kernel that follows (a programmatic dependent launch) may start now:
  // it reads its start-up tables, work item and page ids, then waits for this grid before it
  // reads Q and the pages.
  pdl_launch_dependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int item = blockIdx.x * 4 + warp;
  if (item >= p.n_tokens * p.n_kv_heads * 2) return;
  const int side = item % 2, h = (item / 2) % p.n_kv_heads, t = item / (2 * p.n_kv_heads);
  const int d = p.head_dim;
  const int fmt = int(p.kind);
  float* x = buf[warp];
  const float* src = p.src + size_t(t) * p.ld + (side == 0 ? p.k_col : p.v_col) + size_t(h) * d;
  load_row_for_codec(src, d, x, lane);
  // K: H_D over the head; V: H_64 per group (the butterfly stages below 64 never cross a group).
  const int n = side == 0 ? d : 64;
  hadamard_blocks_rn(x, d, n, lane);

  const CacheKind kind = p.kind;
  const size_t cb = cache_code_bytes(kind, d, side);
  uint8_t* pool = side == 0 ? p.k_pool : p.v_pool;
  uint8_t* blk = pool + (size_t(p.tok_page[t]) * p.n_kv_heads + h) * cache_block_bytes(kind, d, side);
  uint8_t* codes = blk + size_t(p.tok_slot[t]) * cb;
  uint16_t* scales = reinterpret_cast<uint16_t*>(blk + size_t(kCachePageSize) * cb + size_t(p.tok_slot[t]) * (d / 32));
  const bool e8p_side = fmt == int(CacheKind::Rk2) && side == 0;
  for (int g = 0; g < d; g += 64) {
    const float a = x[g + lane], b = x[g + 32 + lane];
    const float m = warp_max(fmaxf(fabsf(a), fabsf(b)));
    if (fmt == int(CacheKind::Int4)) {
      uint16_t bits;
      const float s = fp16_scale(__fdiv_rn(m, 7.0f), &bits);
      if (lane == 0) scales[g / 64] = bits;
      const float x0 = x[g + 2 * lane], x1 = x[g + 2 * lane + 1];
      const int q0 = s > 0.0f ? int(fminf(fmaxf(rintf(__fdiv_rn(x0, s)), -7.0f), 7.0f)) : 0;
      const int q1 = s > 0.0f ? int(fminf(fmaxf(rintf(__fdiv_rn(x1, s)), -7.0f), 7.0f)) : 0;
      codes[g / 2 + lane] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
      continue;
    }
    const int blk8 = lane % 8;
    if (!e8p_side) {
      // 32-bit E8 code: three stages of 4 candidates (rk4v4_e8.cpp e8l32_encode); lane =
      // candidate * 8 + block. A candidate replaces the best only with a smaller error, in
      // candidate order, so the first wins ties as on the CPU.
      const int cand = lane / 8;
      float best_err = INFINITY, best_div = 0.0f;
      uint32_t best_code = 0;
      uint16_t best_bits = 0;
      for (int stage = 0; stage < codecs::e8l32::kScaleStages; ++stage) {
        const float div = e8l32_stage_div(stage, cand, best_div);
        uint16_t bits;
        const float s = fp16_scale(__fdiv_rn(m, div), &bits);
        float u[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) u[i] = s > 0.0f ? __fdiv_rn(x[g + 8 * blk8 + i], s) : 0.0f;
        float dist;
        const uint32_t code = e8l32_encode_block(u, &dist);
        float err = 0.0f;
        for (int bb = 0; bb < 8; ++bb) err = __fadd_rn(err, __shfl_sync(0xffffffffu, dist, cand * 8 + bb));
        err = __fmul_rn(__fmul_rn(err, s), s);
        int best = -1;
        for (int c = 0; c < 4; ++c) {
          const float e = __shfl_sync(0xffffffffu, err, c * 8);
          if (e < best_err) {
            best_err = e;
            best = c;
          }
        }
        // every lane takes the winner's divisor, scale and the code of its own block
        const int src = best < 0 ? lane : best * 8 + blk8;
        const float win_div = __shfl_sync(0xffffffffu, div, src);
        const uint32_t win_code = __shfl_sync(0xffffffffu, code, src);
        const uint32_t win_bits = __shfl_sync(0xffffffffu, uint32_t(bits), src);
        if (best >= 0) {
          best_div = win_div;
          best_code = win_code;
          best_bits = uint16_t(win_bits);
        }
      }
      if (lane < 8) {
        if (lane == 0) scales[g / 64] = best_bits;
        reinterpret_cast<uint32_t*>(codes)[g / 8 + blk8] = best_code;
      }
      continue;
    }
    // E8P (rk2v4-e8 K): 2 scale candidates x 8 blocks, lanes 16..31 repeat lanes 0..15.
    // tree_sumsq64: t[i] = x[i]^2 + x[i+32]^2, then halves 16, 8, ..., 1 (lane 0 holds the sum).
    float tsum = __fadd_rn(__fmul_rn(a, a), __fmul_rn(b, b));
    for (int o = 16; o > 0; o >>= 1) tsum = __fadd_rn(tsum, __shfl_down_sync(0xffffffffu, tsum, o));
    tsum = __shfl_sync(0xffffffffu, tsum, 0);
    const float rms = __fsqrt_rn(__fmul_rn(tsum, 1.0f / 64.0f));
    const int cand = (lane / 8) & 1;  // lanes 16..31 repeat lanes 0..15 and write nothing
    const float raw = cand == 0 ? __fmul_rn(rms, codecs::e8p16::kRmsMul) : __fdiv_rn(m, codecs::e8p16::kAmaxDiv);
    uint16_t bits;
    const float s = fp16_scale(raw, &bits);
    float u[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) u[i] = s > 0.0f ? __fdiv_rn(x[g + 8 * blk8 + i], s) : 0.0f;
    float dist;
    const uint32_t code = e8p16_encode_block(u, &dist, e8p);
    float err = 0.0f;
    for (int bb = 0; bb < 8; ++bb) err = __fadd_rn(err, __shfl_sync(0xffffffffu, dist, cand * 8 + bb));
    err = __fmul_rn(__fmul_rn(err, s), s);
    int best = 0;
    float best_err = INFINITY;
    for (int c = 0; c < 2; ++c) {
      const float e = __shfl_sync(0xffffffffu, err, c * 8);
      if (e < best_err) {
        best_err = e;
        best = c;
      }
    }
    if (lane / 8 == best) {
      if (blk8 == 0) scales[g / 64] = bits;
      reinterpret_cast<uint16_t*>(codes)[g / 8 + blk8] = uint16_t(code);
    }
  }
}

}  // namespace

E8pTables e8p_device_tables() {
  // NOTE: built once from the CPU reference's own table (e8p16::abs_pattern), so the device
  // codebook cannot drift from it; single-GPU process (the pointers belong to the device
  // current at the first call).
  static std::once_flag once;
  static E8pTables tables{};
  std::call_once(once, [] {
    std::vector<uint32_t> abs(256);
    std::vector<uint8_t> index(6561, 255);
    for (int idx = 0; idx < 256; ++idx) {
      const uint32_t a = codecs::e8p16::abs_pattern(idx);
      int key = 0, pow3 = 1;
      for (int i = 0; i < 8; ++i, pow3 *= 3) key += (int((a >> (4 * i)) & 0xF) - 1) / 2 * pow3;
      abs[size_t(idx)] = e8p_alu::abs_entry(idx);  // a with p(a) in bit 3
      if (idx < codecs::e8p16::kPatterns) index[size_t(key)] = uint8_t(idx);
    }
    std::vector<uint2> mag(256);
    std::vector<uint2> sgn(256);
    for (int idx = 0; idx < 256; ++idx) e8p_tables::magnitudes(abs[size_t(idx)], mag[size_t(idx)].x, mag[size_t(idx)].y);
    for (int b1 = 0; b1 < 256; ++b1) e8p_tables::xor_masks(uint32_t(b1), sgn[size_t(b1)].x, sgn[size_t(b1)].y);
    // One allocation: abs, mag, sgn, index (each offset a multiple of 16 bytes).
    const size_t n_abs = abs.size() * sizeof(uint32_t), n_mag = mag.size() * sizeof(uint2);
    const size_t n_sgn = sgn.size() * sizeof(uint2);
    const size_t o_mag = n_abs, o_sgn = o_mag + n_mag, o_index = o_sgn + n_sgn;
    void* d = nullptr;
    NINFER_CUDA_CHECK(cudaMalloc(&d, o_index + index.size()));
    uint8_t* b = static_cast<uint8_t*>(d);
    NINFER_CUDA_CHECK(cudaMemcpy(b, abs.data(), n_abs, cudaMemcpyHostToDevice));
    NINFER_CUDA_CHECK(cudaMemcpy(b + o_mag, mag.data(), n_mag, cudaMemcpyHostToDevice));
    NINFER_CUDA_CHECK(cudaMemcpy(b + o_sgn, sgn.data(), n_sgn, cudaMemcpyHostToDevice));
    NINFER_CUDA_CHECK(cudaMemcpy(b + o_index, index.data(), index.size(), cudaMemcpyHostToDevice));
    tables.abs = reinterpret_cast<const uint32_t*>(b);
    tables.mag = reinterpret_cast<const uint2*>(b + o_mag);
    tables.sgn = reinterpret_cast<const uint2*>(b + o_sgn);
    tables.index = b + o_index;
  });
  return tables;
}

void launch_kv_append(const KvAppendParams& p, cudaStream_t s) {
  if (p.n_tokens == 0) return;
  if (p.kind == CacheKind::Bf16) {
    append_bf16_kernel<<<dim3(p.n_tokens, p.n_kv_heads, 2), 128, 0, s>>>(p);
  } else {
    if (p.head_dim > kMaxD || p.head_dim % 64 != 0)
      throw std::runtime_error("KV append: head_dim must be a multiple of 64 up to 256");
    if (cache_lowbit(p.kind)) return launch_kv_append_lowbit(p, s);  // fp8, nvfp4, k8v4
    const int items = p.n_tokens * p.n_kv_heads * 2;
    if (p.kind == CacheKind::Int8) {
      append_int8_kernel<<<(items + 3) / 4, 128, 0, s>>>(p);
    } else {
      // NOTE: the E8P tables are built (cudaMalloc + copies) on first use; PagedAttention's
      // constructor does that at init_kv for rk2v4-e8, before any CUDA-graph capture.
      append_compressed_kernel<<<(items + 3) / 4, 128, 0, s>>>(
          p, p.kind == CacheKind::Rk2 ? e8p_device_tables() : E8pTables{});
    }
  }
  NINFER_CUDA_LAUNCH_CHECK();
}

}  // namespace ninfer::cuda
