// Exact conversions for the small float types of the KV formats (OCP 8-bit/4-bit floats):
// - e4m3 (OCP "E4M3FN"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; 0x7F /
//   0xFF are NaN; largest finite 448 (0x7E); smallest subnormal 2^-9.
// - e2m1 (FP4, OCP MX): 1 sign, 2 exponent (bias 1), 1 mantissa bit; magnitudes
//   {0, 0.5, 1, 1.5, 2, 3, 4, 6} for codes 0..7; the sign is bit 3.
// Encoding rounds to nearest, ties to even (the candidate with mantissa bit 0), saturates
// finite values beyond the largest magnitude to it, maps NaN to +0 and -0 to +0.
#pragma once
#include <cstdint>

namespace ninfer {

uint8_t f32_to_e4m3(float x);
float e4m3_to_f32(uint8_t b);
uint8_t f32_to_e2m1(float x);  // returns a nibble (0..15)
float e2m1_to_f32(uint8_t nibble);

inline constexpr float kE4m3Max = 448.0f;
inline constexpr float kE2m1Max = 6.0f;

}  // namespace ninfer
