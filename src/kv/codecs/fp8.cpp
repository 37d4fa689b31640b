// `fp8`: OCP e4m3 values (src/kv/minifloat.h) with one fp16 scale per row. K is rotated by
// H_D, V is not.
//
// Row layout (per side), D = head_dim:
//   bytes [0, D)       codes: e4m3, value i at byte i
//   bytes [D, D + 2)   scale: fp16 little-endian
// Encode (prepared row x, see common.h for NaN/Inf and rotation):
//   s = fp16(amax(x) / 448)               the rounded scale is used below
//   c_i = e4m3(x_i / s): round half to even, saturating at +-448, -0 -> +0; s == 0 -> c_i = 0
// Decode: x_i = e4m3_to_f32(c_i) * s.
#include "kv/codecs/codecs.h"
#include "kv/codecs/common.h"
#include "kv/codecs/sides.h"
#include "core/minifloat.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define NINFER_FP8_AVX2 1  // the decoder's AVX2 loop, chosen at run time
#endif

namespace ninfer::codecs {

constexpr KvPlane kFp8Planes[2] = {{"e4m3 codes", DType::U8, 1, 1, 0},
                                   {"row scale", DType::F16, 0, 0, 1}};
size_t fp8_bytes(int d) { return planes_bytes(kFp8Planes, d); }

template <KvRotation R>
NINFER_HOT_LOOP void fp8_encode(const float* raw, int d, uint8_t* out) {
  float x[kMaxHeadDim];
  prepare_row(raw, d, R, x);
  uint16_t sbits;
  const float s = fp16_scale(amax(x, d) / kE4m3Max, &sbits);
  for (int i = 0; i < d; ++i) out[i] = s > 0.0f ? f32_to_e4m3(x[i] / s) : 0;
  store_u16(out + d, sbits);
}
template void fp8_encode<KvRotation::None>(const float*, int, uint8_t*);
template void fp8_encode<KvRotation::HadamardHead>(const float*, int, uint8_t*);

#if NINFER_FP8_AVX2
// NOTE: GCC vectorizes the portable loop below in byte lanes and shuffles them apart (0.3 ns
// per value); this is e4m3_value on 8 codes in 32-bit lanes (0.1 ns). Returns the values done.
static __attribute__((target("avx2"))) int fp8_decode_avx2(const uint8_t* in, int d, float s, float* out) {
  int i = 0;
  const __m256i k7f = _mm256_set1_epi32(0x7F);
  for (; i + 8 <= d; i += 8) {
    const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i)));
    const __m256i m = _mm256_and_si256(c, k7f);
    const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(m, 20), _mm256_set1_epi32(120 << 23));
    const __m256i sub = _mm256_castps_si256(_mm256_mul_ps(
        _mm256_cvtepi32_ps(_mm256_and_si256(m, _mm256_set1_epi32(7))), _mm256_set1_ps(0x1p-9f)));
    const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(8), m);
    const __m256i is_nan = _mm256_cmpeq_epi32(m, k7f);
    __m256i u = _mm256_blendv_epi8(normal, sub, is_sub);
    u = _mm256_blendv_epi8(u, _mm256_set1_epi32(0x7fc00000), is_nan);
    u = _mm256_or_si256(u, _mm256_slli_epi32(_mm256_andnot_si256(k7f, c), 24));  // the sign
    const __m256 v = _mm256_castsi256_ps(u);
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(_mm256_mul_ps(v, _mm256_set1_ps(s)), v,
                                               _mm256_castsi256_ps(is_nan)));
  }
  return i;
}
#endif

// NOTE: a NaN code decodes to its own NaN even when s is NaN too, as the scalar
// e4m3_to_f32(c) * s did (a vector multiply may return either operand's NaN).
void fp8_decode(const uint8_t* in, int d, float* out) {
  const float s = f16_to_f32(load_u16(in + d));
  int i = 0;
#if NINFER_FP8_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) i = fp8_decode_avx2(in, d, s, out);
#endif
  for (; i < d; ++i) {
    const float v = e4m3_value(in[i]);
    out[i] = select_f32((in[i] & 0x7F) == 0x7F, v, v * s);
  }
}

constinit const KvFormat kFp8Format{
    "fp8", "e4m3 codes, fp16 scale per row (amax/448); K rotated H_D", 64,
    {KvRotation::HadamardHead, fp8_bytes, fp8_encode<KvRotation::HadamardHead>, fp8_decode, kFp8Planes},
    {KvRotation::None, fp8_bytes, fp8_encode<KvRotation::None>, fp8_decode, kFp8Planes}};

}  // namespace ninfer::codecs
