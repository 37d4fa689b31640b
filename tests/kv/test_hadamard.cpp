// Hadamard transform: matches the Sylvester definition, orthogonal, self-inverse, and the
// per-group form of rotate_kv.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "kv/format.h"
#include "kv/hadamard.h"

namespace ninfer {
namespace {

TEST(Hadamard, MatchesSylvesterEntries) {
  for (int n : {1, 2, 8, 64, 256}) {
    for (int j = 0; j < n; ++j) {
      std::vector<float> e(n, 0.0f);
      e[j] = 1.0f;
      hadamard_inplace(e.data(), n);
      for (int i = 0; i < n; ++i) {
        const float want = (std::popcount(unsigned(i & j)) & 1 ? -1.0f : 1.0f) / std::sqrt(float(n));
        ASSERT_FLOAT_EQ(e[i], want) << "n=" << n << " i=" << i << " j=" << j;
      }
    }
  }
}

TEST(Hadamard, OrthogonalAndSelfInverse) {
  const uint64_t seed = 11;
  std::printf("seed %llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  for (int n : {64, 128, 256, 512}) {
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<float> x(n), y;
      for (float& v : x) v = nd(rng);
      y = x;
      hadamard_inplace(y.data(), n);
      double nx = 0, ny = 0;
      for (int i = 0; i < n; ++i) {
        nx += double(x[i]) * x[i];
        ny += double(y[i]) * y[i];
      }
      EXPECT_NEAR(ny / nx, 1.0, 1e-5);
      hadamard_inplace(y.data(), n);
      for (int i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i], 1e-5f * (1 + std::fabs(x[i])));
    }
  }
}

TEST(Hadamard, RotateKvPerGroupAndWhole) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = float(i % 7) - 3.0f;
  auto a = x, b = x;
  rotate_kv(KvRotation::Hadamard64, a.data(), 256);
  for (int g = 0; g < 256; g += 64) hadamard_inplace(b.data() + g, 64);
  EXPECT_EQ(a, b);
  auto c = x;
  rotate_kv(KvRotation::HadamardHead, c.data(), 256);
  rotate_kv(KvRotation::HadamardHead, c.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(c[i], x[i], 1e-5f);
  auto n = x;
  rotate_kv(KvRotation::None, n.data(), 256);
  EXPECT_EQ(n, x);
}

}  // namespace
}  // namespace ninfer
