#include "core/dtype.h"

#include <cmath>

#include "core/error.h"
#include "core/minifloat.h"

namespace ninfer {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I8: return 1;
    case DType::U8: return 1;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::F8_E4M3: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::F8_E4M3: return "F8_E4M3";
  }
  return "?";
}

bool parse_safetensors_dtype(std::string_view s, DType* out) {
  struct Row { std::string_view name; DType t; };
  static constexpr Row rows[] = {{"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16},
                                 {"I8", DType::I8},   {"U8", DType::U8},   {"I32", DType::I32},
                                 {"I64", DType::I64}, {"F8_E4M3", DType::F8_E4M3}};
  for (const Row& r : rows) {
    if (r.name == s) {
      *out = r.t;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: value = mant * 2^-24
      float f = std::ldexp(float(mant), -24);
      std::memcpy(&u, &f, 4);
      u |= sign;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00);  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {
    // Subnormal or zero in fp16: value / 2^-24 rounded to nearest even integer.
    float v;
    std::memcpy(&v, &a, 4);
    float m = std::nearbyint(v * 16777216.0f);  // exact scaling by 2^24; default mode is RNE
    return uint16_t(sign | uint16_t(m));
  }
  // Normal: rebias exponent and round mantissa (23 -> 10 bits) to nearest even.
  uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
  r -= (112u << 23);
  return uint16_t(sign | uint16_t(r >> 13));
}

void convert_to_f32(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    // NOTE: 16-bit values are read with memcpy: a safetensors file need not align a tensor's
    // data (the header's offsets are byte offsets), and a misaligned uint16_t load is undefined
    // (UBSan caught it on a test checkpoint).
    case DType::BF16: {
      const auto* s = static_cast<const unsigned char*>(src);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    }
    case DType::F16: {
      const auto* s = static_cast<const unsigned char*>(src);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    }
    case DType::F8_E4M3: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = e4m3_to_f32(s[i]);
      return;
    }
    default:
      fail("cannot convert tensor of dtype {} to F32", dtype_name(t));
  }
}

}  // namespace ninfer
