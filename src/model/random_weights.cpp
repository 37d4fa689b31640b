#include "model/random_weights.h"

#include <omp.h>

#include <cmath>

#include "core/dtype.h"
#include "model/model.h"

namespace ninfer {

uint16_t random_bf16(uint64_t tensor_seed, uint64_t i, float scale) {
  uint64_t z = tensor_seed * 0x9E3779B97F4A7C15ull + i + 1;  // splitmix64 of a counter
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float u = float(int32_t(uint32_t(z >> 40)) - (1 << 23)) * (1.0f / float(1 << 23));
  return f32_to_bf16(u * scale);
}

void fill_random_tensor(uint16_t* dst, size_t n, uint64_t seed, size_t index, bool norm, uint16_t norm_value) {
  const float scale = 0.02f * std::sqrt(3.0f);  // uniform [-a, a) has std a / sqrt(3)
  const uint64_t ts_seed = seed * 1000003ull + index;
  const int64_t count = int64_t(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) dst[i] = norm ? norm_value : random_bf16(ts_seed, uint64_t(i), scale);
}

bool is_norm_tensor(const std::string& name) { return name.find("norm") != std::string::npos; }

uint16_t norm_fill_value(const ModelConfig& c, const std::string& name) {
  if (name.find("linear_attn.norm.") != std::string::npos) return 0x3F80;
  return c.family->norm_offset_one ? uint16_t(0) : uint16_t(0x3F80);
}

std::unique_ptr<TensorStore> random_tensor_store(const ModelConfig& c, uint64_t seed) {
  auto store = std::make_unique<TensorStore>();
  size_t index = 0;
  for (auto& [name, shape] : list_weights(c)) {
    TensorInfo t;
    t.name = name;
    t.dtype = DType::BF16;
    t.shape = shape;
    t.file = "(random weights, seed " + std::to_string(seed) + ")";
    const size_t n = size_t(t.numel());
    std::unique_ptr<uint8_t[]> data(new uint8_t[n * 2]);
    fill_random_tensor(reinterpret_cast<uint16_t*>(data.get()), n, seed, index++, is_norm_tensor(name),
                       norm_fill_value(c, name));
    store->add_owned(std::move(t), std::move(data));
  }
  return store;
}

}  // namespace ninfer
