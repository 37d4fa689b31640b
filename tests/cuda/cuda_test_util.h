// Helpers for the GPU tests: skip without a GPU, RAII device buffers, seeded random rows.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_cache.h"

#define NINFER_REQUIRE_GPU()                                                             \
  do {                                                                                   \
    if (!::ninfer::cuda_device_available()) GTEST_SKIP() << "no CUDA GPU; skipping";     \
  } while (0)

namespace ninfer::test {

// A typed device buffer; poison() fills every byte with 0xFF (NaN for fp32 and bf16) so an
// unwritten output fails.
template <typename T>
class DevBuf {
 public:
  explicit DevBuf(size_t n = 0) { resize(n); }
  ~DevBuf() {
    if (p_) cudaFree(p_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void resize(size_t n) {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = n;
    if (n) NINFER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  void upload(const std::vector<T>& v) {
    if (v.size() != n_) resize(v.size());
    NINFER_CUDA_CHECK(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    NINFER_CUDA_CHECK(cudaDeviceSynchronize());
    NINFER_CUDA_CHECK(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  void poison() { NINFER_CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(T))); }
  void zero() { NINFER_CUDA_CHECK(cudaMemset(p_, 0, n_ * sizeof(T))); }
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Appends token rows src [n_tokens][2 * n_kv_heads * head_dim] (K columns, then V) to the
// pools at (page[t], slot[t]) with the append kernel of `kind`; k_rotate: the format's K
// rotation is H_D (int8; the compressed kinds always rotate).
inline void append_kv_rows(const float* src, int n_tokens, int n_kv_heads, int head_dim, cuda::CacheKind kind,
                           bool k_rotate, const int32_t* page, const int32_t* slot, uint8_t* k_pool,
                           uint8_t* v_pool) {
  cuda::KvAppendParams p;
  p.src = src;
  p.ld = 2 * n_kv_heads * head_dim;
  p.k_col = 0;
  p.v_col = n_kv_heads * head_dim;
  p.tok_page = page;
  p.tok_slot = slot;
  p.k_pool = k_pool;
  p.v_pool = v_pool;
  p.n_tokens = n_tokens;
  p.n_kv_heads = n_kv_heads;
  p.head_dim = head_dim;
  p.kind = kind;
  p.k_rotate = k_rotate;
  cuda::launch_kv_append(p, nullptr);
}

inline float bf16f(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Max abs error over the vector / max |want| (INFINITY when got holds a NaN): the logit
// comparison of the model-level GPU tests.
inline double max_rel_err(const float* got, const float* want, int n) {
  double e = 0, m = 0;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(got[i])) return INFINITY;
    e = std::max(e, std::fabs(double(got[i]) - want[i]));
    m = std::max(m, std::fabs(double(want[i])));
  }
  return e / m;
}

}  // namespace ninfer::test
