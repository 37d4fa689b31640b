#include "core/minifloat.h"

#include <cmath>

namespace ninfer {

uint8_t f32_to_e4m3(float x) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = x < 0.0f ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= kE4m3Max) return sign | 0x7E;
  if (a == 0.0f) return 0;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the unbiased exponent of a is e - 1
  int exp = e - 1;
  if (exp < -6) exp = -6;  // subnormal range shares the quantum 2^-9
  // q = a / 2^(exp-3), an exact power-of-two scaling; rounded half to even.
  const float q = std::nearbyint(std::ldexp(a, 3 - exp));
  int qi = int(q);  // 0..16
  if (qi == 0) return 0;  // underflow: no signed zero
  // qi in [8, 16] for normals; 16 carries into the next binade.
  int biased = exp + 7;
  if (qi >= 16) {
    qi = 8;
    ++biased;
  }
  uint8_t bits;
  if (qi < 8) {
    bits = uint8_t(qi);  // subnormal (biased exponent 0); only when exp == -6
  } else {
    bits = uint8_t((biased << 3) | (qi - 8));
  }
  if ((bits & 0x7F) > 0x7E) bits = 0x7E;  // rounding up past 448 saturates
  return sign | bits;
}

float e4m3_to_f32(uint8_t b) {
  const int exp = (b >> 3) & 0xF, man = b & 7;
  float v;
  if (exp == 0xF && man == 7) {
    v = std::nanf("");
  } else if (exp == 0) {
    v = std::ldexp(float(man), -9);
  } else {
    v = std::ldexp(float(8 + man), exp - 10);
  }
  return (b & 0x80) ? -v : v;
}

namespace {
constexpr float kE2m1Mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
}

uint8_t f32_to_e2m1(float x) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = x < 0.0f ? 0x8 : 0x0;
  const float a = std::fabs(x);
  uint8_t code = 7;
  for (uint8_t k = 0; k < 7; ++k) {
    const float mid = 0.5f * (kE2m1Mag[k] + kE2m1Mag[k + 1]);  // exact: few-bit values
    if (a < mid || (a == mid && (k & 1) == 0)) {  // tie: keep the even code k
      code = k;
      break;
    }
  }
  return code == 0 ? 0 : uint8_t(sign | code);
}

float e2m1_to_f32(uint8_t nibble) {
  const float v = kE2m1Mag[nibble & 7];
  return (nibble & 8) ? -v : v;
}

}  // namespace ninfer
