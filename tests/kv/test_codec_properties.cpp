// Properties every KV codec must have: zero, constant, single-outlier and +-amax rows; the
// NaN/Inf rule (NaN -> 0, +-Inf -> +-2^24, then saturation: outputs stay finite); error
// bounds on Gaussian rows; determinism; the stored basis is the rotated one.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kv/format.h"

namespace ninfer {
namespace {

struct RoundTrip {
  std::vector<uint8_t> code;
  std::vector<float> stored;  // decode() output: rotated basis
  std::vector<float> back;    // rotated back to the input basis
};

RoundTrip round_trip(const KvSideCodec& s, const std::vector<float>& x) {
  const int d = int(x.size());
  RoundTrip r;
  r.code.assign(s.bytes(d), 0xCD);  // poison
  r.stored.assign(d, NAN);
  s.encode(x.data(), d, r.code.data());
  s.decode(r.code.data(), d, r.stored.data());
  r.back = r.stored;
  rotate_kv(s.rotation, r.back.data(), d);
  return r;
}

double nmse(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    s += double(x[i]) * x[i];
  }
  return s > 0 ? e / s : e;
}

// Per-side Gaussian nmse bounds: a loose ceiling over the measured value (docs/BENCHMARKS.md),
// so a broken codec fails but sampling noise does not.
double gaussian_bound(std::string_view fmt, bool k) {
  if (fmt == "f32") return 0;
  if (fmt == "bf16") return 2e-5;
  if (fmt == "int8") return 2e-4;
  if (fmt == "fp8") return 2e-3;
  if (fmt == "nvfp4") return 0.02;
  if (fmt == "k8v4") return k ? 2e-3 : 0.02;
  if (fmt == "int4") return 0.0135;
  if (fmt == "rk4v4-e8") return 0.0095;
  if (fmt == "rk2v4-e8") return k ? 0.095 : 0.0095;
  if (fmt == "e8-root-ref") return k ? 0.40 : 0.0095;
  if (fmt == "iq4nl-ref") return 0.0070;
  return 0;
}

class EveryFormat : public ::testing::TestWithParam<const KvFormat*> {};

TEST_P(EveryFormat, GaussianRowsWithinBoundAndDeterministic) {
  const KvFormat& f = *GetParam();
  const uint64_t seed = 99;
  std::printf("seed %llu\n", (unsigned long long)seed);
  for (int d : {64, 128, 256}) {
    std::mt19937_64 rng(seed + d);
    std::normal_distribution<float> nd;
    for (int side = 0; side < 2; ++side) {
      const KvSideCodec& s = side ? f.v : f.k;
      double e = 0, sig = 0;
      for (int r = 0; r < 200; ++r) {
        std::vector<float> x(d);
        for (float& v : x) v = nd(rng);
        const RoundTrip a = round_trip(s, x), b = round_trip(s, x);
        ASSERT_EQ(a.code, b.code);
        for (int i = 0; i < d; ++i) {
          e += (double(x[i]) - a.back[i]) * (double(x[i]) - a.back[i]);
          sig += double(x[i]) * x[i];
        }
      }
      EXPECT_LE(e / sig, gaussian_bound(f.name, side == 0) + 1e-12)
          << f.name << (side ? " V" : " K") << " D=" << d;
    }
  }
}

TEST_P(EveryFormat, ZeroRowsDecodeToZero) {
  const KvFormat& f = *GetParam();
  for (const KvSideCodec* s : {&f.k, &f.v}) {
    const RoundTrip r = round_trip(*s, std::vector<float>(128, 0.0f));
    for (float v : r.stored) EXPECT_EQ(v, 0.0f) << f.name;
  }
}

TEST_P(EveryFormat, ConstantOutlierAndAmaxRows) {
  const KvFormat& f = *GetParam();
  const int d = 128;
  std::vector<std::vector<float>> rows;
  rows.push_back(std::vector<float>(d, 0.75f));
  rows.push_back(std::vector<float>(d, -3.0f));
  {
    std::vector<float> x(d, 0.01f);
    x[37] = 500.0f;  // one huge outlier
    rows.push_back(x);
  }
  {
    std::vector<float> x(d);  // alternating +-amax: every value at the boundary
    for (int i = 0; i < d; ++i) x[i] = (i % 3 ? 1.0f : -1.0f) * 2.5f;
    rows.push_back(x);
  }
  for (const auto& x : rows) {
    for (int side = 0; side < 2; ++side) {
      const RoundTrip r = round_trip(side ? f.v : f.k, x);
      double e = nmse(x, r.back);
      // The e8-root-ref and rk2 K codes are coarse; everything else must be close.
      const bool coarse = side == 0 && (f.name == "rk2v4-e8" || f.name == "e8-root-ref");
      const bool fp4 = f.name == "nvfp4" || (f.name == "k8v4" && side == 1);
      // NOTE: after H these rows are a few spikes; int4's amax/7 grid gives ~0.022 on them.
      // The rk2 K codebook has no zero codeword (every coordinate is an odd multiple of 1/4),
      // so a lone spike in an otherwise zero group costs >= 0.5 s^2 per zero block: 0.52.
      const double bound = coarse ? 0.6 : fp4 ? 0.05 : 0.03;
      EXPECT_LE(e, bound) << f.name << (side ? " V" : " K") << " row starting " << x[0];
      for (float v : r.back) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

TEST_P(EveryFormat, NanAndInfAreMappedNotPropagated) {
  const KvFormat& f = *GetParam();
  if (f.name == "f32" || f.name == "bf16") GTEST_SKIP() << "exact formats store NaN/Inf as given";
  const int d = 128;
  std::vector<float> x(d, 1.0f);
  x[3] = NAN;
  x[70] = INFINITY;
  x[71] = -INFINITY;
  for (int side = 0; side < 2; ++side) {
    const RoundTrip r = round_trip(side ? f.v : f.k, x);
    for (float v : r.stored) ASSERT_TRUE(std::isfinite(v)) << f.name;
    // Same codes as the documented mapping applied by hand: NaN -> 0, +-Inf -> +-2^24.
    std::vector<float> mapped = x;
    mapped[3] = 0.0f;
    mapped[70] = 16777216.0f;
    mapped[71] = -16777216.0f;
    EXPECT_EQ(round_trip(side ? f.v : f.k, mapped).code, r.code) << f.name;
  }
}

TEST_P(EveryFormat, StoredBasisIsTheDeclaredRotation) {
  // decode() returns the stored basis: rotating the input by the declared rotation must match
  // it (up to quantization error) for a smooth row.
  const KvFormat& f = *GetParam();
  const int d = 256;
  std::vector<float> x(d);
  for (int i = 0; i < d; ++i) x[i] = std::sin(0.37f * i) * 2.0f + (i == 5 ? 6.0f : 0.0f);
  for (int side = 0; side < 2; ++side) {
    const KvSideCodec& s = side ? f.v : f.k;
    const RoundTrip r = round_trip(s, x);
    std::vector<float> rot = x;
    rotate_kv(s.rotation, rot.data(), d);
    EXPECT_LE(nmse(rot, r.stored), side == 0 && (f.name == "rk2v4-e8" || f.name == "e8-root-ref") ? 0.4 : 0.05)
        << f.name << (side ? " V" : " K");
  }
}

INSTANTIATE_TEST_SUITE_P(Kv, EveryFormat, ::testing::ValuesIn(kv_formats().begin(), kv_formats().end()),
                         [](const auto& info) {
                           std::string n(info.param->name);
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace ninfer
