// E8 nearest point (Conway-Sloane) against brute force over the neighbouring box, on random
// points and on points at or near Voronoi-cell boundaries; and the truncated-box D8 search.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kv/e8.h"

namespace ninfer {
namespace {

// Brute force: the nearest point of each coset lies in {floor(u_i), floor(u_i) + 1}^8 (moving a
// coordinate by 2 keeps the parity and does not increase the distance). Returns the squared
// distance (double) and the point.
double brute_e8(const double* x, double* best) {
  double bd = INFINITY;
  for (int coset = 0; coset < 2; ++coset) {
    const double sh = 0.5 * coset;
    double fl[8];
    for (int i = 0; i < 8; ++i) fl[i] = std::floor(x[i] - sh);
    for (int m = 0; m < 256; ++m) {
      long sum = 0;
      double z[8], d = 0;
      for (int i = 0; i < 8; ++i) {
        z[i] = fl[i] + ((m >> i) & 1);
        sum += long(z[i]);
        d += (x[i] - z[i] - sh) * (x[i] - z[i] - sh);
      }
      if (sum & 1) continue;
      if (d < bd) {
        bd = d;
        for (int i = 0; i < 8; ++i) best[i] = z[i] + sh;
      }
    }
  }
  return bd;
}

double dist2(const float* x, const float* y) {
  double d = 0;
  for (int i = 0; i < 8; ++i) d += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  return d;
}

bool in_e8(const float* y) {
  int y2[8];
  for (int i = 0; i < 8; ++i) {
    if (y[i] * 2 != std::nearbyint(y[i] * 2)) return false;
    y2[i] = int(y[i] * 2);
  }
  return e8::is_e8_doubled(y2);
}

TEST(E8Lattice, RandomPointsMatchBruteForce) {
  const uint64_t seed = 2024;
  std::printf("seed %llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> ud(-6.0f, 6.0f);
  int disagreements = 0;
  for (int t = 0; t < 100000; ++t) {
    float x[8], y[8];
    double xd[8], yb[8];
    for (int i = 0; i < 8; ++i) xd[i] = x[i] = ud(rng);
    e8::nearest_e8(x, y);
    ASSERT_TRUE(in_e8(y));
    const double db = brute_e8(xd, yb);
    // Continuous random points have no ties: the points must agree exactly.
    bool same = true;
    for (int i = 0; i < 8; ++i) same = same && double(y[i]) == yb[i];
    if (!same && std::fabs(dist2(x, y) - db) > 1e-9) ++disagreements;
  }
  EXPECT_EQ(disagreements, 0);
}

TEST(E8Lattice, NearBoundaryPointsMatchBruteForce) {
  // Dyadic points (multiples of 1/1024) placed on and around cell boundaries: coordinates near
  // k/2 and k/4 (coset boundaries), midpoints between neighbouring lattice points, deep holes.
  // All distances are exact in float and double, so the distances must be equal; ties may pick
  // either point.
  const uint64_t seed = 77;
  std::printf("seed %llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> k(-16, 16), jitter(-3, 3), kind(0, 3);
  int disagreements = 0, ties = 0;
  for (int t = 0; t < 200000; ++t) {
    float x[8], y[8];
    double xd[8], yb[8];
    const int kd = kind(rng);
    for (int i = 0; i < 8; ++i) {
      double v;
      switch (kd) {
        case 0: v = k(rng) * 0.5; break;              // on half-integers
        case 1: v = k(rng) * 0.25; break;             // on quarter points (coset midpoints)
        case 2: v = k(rng) * 0.5 + 0.25 * (i < 4); break;
        default: v = (i == 0 ? 1.0 : 0.0) + k(rng) * 0.5 * (i % 3 == 0); break;  // deep holes
      }
      v += jitter(rng) / 1024.0;
      xd[i] = v;
      x[i] = float(v);
    }
    e8::nearest_e8(x, y);
    ASSERT_TRUE(in_e8(y));
    const double db = brute_e8(xd, yb);
    const double d = dist2(x, y);
    if (d != db) ++disagreements;
    bool same = true;
    for (int i = 0; i < 8; ++i) same = same && double(y[i]) == yb[i];
    ties += !same;
  }
  EXPECT_EQ(disagreements, 0);
  std::printf("equal-distance ties resolved differently from brute force: %d (allowed)\n", ties);
}

TEST(E8Lattice, BoxSearchIsExactForTheTruncatedD8) {
  const uint64_t seed = 5;
  std::printf("seed %llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> ud(-10.0f, 10.0f);
  for (int t = 0; t < 20000; ++t) {
    float u[8];
    for (float& v : u) v = ud(rng);
    int z[8];
    const float d = e8::nearest_d8_box(u, -8, 7, z);
    int sum = 0;
    for (int i = 0; i < 8; ++i) {
      ASSERT_GE(z[i], -8);
      ASSERT_LE(z[i], 7);
      sum += z[i];
    }
    ASSERT_EQ(sum & 1, 0);
    // Brute force: per coordinate the two in-range integers nearest to u_i (moving a
    // coordinate by 2 toward u keeps parity and range and does not increase the distance).
    int cand[8][2];
    for (int i = 0; i < 8; ++i) {
      const int lo = std::clamp(int(std::floor(u[i])), -8, 7), hi = std::clamp(int(std::floor(u[i])) + 1, -8, 7);
      cand[i][0] = lo;
      cand[i][1] = lo != hi ? hi : (lo == 7 ? 6 : -7);
    }
    double best = INFINITY;
    for (int m = 0; m < 256; ++m) {
      int s = 0;
      double dd = 0;
      for (int i = 0; i < 8; ++i) {
        const int c = cand[i][(m >> i) & 1];
        s += c;
        dd += (double(u[i]) - c) * (double(u[i]) - c);
      }
      if (!(s & 1)) best = std::min(best, dd);
    }
    double dz = 0;
    for (int i = 0; i < 8; ++i) dz += (double(u[i]) - z[i]) * (double(u[i]) - z[i]);
    ASSERT_NEAR(dz, best, 1e-9) << "t=" << t;
    ASSERT_NEAR(d, dz, 1e-4 * (1 + dz));
  }
}

}  // namespace
}  // namespace ninfer
