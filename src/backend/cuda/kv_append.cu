// Append kernels: encode new K/V rows into their cache pages (layout and bit-exactness rules
// in kv_cache.h).
#include <cuda_fp16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/kv_cache.h"

namespace ninfer::cuda {
namespace {

// Bit-exact copy of core/dtype.cpp f32_to_f16 (RNE, overflow to inf, subnormals by scaling).
__device__ uint16_t f32_to_f16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00);
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00);
  if (a < 0x38800000u) {
    const float m = rintf(__fmul_rn(__uint_as_float(a), 16777216.0f));
    return uint16_t(sign | uint16_t(m));
  }
  uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
  r -= (112u << 23);
  return uint16_t(sign | uint16_t(r >> 13));
}

__device__ float f16_bits_to_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }

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
constexpr float kClamp = 16777216.0f;  // codecs/common.h kKvInputClamp

// One warp per (token, kv head, side); 4 warps per block.
__global__ void append_int8_kernel(KvAppendParams p) {
  __shared__ float buf[4][kMaxD];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int item = blockIdx.x * 4 + warp;
  if (item >= p.n_tokens * p.n_kv_heads * 2) return;
  const int side = item % 2, h = (item / 2) % p.n_kv_heads, t = item / (2 * p.n_kv_heads);
  const int d = p.head_dim;
  float* x = buf[warp];
  const float* src = p.src + size_t(t) * p.ld + (side == 0 ? p.k_col : p.v_col) + size_t(h) * d;
  for (int i = lane; i < d; i += 32) {
    float v = src[i];
    if (isnan(v)) v = 0.0f;
    x[i] = fminf(fmaxf(v, -kClamp), kClamp);
  }
  __syncwarp();
  if (side == 0 && p.k_rotate) {
    // kv/hadamard.cpp order: stages h = 1, 2, 4, ...; pair (j, j + h) -> (a + b, a - b).
    for (int hs = 1; hs < d; hs <<= 1) {
      for (int q = lane; q < d / 2; q += 32) {
        const int j = (q / hs) * 2 * hs + (q % hs);
        const float a = x[j], b = x[j + hs];
        x[j] = __fadd_rn(a, b);
        x[j + hs] = __fsub_rn(a, b);
      }
      __syncwarp();
    }
    const float sc = __fdiv_rn(1.0f, __fsqrt_rn(float(d)));
    for (int i = lane; i < d; i += 32) x[i] = __fmul_rn(x[i], sc);
    __syncwarp();
  }
  uint8_t* pool = side == 0 ? p.k_pool : p.v_pool;
  uint8_t* blk = pool + (size_t(p.tok_page[t]) * p.n_kv_heads + h) * cache_block_bytes(CacheKind::Int8, d);
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

}  // namespace

void launch_kv_append(const KvAppendParams& p, cudaStream_t s) {
  if (p.n_tokens == 0) return;
  if (p.kind == CacheKind::Bf16) {
    append_bf16_kernel<<<dim3(p.n_tokens, p.n_kv_heads, 2), 128, 0, s>>>(p);
  } else {
    if (p.head_dim > kMaxD || p.head_dim % 64 != 0)
      throw std::runtime_error("int8 KV append: head_dim must be a multiple of 64 up to 256");
    const int items = p.n_tokens * p.n_kv_heads * 2;
    append_int8_kernel<<<(items + 3) / 4, 128, 0, s>>>(p);
  }
  NINFER_CUDA_LAUNCH_CHECK();
}

}  // namespace ninfer::cuda
