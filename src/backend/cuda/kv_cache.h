// The CUDA backend's paged KV cache: device layout and the append kernels that encode new
// K/V rows into their pages.
//
// Device layout (differs from the CPU backend's row-interleaved one so that codes are 16-byte
// aligned for cp.async and ldmatrix): per layer and side (K, V) one pool
//   [n_pages][n_kv_heads] blocks, each block = codes plane, then scales plane
// where, per row (token slot) of head_dim D:
//   bf16: codes [kPageSize slots][D] bf16 (little-endian, round to nearest even); no scales
//   int8 K: codes [kPageSize slots][D] int8; scales [kPageSize slots][D / 64] fp16
//   int8 V: codes [D][kPageSize slots] int8 (dim-major: a dim's 64 tokens are contiguous, so
//           the decode kernel's ldmatrix hands each thread 4 consecutive tokens of one dim,
//           the B operand of P V); scales [kPageSize slots][D / 64] fp16
//   int4, rk4v4-e8, rk2v4-e8 (the "compressed" kinds), both sides: codes [kPageSize slots]
//           [code bytes of the side] exactly as the CPU codec's codes plane (int4 pairs, one
//           u32 E8 code per 8 dims, or one u16 E8P code per 8 dims for rk2v4-e8 K); scales
//           [kPageSize slots][D / 64] fp16. rk2v4-e8 K blocks are smaller than its V blocks:
//           block sizes are per side (cache_block_bytes(kind, D, side)).
//   fp8, nvfp4, k8v4 (the "lowbit" kinds), each side as the CPU codec of that side: codes
//           [kPageSize slots][D] e4m3 (fp8) or [kPageSize slots][D / 2] e2m1 pairs (nvfp4),
//           then scales [kPageSize slots][1] fp16 (fp8) or [kPageSize slots][D / 16] e4m3
//           (nvfp4); k8v4 is fp8 K and nvfp4 V. Blocks stay multiples of 16 bytes.
// A row's code bytes followed by its scale bytes are exactly the CPU codec's row
// (kv/codecs/*.cpp): the same bytes, only placed differently; gather_cpu_row() below
// reassembles one.
//
// The encoders reproduce the CPU reference bit for bit: NaN -> 0, clamp to +-2^24, K rotated
// by H_D (V of the compressed kinds by H_64 per group) with the fixed butterfly order of
// kv/hadamard.cpp, fp32 IEEE division, sqrt and rintf, fp16 scales rounded with the same
// integer algorithm as core/dtype.cpp, the E8 searches of kv/e8.cpp and kv/codecs/rk2v4_e8.cpp
// in the same operation order. No FMA can form in that code (only explicitly rounded
// __fadd_rn / __fmul_rn / __fdiv_rn operations where an add meets a multiply).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ninfer::cuda {

constexpr int kCachePageSize = 64;  // == kv/page_table.h kPageSize (checked in cuda_backend.cpp)

// NOTE: the values of the compressed kinds are also the `fmt` the attention kernels switch on.
enum class CacheKind : int { Bf16 = 0, Int8 = 1, Int4 = 2, Rk4 = 3, Rk2 = 4, Fp8 = 5, Nvfp4 = 6, K8v4 = 7 };

constexpr bool cache_compressed(CacheKind k) { return int(k) >= int(CacheKind::Int4); }
// The minifloat kinds (fp8, nvfp4, k8v4; kv_append_lowbit.cu, attention_lowbit.cuh): per side
// either "fp8" (e4m3 codes [D], one fp16 scale per row) or "nvfp4" (e2m1 pairs [D / 2], one
// e4m3 scale per 16 values, D / 16 bytes per row).
constexpr bool cache_lowbit(CacheKind k) { return int(k) >= int(CacheKind::Fp8) && int(k) <= int(CacheKind::K8v4); }
// Side 0 = K, 1 = V: true when that side is nvfp4, false when it is fp8 (lowbit kinds only).
constexpr bool cache_side_nvfp4(CacheKind k, int side) {
  return k == CacheKind::Nvfp4 || (k == CacheKind::K8v4 && side == 1);
}

// The one table from a --kv-dtype name to the CUDA cache kind; false for formats without
// CUDA kernels.
inline bool cache_kind_for(std::string_view name, CacheKind* kind) {
  struct Entry {
    std::string_view name;
    CacheKind kind;
  };
  constexpr Entry kTable[] = {{"bf16", CacheKind::Bf16},
                              {"int8", CacheKind::Int8},
                              {"int4", CacheKind::Int4},
                              {"rk4v4-e8", CacheKind::Rk4},
                              {"rk2v4-e8", CacheKind::Rk2},
                              {"fp8", CacheKind::Fp8},
                              {"nvfp4", CacheKind::Nvfp4},
                              {"k8v4", CacheKind::K8v4}};
  for (const Entry& e : kTable)
    if (e.name == name) {
      if (kind) *kind = e.kind;
      return true;
    }
  return false;
}

// Code bytes of one row of `side` (0 = K, 1 = V).
constexpr size_t cache_code_bytes(CacheKind k, int head_dim, int side) {
  switch (k) {
    case CacheKind::Bf16: return size_t(head_dim) * 2;
    case CacheKind::Int8: return size_t(head_dim);
    case CacheKind::Rk2: return side == 0 ? size_t(head_dim) / 4 : size_t(head_dim) / 2;
    case CacheKind::Fp8:
    case CacheKind::Nvfp4:
    case CacheKind::K8v4: return cache_side_nvfp4(k, side) ? size_t(head_dim) / 2 : size_t(head_dim);
    default: return size_t(head_dim) / 2;
  }
}
// Scale bytes of one row of `side` (the side matters only for k8v4).
constexpr size_t cache_scale_bytes(CacheKind k, int head_dim, int side = 0) {
  if (cache_lowbit(k)) return cache_side_nvfp4(k, side) ? size_t(head_dim) / 16 : 2;
  return k == CacheKind::Bf16 ? 0 : size_t(head_dim / 64) * 2;
}
// Bytes of one (page, kv head) block of one side.
constexpr size_t cache_block_bytes(CacheKind k, int head_dim, int side) {
  return size_t(kCachePageSize) * (cache_code_bytes(k, head_dim, side) + cache_scale_bytes(k, head_dim, side));
}

// Reassembles the CPU codec's row (codes then scales) of `slot` from a device block (host
// memory copy of one (page, kv head) block of side 0 = K or 1 = V). out: [code + scale bytes]
inline void gather_cpu_row(CacheKind k, int side, const uint8_t* block, int head_dim, int slot, uint8_t* out) {
  const size_t cb = cache_code_bytes(k, head_dim, side), sb = cache_scale_bytes(k, head_dim, side);
  if (k == CacheKind::Int8 && side == 1) {
    for (int d = 0; d < head_dim; ++d) out[d] = block[size_t(d) * kCachePageSize + size_t(slot)];
  } else {
    for (size_t i = 0; i < cb; ++i) out[i] = block[size_t(slot) * cb + i];
  }
  for (size_t i = 0; i < sb; ++i) out[cb + i] = block[size_t(kCachePageSize) * cb + size_t(slot) * sb + i];
}

struct KvAppendParams {
  const float* src;          // [n_tokens, ld] fp32: K of token t, head h at src + t*ld + k_col + h*head_dim
  int ld = 0, k_col = 0, v_col = 0;
  const int32_t* tok_page;   // [n_tokens] physical page of each token
  const int32_t* tok_slot;   // [n_tokens] slot (position % page size) of each token
  uint8_t* k_pool;           // [n_pages][n_kv_heads] K blocks of one layer
  uint8_t* v_pool;           // [n_pages][n_kv_heads] V blocks of one layer
  int n_tokens = 0, n_kv_heads = 0, head_dim = 0;
  CacheKind kind = CacheKind::Bf16;
  bool k_rotate = false;     // int8: K rotated by H_D (the format's K rotation); the
                             // compressed kinds always rotate (K by H_D, V by H_64 per group)
};

void launch_kv_append(const KvAppendParams& p, cudaStream_t s);
// The lowbit kinds' encoder (kv_append_lowbit.cu); launch_kv_append forwards to it.
void launch_kv_append_lowbit(const KvAppendParams& p, cudaStream_t s);

}  // namespace ninfer::cuda
