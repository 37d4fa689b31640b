// Device ports of the minifloat conversions of the fp8 / nvfp4 / k8v4 KV formats
// (core/minifloat.cpp, kv/codecs/fp8.cpp, kv/codecs/nvfp4.cpp), bit for bit, and the exact
// expansions of their codes used by the attention kernels. Only .cu files include this.
//
// Exactness of the expansions (attention_lowbit.cuh):
//  - an e4m3 value has at most 4 significant bits and lies in [2^-9, 448]: exact in bf16;
//  - an e2m1 value (2 significant bits, [0.5, 6]) times an e4m3 scale (4 bits, [2^-9, 448])
//    has at most 6 significant bits and lies in [2^-10, 2688]: exact in fp32 and in bf16.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_utils.cuh"

namespace ninfer::cuda {

// kv/minifloat.cpp f32_to_e4m3: round half to even, saturate to +-448, NaN -> 0, -0 -> +0.
__device__ __forceinline__ uint8_t f32_to_e4m3_dev(float x) {
  if (isnan(x)) return 0;
  const uint8_t sign = x < 0.0f ? 0x80 : 0x00;
  const float a = fabsf(x);
  if (a >= 448.0f) return uint8_t(sign | 0x7E);
  if (a == 0.0f) return 0;
  // frexp's exponent minus one = floor(log2 a) for normal a; fp32 subnormals (biased 0) are
  // far below -6 and clamp there, as in the CPU code.
  int exp = int((__float_as_uint(a) >> 23) & 0xFF) - 127;
  if (exp < -6) exp = -6;
  // a * 2^(3 - exp), 3 - exp in [-5, 9]: an exact power-of-two scaling.
  const float q = rintf(__fmul_rn(a, __uint_as_float(uint32_t(127 + 3 - exp) << 23)));
  int qi = int(q);
  if (qi == 0) return 0;
  int biased = exp + 7;
  if (qi >= 16) {
    qi = 8;
    ++biased;
  }
  uint8_t bits = qi < 8 ? uint8_t(qi) : uint8_t((biased << 3) | (qi - 8));
  if ((bits & 0x7F) > 0x7E) bits = 0x7E;
  return uint8_t(sign | bits);
}

// e4m3 bits -> fp32, exact (0x7F / 0xFF, NaN in e4m3, decode to +-480: never stored). The
// 7 magnitude bits placed at fp32 bits 20..26 give the value times 2^-120 for normal and
// subnormal codes alike; the multiply restores it exactly.
__device__ __forceinline__ float e4m3_to_f32_dev(uint32_t b) {
  return __uint_as_float(((b & 0x7Fu) << 20) | ((b & 0x80u) << 24)) * 0x1p120f;
}

// kv/minifloat.cpp f32_to_e2m1: nearest of {0, .5, 1, 1.5, 2, 3, 4, 6}, ties to the even code,
// saturating; returns the nibble (sign bit 3), 0 for NaN and for a result of magnitude 0.
__device__ __forceinline__ uint8_t f32_to_e2m1_dev(float x) {
  if (isnan(x)) return 0;
  const uint8_t sign = x < 0.0f ? 0x8 : 0x0;
  const float a = fabsf(x);
  // Midpoints between consecutive magnitudes; a tie keeps the even code k.
  uint8_t code;
  if (a < 0.25f || a == 0.25f) code = 0;
  else if (a < 0.75f) code = 1;
  else if (a < 1.25f || a == 1.25f) code = 2;
  else if (a < 1.75f) code = 3;
  else if (a < 2.5f || a == 2.5f) code = 4;
  else if (a < 3.5f) code = 5;
  else if (a < 5.0f || a == 5.0f) code = 6;
  else code = 7;
  return code == 0 ? 0 : uint8_t(sign | code);
}

// e2m1 nibble -> fp32, exact: magnitude bits at fp32 bits 22..24 give the value times 2^-126
// (normal and subnormal codes alike).
__device__ __forceinline__ float e2m1_to_f32_dev(uint32_t n) {
  return __uint_as_float(((n & 7u) << 22) | ((n & 8u) << 28)) * 0x1p126f;
}

// The attention kernels' expansion of 8 stored values (the prefill kernels' bf16 tiles).
// e4m3 byte i of w (i = 0..3) -> fp32.
__device__ __forceinline__ float e4m3_byte(uint32_t w, int i) { return e4m3_to_f32_dev((w >> (8 * i)) & 0xFFu); }

// Expands 8 values (chunk c = values 8c..8c+7) of one raw lowbit row to 4 bf16x2 words.
// nv: nvfp4 row (codes [D/2], scales [D/16] at `sc`), else fp8 (codes [D]; mul: the fp8 row
// scale, or 1 to keep it apart).
__device__ __forceinline__ uint4 expand_lowbit8(bool nv, const uint8_t* codes, const uint8_t* sc, int c, float mul) {
  uint4 w;
  if (nv) {
    const uint32_t q = *reinterpret_cast<const uint32_t*>(codes + 4 * c);
    const float s = e4m3_to_f32_dev(sc[c / 2]);
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = e2m1_to_f32_dev(q >> (4 * i)) * s;
    w.x = cvt_bf16x2(v[0], v[1]);
    w.y = cvt_bf16x2(v[2], v[3]);
    w.z = cvt_bf16x2(v[4], v[5]);
    w.w = cvt_bf16x2(v[6], v[7]);
  } else {
    const uint2 q = *reinterpret_cast<const uint2*>(codes + 8 * c);
    w.x = cvt_bf16x2(e4m3_byte(q.x, 0) * mul, e4m3_byte(q.x, 1) * mul);
    w.y = cvt_bf16x2(e4m3_byte(q.x, 2) * mul, e4m3_byte(q.x, 3) * mul);
    w.z = cvt_bf16x2(e4m3_byte(q.y, 0) * mul, e4m3_byte(q.y, 1) * mul);
    w.w = cvt_bf16x2(e4m3_byte(q.y, 2) * mul, e4m3_byte(q.y, 3) * mul);
  }
  return w;
}

}  // namespace ninfer::cuda
