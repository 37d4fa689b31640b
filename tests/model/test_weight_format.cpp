// The CPU reference dequantisation (model/weight_format.h, the oracle for GPU kernels) against
// independently computed values: every e4m3 code decoded in fp64, hand-packed int4 nibbles
// with zero points and a g_idx, int8 extremes; adversarial inputs (scale 0, +-448, NaN codes,
// zero points past 15, g_idx out of range, inconsistent sizes) and the --weights quantisers'
// error bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "core/dtype.h"
#include "model/model.h"
#include "model/weight_format.h"
#include "quant_test_util.h"
#include "test_paths.h"

namespace ninfer {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<float> dequant(const QuantMatrix& m) {
  std::vector<float> out(size_t(m.rows * m.cols), -12345.0f);  // poisoned: an unwritten element fails
  m.format->dequant_rows(m, 0, m.rows, out.data());
  return out;
}

TEST(WeightFormat, Table) {
  EXPECT_EQ(weights_option_names(), "bf16, fp8, int8, int4");
  EXPECT_EQ(parse_weights_option("bf16"), nullptr);
  EXPECT_EQ(parse_weights_option("int4")->id, WeightFormatId::Int4);
  EXPECT_NE(error_of([] { parse_weights_option("nf4"); }).find("--weights 'nf4' is not a weight format (valid: bf16, fp8, int8, int4)"),
            std::string::npos);
  for (const WeightFormat* f : weight_formats()) EXPECT_EQ(&weight_format(f->id), f);
}

// Every one of the 256 codes in a 16 x 16 matrix with 4 x 8 scale blocks (ragged: 16 = 4 * 4,
// 16 = 8 * 2), scales including 0 and a power of two: each element equals the fp64 value
// rounded once to fp32; the NaN codes are refused by validate() and only them.
TEST(WeightFormat, Fp8EveryCodeAgainstFp64) {
  QuantMatrix m;
  m.name = "w";
  init_quant_matrix(m, weight_format(WeightFormatId::Fp8), 16, 16, 4, 8);
  for (int i = 0; i < 256; ++i) m.codes[size_t(i)] = uint8_t(i);
  const float sc[8] = {1.0f, 0.0f, 0.0123f, 3.5f, 1.0f / 448.0f, 1e-3f, 2.0f, -0.5f};
  for (int i = 0; i < 8; ++i) m.scales[size_t(i)] = sc[i];
  EXPECT_NE(error_of([&] { m.validate(); }).find("element (7, 15) is the e4m3 NaN code 0x7F"), std::string::npos);
  EXPECT_NE(error_of([&] { m.validate(); }).find("tensor 'w'"), std::string::npos);
  const std::vector<float> got = dequant(m);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      const uint8_t code = uint8_t(r * 16 + c);
      const double want = test::e4m3_ref(code) * double(sc[(r / 4) * 2 + c / 8]);
      if ((code & 0x7F) == 0x7F) {
        EXPECT_TRUE(std::isnan(got[size_t(code)])) << int(code);
        continue;
      }
      EXPECT_EQ(got[size_t(code)], float(want)) << "code 0x" << std::hex << int(code);
    }
  EXPECT_EQ(test::e4m3_ref(0x7E), 448.0);
  EXPECT_EQ(got[0x7E], 448.0f * sc[(0x7E / 16 / 4) * 2 + (0x7E % 16) / 8]);
  // Only 0x7F and 0xFF are NaN: with those two replaced the matrix validates.
  m.codes[0x7F] = 0x7E;
  m.codes[0xFF] = 0xFE;
  m.validate();
}

TEST(WeightFormat, Int8PerChannelExtremes) {
  QuantMatrix m;
  m.name = "w8";
  init_quant_matrix(m, weight_format(WeightFormatId::Int8), 3, 5, 1, 5);
  const int8_t codes[15] = {-128, -127, -1, 0, 1, 127, 64, -64, 3, -3, 0, 0, 0, 0, 0};
  std::memcpy(m.codes.data(), codes, 15);
  m.scales = {0.25f, 1e-7f, 0.0f};
  m.validate();
  const std::vector<float> got = dequant(m);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(got[size_t(i)], float(double(codes[i]) * double(m.scales[size_t(i / 5)]))) << i;
}

// Hand-packed nibbles: 2 rows x 7 columns (odd: the last byte's high nibble unused), groups of
// 4 columns (2 groups, the last partial), zero points 0, 15, 8, 3.
TEST(WeightFormat, Int4HandPackedNibbles) {
  QuantMatrix m;
  m.name = "w4";
  init_quant_matrix(m, weight_format(WeightFormatId::Int4), 2, 7, 1, 4);
  EXPECT_EQ(m.row_bytes(), 4);
  EXPECT_EQ(m.n_groups, 2);
  // row 0: columns 0..6 = 1, 2, 3, 4, 15, 0, 7; row 1: 0, 15, 8, 8, 3, 9, 14
  m.codes = {0x21, 0x43, 0x0F, 0x07, 0xF0, 0x88, 0x93, 0x0E};
  m.scales = {0.5f, 2.0f, 0.125f, -1.0f};
  m.zeros = {0, 15, 8, 3};
  m.validate();
  const int q[2][7] = {{1, 2, 3, 4, 15, 0, 7}, {0, 15, 8, 8, 3, 9, 14}};
  const std::vector<float> got = dequant(m);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 7; ++c) {
      const int g = c / 4;
      const double want = double(q[r][c] - int(m.zeros[size_t(r * 2 + g)])) * double(m.scales[size_t(r * 2 + g)]);
      EXPECT_EQ(got[size_t(r * 7 + c)], float(want)) << r << "," << c;
    }
  // With a g_idx the groups follow it, not c / 4.
  m.g_idx = {1, 0, 1, 0, 1, 0, 1};
  m.validate();
  const std::vector<float> gi = dequant(m);
  for (int c = 0; c < 7; ++c) {
    const int g = m.g_idx[size_t(c)];
    EXPECT_EQ(gi[size_t(c)], float(double(q[0][c] - int(m.zeros[size_t(g)])) * double(m.scales[size_t(g)])));
  }
}

TEST(WeightFormat, ValidateRefusesBadMatrices) {
  QuantMatrix m;
  m.name = "bad";
  init_quant_matrix(m, weight_format(WeightFormatId::Int4), 2, 8, 1, 4);
  m.validate();
  QuantMatrix z = m;
  z.zeros[3] = 16;
  EXPECT_NE(error_of([&] { z.validate(); }).find("zero point 3 is 16"), std::string::npos);
  QuantMatrix s = m;
  s.scales[1] = INFINITY;
  EXPECT_NE(error_of([&] { s.validate(); }).find("scales must be finite"), std::string::npos);
  s.scales[1] = NAN;
  EXPECT_NE(error_of([&] { s.validate(); }).find("scales must be finite"), std::string::npos);
  QuantMatrix g = m;
  g.g_idx = {0, 1, 2, 0, 0, 0, 0, 0};
  EXPECT_NE(error_of([&] { g.validate(); }).find("g_idx[2] = 2 is not a group index (0..1)"), std::string::npos);
  g.g_idx = {0, 1};
  EXPECT_NE(error_of([&] { g.validate(); }).find("g_idx has 2 entries, expected 8"), std::string::npos);
  QuantMatrix c = m;
  c.codes.pop_back();
  EXPECT_NE(error_of([&] { c.validate(); }).find("codes of 7 bytes"), std::string::npos);
  QuantMatrix n = m;
  n.n_groups = 3;
  n.scales.resize(6);
  n.zeros.resize(6);
  EXPECT_NE(error_of([&] { n.validate(); }).find("3 groups of 4 columns cannot cover 8 columns"), std::string::npos);
}

// --weights quantisers: every element within half a quantisation step of the original (int8,
// int4), within e4m3's half-ulp relative error (fp8); a zero row stays exactly zero; the
// representation's bytes are what capacity planning counts.
TEST(WeightFormat, QuantizeAtLoadErrorBounds) {
  const int64_t rows = 5, cols = 300;  // 300 = 2 groups of 128 + a partial group of 44
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> w(size_t(rows * cols));
  for (float& v : w) v = nd(rng);
  for (int64_t c = 0; c < cols; ++c) w[size_t(2 * cols + c)] = 0.0f;  // a zero row
  w[7] = 1.5f;                                                        // an outlier
  for (const WeightFormat* f : weight_formats()) {
    QuantMatrix m;
    m.name = f->name;
    f->quantize(w.data(), rows, cols, m);
    m.validate();
    EXPECT_EQ(m.bytes(), quant_matrix_bytes(*f, rows, cols, 1, f->load_group)) << f->name;
    const std::vector<float> d = dequant(m);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const double x = w[size_t(r * cols + c)], y = d[size_t(r * cols + c)];
        const double s = m.scales[size_t(r * m.n_groups + m.group_of(c))];
        double bound;
        if (f->id == WeightFormatId::Fp8)
          bound = std::max(std::fabs(x) / 16.0, s * std::ldexp(1.0, -10)) * (1 + 1e-6);  // half-ulp: 3 mantissa bits
        else
          bound = 0.5 * s * (1 + 1e-5) + 1e-9;  // round to nearest step
        ASSERT_LE(std::fabs(x - y), bound) << f->name << " (" << r << ", " << c << ")";
        if (r == 2) ASSERT_EQ(y, 0.0) << f->name;
      }
  }
  QuantMatrix m4;
  weight_format(WeightFormatId::Int4).quantize(w.data(), rows, cols, m4);
  EXPECT_EQ(m4.n_groups, 3);
  EXPECT_EQ(m4.block_cols, 128);
}

}  // namespace
}  // namespace ninfer

namespace ninfer {
namespace {

// --weights quantises row slices on several threads (model.cpp): the result equals the
// format's quantiser over the whole matrix on one thread, byte for byte.
TEST(WeightFormat, QuantizeAtLoadInSlicesEqualsWholeMatrix) {
  for (const char* w : {"fp8", "int8", "int4"}) {
    const WeightFormat& f = *parse_weights_option(w);
    auto m = load_model(test::test_data_dir() / "tiny" / "llama-rope-default", 0, &f);
    ASSERT_FALSE(m->weights.quantised.empty());
    for (const auto& q : m->weights.quantised) {
      SCOPED_TRACE(::testing::Message() << w << " " << q->name);
      const TensorInfo* t = m->store->find(q->name);
      ASSERT_NE(t, nullptr);
      std::vector<float> x(size_t(t->numel()));
      convert_to_f32(t->dtype, t->data, x.data(), x.size());
      QuantMatrix one;
      f.quantize(x.data(), q->rows, q->cols, one);
      EXPECT_EQ(q->codes, one.codes);
      EXPECT_EQ(q->scales, one.scales);
      EXPECT_EQ(q->zeros, one.zeros);
      EXPECT_EQ(q->block_cols, one.block_cols);
    }
  }
}

}  // namespace
}  // namespace ninfer
