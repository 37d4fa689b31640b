// Element types of stored tensors and the scalar conversions every backend shares.
// bf16/fp16 <-> fp32 conversions round to nearest, ties to even, like PyTorch.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ninfer {

// F8_E4M3: OCP e4m3 (core/minifloat.h), the codes of fp8 checkpoints (model/weight_format.h).
enum class DType : uint8_t { F32, F16, BF16, I8, U8, I32, I64, F8_E4M3 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// Parses a safetensors dtype string ("BF16", "F16", "F32", ...); returns false if unknown.
bool parse_safetensors_dtype(std::string_view s, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
// Round to nearest even; overflow goes to +-inf, like a hardware conversion.
uint16_t f32_to_f16(float f);

// Converts n elements of type t at src to fp32.
void convert_to_f32(DType t, const void* src, float* dst, size_t n);

}  // namespace ninfer
