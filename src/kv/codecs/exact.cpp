// Exact formats: `f32` (the reference cache: 4 bytes per value, no rotation, lossless) and
// `bf16` (2 bytes per value, round to nearest even, no rotation).
// Bit format: K row then V row are stored in separate planes; each is head_dim little-endian
// values in natural order. bf16 rounds to nearest even; NaN stays a (quiet) NaN, Inf stays Inf:
// these formats store what they are given.
#include <cstring>

#include "core/dtype.h"
#include "core/hot_loop.h"
#include "kv/codecs/codecs.h"
#include "kv/format.h"

namespace ninfer::codecs {
namespace {

constexpr KvPlane kF32Planes[] = {{"values", DType::F32, 1, 1, 0}};
constexpr KvPlane kBf16Planes[] = {{"values", DType::BF16, 1, 1, 0}};

size_t f32_bytes(int d) { return size_t(d) * 4; }
void f32_encode(const float* x, int d, uint8_t* out) { std::memcpy(out, x, size_t(d) * 4); }
void f32_decode(const uint8_t* in, int d, float* out) { std::memcpy(out, in, size_t(d) * 4); }

size_t bf16_bytes(int d) { return size_t(d) * 2; }
NINFER_HOT_LOOP void bf16_encode(const float* x, int d, uint8_t* out) {
  for (int i = 0; i < d; ++i) {
    uint16_t h = f32_to_bf16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}
NINFER_HOT_LOOP void bf16_decode(const uint8_t* in, int d, float* out) {
  for (int i = 0; i < d; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = bf16_to_f32(h);
  }
}

}  // namespace

const KvFormat kF32Format{
    "f32", "fp32 K and V (exact reference cache)", 1,
    {KvRotation::None, f32_bytes, f32_encode, f32_decode, kF32Planes},
    {KvRotation::None, f32_bytes, f32_encode, f32_decode, kF32Planes}};

const KvFormat kBf16Format{
    "bf16", "bf16 K and V", 1,
    {KvRotation::None, bf16_bytes, bf16_encode, bf16_decode, kBf16Planes},
    {KvRotation::None, bf16_bytes, bf16_encode, bf16_decode, kBf16Planes}};

}  // namespace ninfer::codecs
