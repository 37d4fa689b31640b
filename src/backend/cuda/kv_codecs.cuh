// Device ports of the CPU reference codecs of the compressed KV formats (int4, the 32-bit E8
// lattice code of rk4v4-e8, the 16-bit E8P-W code of rk2v4-e8 K): fp16 scale rounding, the
// E8 nearest-point searches (encoders) and the code expansions (decoders). Bit formats and
// operation order: kv/codecs/int4.cpp, kv/e8.cpp, kv/codecs/rk4v4_e8.cpp,
// kv/codecs/rk2v4_e8.cpp. Every add, subtract and multiply that feeds a code decision is an
// explicitly rounded __fadd_rn / __fsub_rn / __fmul_rn (nvcc would otherwise contract a*b+c
// into an FMA, which the CPU reference never does), in the reference's order.
// Only .cu files include this.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::cuda {

// Bit-exact copy of core/dtype.cpp f32_to_f16 (RNE, overflow to inf, subnormals by scaling).
__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) {
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

__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }

// codecs/common.h fp16_scale: clamp to 65504 (also NaN), round to fp16; returns the rounded
// value and its bits.
__device__ __forceinline__ float fp16_scale(float raw, uint16_t* bits) {
  if (!(raw < 65504.0f)) raw = 65504.0f;
  *bits = f32_to_f16_bits(raw);
  return f16_bits_to_f32(*bits);
}

// ---- E8 (kv/e8.cpp nearest_d8_box, same operation order) ----
__device__ __forceinline__ float d8_box(const float* u, int lo, int hi, int* z) {
  float dist = 0.0f;
  int parity = 0;
  float best_extra = INFINITY;
  int fix_i = 0, fix_to = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float v = u[i];
    float r = rintf(v);
    r = fminf(fmaxf(r, float(lo)), float(hi));
    const int ri = int(r);
    z[i] = ri;
    parity ^= ri & 1;
    const float e = __fsub_rn(v, r);
    dist = __fadd_rn(dist, __fmul_rn(e, e));
    int alt = v >= r ? ri + 1 : ri - 1;
    if (alt > hi) alt = ri - 1;
    if (alt < lo) alt = ri + 1;
    const float ea = __fsub_rn(v, float(alt));
    const float extra = __fsub_rn(__fmul_rn(ea, ea), __fmul_rn(e, e));
    if (extra < best_extra) {
      best_extra = extra;
      fix_i = i;
      fix_to = alt;
    }
  }
  if (parity) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (i == fix_i) z[i] = fix_to;
    dist = __fadd_rn(dist, best_extra);
  }
  return dist;
}

// rk4v4_e8.cpp e8l32::encode_block. u: [8] lattice units.
__device__ __forceinline__ uint32_t e8l32_encode_block(const float* u, float* dist) {
  int z0[8], z1[8];
  float uh[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) uh[i] = __fsub_rn(u[i], 0.5f);
  const float d0 = d8_box(u, -8, 7, z0);
  const float d1 = d8_box(uh, -8, 7, z1);
  const bool c = d1 < d0;
  *dist = c ? d1 : d0;
  uint32_t code = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) code |= uint32_t((c ? z1[i] : z0[i]) + 8) << (4 * i);
  return (code & ~(1u << 28)) | (uint32_t(c) << 28);
}

// rk4v4_e8.cpp e8l32::decode_block as doubled integers 2y in [-16, 15]. y2: [8]
__device__ __forceinline__ void e8l32_decode_y2(uint32_t code, int* y2) {
  const int c = int((code >> 28) & 1);
  int sum = 0;
#pragma unroll
  for (int i = 0; i < 7; ++i) {
    const int z = int((code >> (4 * i)) & 0xF) - 8;
    sum += z;
    y2[i] = 2 * z + c;
  }
  y2[7] = 2 * (int((code >> 28) & 0xE) - 8 + (sum & 1)) + c;
}

// ---- E8P-W (rk2v4_e8.cpp), with device tables built from the CPU reference ----
// abs[idx]: nibble i = 2 |a_i| (1, 3, 5); bit 3 (free: nibbles <= 5) holds the pattern's sign
// parity p(a). index[key]: pattern index of a base-3 key, 255 if none. (kv_append.cu)
// mag[idx] and sgn[b1]: the decode tables of decode_comp_kernel (e8p_tables::magnitudes of
// abs[idx], e8p_tables::xor_masks of a code's high byte), so that no kernel builds them.
struct E8pTables {
  const uint32_t* abs;    // [256]
  const uint8_t* index;   // [6561]
  const uint2* mag;       // [256]
  const uint2* sgn;       // [256]
};

// The tables in device memory (built on first use from the CPU reference; kv_append.cu).
E8pTables e8p_device_tables();

__device__ __constant__ const float kE8pLeaderNorm2[8] = {2, 4, 6, 8, 8, 10, 10, 14};
__device__ __constant__ const int kE8pLeaderParity[8] = {0, 1, 0, 1, 0, 0, 1, 0};
__device__ __constant__ const float kE8pExtraCoef[8][4] = {{0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0},
                                                           {2, 0, 0, 0}, {0, 0, 0, 1}, {1, 1, 0, 0}, {0, 2, 0, 0}};
// Leaders as doubled values, descending, packed one nibble per rank.
__device__ __constant__ const uint32_t kE8pLeaderWord[8] = {0x11111111u, 0x11111113u, 0x11111133u, 0x11111333u,
                                                            0x11111115u, 0x11113333u, 0x11111135u, 0x11111155u};

struct E8pShift {
  float dist;
  int leader;
  int rank[8];
  unsigned neg;  // bit i: w_i < 0
  bool mismatch;
};

__device__ __forceinline__ void e8p_search_shift(const float* u, float shift, E8pShift& r) {
  float w[8], b[8], sorted[8];
  float n2 = 0.0f;
  int negs = 0;
  r.neg = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    w[i] = __fsub_rn(u[i], shift);
    b[i] = fabsf(w[i]);
    if (w[i] < 0.0f) {
      r.neg |= 1u << i;
      ++negs;
    }
    n2 = __fadd_rn(n2, __fmul_rn(w[i], w[i]));
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) r.rank[i] = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = i + 1; j < 8; ++j) {
      if (b[j] > b[i]) ++r.rank[i];
      else ++r.rank[j];
    }
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int k = 0; k < 8; ++k)
      if (r.rank[i] == k) sorted[k] = b[i];
  const float p1 = sorted[0], p2 = __fadd_rn(p1, sorted[1]), p3 = __fadd_rn(p2, sorted[2]),
              p4 = __fadd_rn(p3, sorted[3]);
  const float p8 = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(p4, sorted[4]), sorted[5]), sorted[6]), sorted[7]);
  const float flip = __fmul_rn(2.0f, sorted[7]);
  float best = INFINITY;
  r.leader = 0;
  r.mismatch = false;
#pragma unroll
  for (int l = 0; l < 8; ++l) {
    const float* c = kE8pExtraCoef[l];
    float extra = __fmul_rn(c[0], p1);
    extra = __fadd_rn(extra, __fmul_rn(c[1], p2));
    extra = __fadd_rn(extra, __fmul_rn(c[2], p3));
    extra = __fadd_rn(extra, __fmul_rn(c[3], p4));
    const bool mis = ((negs + kE8pLeaderParity[l]) & 1) != 0;
    const float cost = __fadd_rn(__fsub_rn(kE8pLeaderNorm2[l], __fmul_rn(2.0f, extra)), mis ? flip : 0.0f);
    if (cost < best) {
      best = cost;
      r.leader = l;
      r.mismatch = mis;
    }
  }
  r.dist = __fadd_rn(__fsub_rn(n2, p8), best);
}

// rk2v4_e8.cpp e8p16::encode_block. u: [8] lattice units.
__device__ __forceinline__ uint16_t e8p16_encode_block(const float* u, float* dist, const E8pTables& t) {
  E8pShift rp, rm;
  e8p_search_shift(u, 0.25f, rp);
  e8p_search_shift(u, -0.25f, rm);
  const bool minus = rm.dist < rp.dist;
  const E8pShift& r = minus ? rm : rp;
  *dist = r.dist;
  int key = 0, pow3 = 1;
  unsigned signs = 0;
  const uint32_t lw = kE8pLeaderWord[r.leader];
#pragma unroll
  for (int i = 0; i < 8; ++i, pow3 *= 3) {
    key += (int((lw >> (4 * r.rank[i])) & 0xF) - 1) / 2 * pow3;
    const bool neg = (((r.neg >> i) & 1u) != 0) != (r.mismatch && r.rank[i] == 7);
    if (i < 7) signs |= unsigned(neg) << i;
  }
  return uint16_t(unsigned(t.index[key]) | (signs << 8) | (unsigned(minus) << 15));
}

// rk2v4_e8.cpp decode_block_q4: 4y as odd integers in [-11, 11]. q: [8]
__device__ __forceinline__ void e8p16_decode_q4(uint16_t code, const uint32_t* abs_tab, int* q) {
  const uint32_t a = __ldg(abs_tab + (code & 0xFF));
  const unsigned signs = (code >> 8) & 0x7F;
  const unsigned neg7 = (unsigned(__popc(signs)) + ((a >> 3) & 1u)) & 1u;
  const int t = (code >> 15) ? -1 : 1;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int v = int((a >> (4 * i)) & 0x7);
    const bool neg = i < 7 ? ((signs >> i) & 1u) != 0 : neg7 != 0;
    q[i] = (neg ? -2 * v : 2 * v) + t;
  }
}

// Expands 8 consecutive values (block b = dims 8b..8b+7) of one stored row of a compressed
// kind to fp32 in the stored (rotated) basis, exactly the CPU decoder's values (small integer
// times an fp16 scale, times a power of two: exact in fp32). fmt: CacheKind value (2 int4,
// 3 rk4v4-e8, 4 rk2v4-e8); side 0 = K. codes: the row's codes; s: the group's fp16 scale.
__device__ __forceinline__ void expand_block8(int fmt, int side, const uint8_t* codes, int b, float s,
                                              const uint32_t* e8p_abs, float* out) {
  if (fmt == 2) {  // int4 pairs, low nibble first
    const uint32_t w = *reinterpret_cast<const uint32_t*>(codes + 4 * b);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int n = int((w >> (4 * i)) & 0xF);
      out[i] = float(n - ((n & 8) ? 16 : 0)) * s;
    }
  } else if (fmt == 4 && side == 0) {
    int q[8];
    e8p16_decode_q4(*reinterpret_cast<const uint16_t*>(codes + 2 * b), e8p_abs, q);
    const float sq = s * 0.25f;  // exact: a power of two
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = float(q[i]) * sq;
  } else {
    int y2[8];
    e8l32_decode_y2(*reinterpret_cast<const uint32_t*>(codes + 4 * b), y2);
    const float sh = s * 0.5f;
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = float(y2[i]) * sh;
  }
}


// ---- Row preparation of the append kernels (one warp per row, row in shared memory) ----

constexpr float kAppendClamp = 16777216.0f;  // codecs/common.h kKvInputClamp

// One K or V row as the CPU codecs prepare it: NaN -> 0, clamped to +-2^24. x: [d]. Ends with
// __syncwarp.
__device__ __forceinline__ void load_row_for_codec(const float* src, int d, float* x, int lane) {
  for (int i = lane; i < d; i += 32) {
    float v = src[i];
    if (isnan(v)) v = 0.0f;
    x[i] = fminf(fmaxf(v, -kAppendClamp), kAppendClamp);
  }
  __syncwarp();
}

// kv/hadamard.cpp's transform over consecutive blocks of n values (n = d: H_D over the head;
// n = 64: H_64 per group), in its order: stages h = 1, 2, 4, ... < n, pair (j, j + h) ->
// (a + b, a - b), then times 1 / sqrt(n), every operation explicitly rounded. Ends with
// __syncwarp.
__device__ __forceinline__ void hadamard_blocks_rn(float* x, int d, int n, int lane) {
  for (int hs = 1; hs < n; hs <<= 1) {
    for (int q = lane; q < d / 2; q += 32) {
      const int j = (q / hs) * 2 * hs + (q % hs);
      const float a = x[j], b = x[j + hs];
      x[j] = __fadd_rn(a, b);
      x[j + hs] = __fsub_rn(a, b);
    }
    __syncwarp();
  }
  const float rs = __fdiv_rn(1.0f, __fsqrt_rn(float(n)));
  for (int i = lane; i < d; i += 32) x[i] = __fmul_rn(x[i], rs);
  __syncwarp();
}

}  // namespace ninfer::cuda
