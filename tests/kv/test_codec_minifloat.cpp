// e4m3 and e2m1 conversions: exhaustive round trips, ties to even, saturation, NaN/-0 rules.
#include <gtest/gtest.h>

#include <cmath>

#include "core/minifloat.h"

namespace ninfer {
namespace {

TEST(Minifloat, E4m3DecodeKnownValues) {
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xFE), -448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7F)));
}

TEST(Minifloat, E4m3RoundTripsEveryFiniteCode) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) == 0x7F) continue;  // NaN
    const float v = e4m3_to_f32(uint8_t(b));
    const uint8_t want = b == 0x80 ? 0 : uint8_t(b);  // -0 encodes as +0
    EXPECT_EQ(f32_to_e4m3(v), want) << b;
  }
}

TEST(Minifloat, E4m3RoundsHalfToEvenAndSaturates) {
  // Midpoints between consecutive positive codes go to the code with an even mantissa.
  for (int b = 0; b < 0x7E; ++b) {
    const float lo = e4m3_to_f32(uint8_t(b)), hi = e4m3_to_f32(uint8_t(b + 1));
    const float mid = 0.5f * (lo + hi);
    EXPECT_EQ(f32_to_e4m3(mid), (b & 1) ? b + 1 : b) << b;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 0.0f)), b) << b;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 1e9f)), b + 1) << b;
    EXPECT_EQ(f32_to_e4m3(-std::nextafter(mid, 1e9f)), (b + 1) | 0x80) << b;
  }
  EXPECT_EQ(f32_to_e4m3(460.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(1e30f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-INFINITY), 0xFE);
  EXPECT_EQ(f32_to_e4m3(NAN), 0x00);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -11)), 0x00);  // below half the smallest subnormal
}

TEST(Minifloat, E2m1AllCodesTiesAndSaturation) {
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int n = 0; n < 16; ++n) {
    const float v = e2m1_to_f32(uint8_t(n));
    EXPECT_EQ(v, (n & 8 ? -1 : 1) * mags[n & 7]);
    EXPECT_EQ(f32_to_e2m1(v), n == 8 ? 0 : n) << n;
  }
  EXPECT_EQ(f32_to_e2m1(0.25f), 0);   // tie -> even (0)
  EXPECT_EQ(f32_to_e2m1(0.75f), 2);   // tie 0.5|1.0 -> 1.0 (code 2)
  EXPECT_EQ(f32_to_e2m1(1.25f), 2);
  EXPECT_EQ(f32_to_e2m1(1.75f), 4);
  EXPECT_EQ(f32_to_e2m1(2.5f), 4);
  EXPECT_EQ(f32_to_e2m1(3.5f), 6);
  EXPECT_EQ(f32_to_e2m1(5.0f), 6);
  EXPECT_EQ(f32_to_e2m1(5.01f), 7);
  EXPECT_EQ(f32_to_e2m1(100.0f), 7);
  EXPECT_EQ(f32_to_e2m1(-100.0f), 15);
  EXPECT_EQ(f32_to_e2m1(NAN), 0);
  EXPECT_EQ(f32_to_e2m1(-0.1f), 0);  // rounds to zero: no negative zero
}

}  // namespace
}  // namespace ninfer
