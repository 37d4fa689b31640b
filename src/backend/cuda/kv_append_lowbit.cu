// Append kernel of the minifloat KV kinds (fp8, nvfp4, k8v4): encodes new K/V rows into their
// pages, byte-identical to the CPU codecs kv/codecs/fp8.cpp and nvfp4.cpp (layout in
// kv_cache.h; conversions in kv_lowbit.cuh).
//
// One warp per (token, kv head, side), 4 warps per block. The prepared row (NaN -> 0, clamp to
// +-2^24, rotation: K by H_D; V of fp8 not rotated, V of nvfp4 / k8v4 by H_64 per group, the
// butterfly order of kv/hadamard.cpp) lives in shared memory. Then
//  - fp8 side: s = fp16(amax(row) / 448) (IEEE division), c_i = e4m3(x_i / s), s == 0 -> 0;
//  - nvfp4 side: per 16-block, s = e4m3(amax(block) / 6), c_i = e2m1(x_i / e4m3_value(s)).
// amax is exact in any order; every other operation is a single correctly rounded one, so the
// bytes match the CPU's.
#include <cuda_fp16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/kv_cache.h"
#include "backend/cuda/kv_codecs.cuh"
#include "backend/cuda/kv_lowbit.cuh"

namespace ninfer::cuda {
namespace {

constexpr int kMaxD = 256;

__global__ void append_lowbit_kernel(KvAppendParams p) {
  __shared__ float buf[4][kMaxD];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int item = blockIdx.x * 4 + warp;
  if (item >= p.n_tokens * p.n_kv_heads * 2) return;
  const int side = item % 2, h = (item / 2) % p.n_kv_heads, t = item / (2 * p.n_kv_heads);
  const int d = p.head_dim;
  const bool nv = cache_side_nvfp4(p.kind, side);
  float* x = buf[warp];
  const float* src = p.src + size_t(t) * p.ld + (side == 0 ? p.k_col : p.v_col) + size_t(h) * d;
  load_row_for_codec(src, d, x, lane);
  // K: H_D over the head; nvfp4 V: H_64 per group; fp8 V: none.
  const int n = side == 0 ? d : (nv ? 64 : 1);
  if (n > 1) hadamard_blocks_rn(x, d, n, lane);
  const size_t cb = cache_code_bytes(p.kind, d, side), sb = cache_scale_bytes(p.kind, d, side);
  uint8_t* pool = side == 0 ? p.k_pool : p.v_pool;
  uint8_t* blk = pool + (size_t(p.tok_page[t]) * p.n_kv_heads + h) * cache_block_bytes(p.kind, d, side);
  const int slot = p.tok_slot[t];
  uint8_t* codes = blk + size_t(slot) * cb;
  uint8_t* scales = blk + size_t(kCachePageSize) * cb + size_t(slot) * sb;
  if (!nv) {
    float m = 0.0f;
    for (int i = lane; i < d; i += 32) m = fmaxf(m, fabsf(x[i]));
    m = warp_max(m);
    uint16_t bits;
    const float s = fp16_scale(__fdiv_rn(m, 448.0f), &bits);
    if (lane == 0) {
      scales[0] = uint8_t(bits);
      scales[1] = uint8_t(bits >> 8);
    }
    for (int i = lane; i < d; i += 32) codes[i] = s > 0.0f ? f32_to_e4m3_dev(__fdiv_rn(x[i], s)) : 0;
    return;
  }
  // nvfp4: lane takes the pair (2 lane, 2 lane + 1) of each 64-group; 8 lanes form a 16-block.
  for (int g = 0; g < d; g += 64) {
    const float x0 = x[g + 2 * lane], x1 = x[g + 2 * lane + 1];
    float m = fmaxf(fabsf(x0), fabsf(x1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
    const uint8_t sbits = f32_to_e4m3_dev(__fdiv_rn(m, 6.0f));
    const float s = e4m3_to_f32_dev(sbits);
    if (lane % 8 == 0) scales[(g + 2 * lane) / 16] = sbits;
    const uint8_t lo = s > 0.0f ? f32_to_e2m1_dev(__fdiv_rn(x0, s)) : 0;
    const uint8_t hi = s > 0.0f ? f32_to_e2m1_dev(__fdiv_rn(x1, s)) : 0;
    codes[g / 2 + lane] = uint8_t(lo | (hi << 4));
  }
}

}  // namespace

void launch_kv_append_lowbit(const KvAppendParams& p, cudaStream_t s) {
  const int items = p.n_tokens * p.n_kv_heads * 2;
  append_lowbit_kernel<<<(items + 3) / 4, 128, 0, s>>>(p);
  NINFER_CUDA_LAUNCH_CHECK();
}

}  // namespace ninfer::cuda
