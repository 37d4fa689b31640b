// The sm_90 prefill attention kernel (attention_prefill_sm90.cu) against the fp64 reference on
// the decoded cache (attention_test_util.h), beside the portable prefill kernel on the same
// cache and queries: every format, head_dim 64 / 128 / 256, GQA 1 / 4 / 8, chunks that start
// mid-page and chunks over cached history, shuffled page tables over stale bytes, outputs
// poisoned with NaN, random and adversarial inputs (peaky scores, huge outliers in K and Q,
// all-equal score rows), long prompts (8K), forced KV splits, sliding windows, and the
// compressed kinds' expansion into the bf16 scratch pool forced into several segments (a
// pool of a few pages: each segment folds the last one's partial).
//
// Tolerance: the bar, relative L2 error at most 2x the portable kernel's on the same
// case (measured here, not assumed). Both round Q, P and dequantised values to bf16 and
// accumulate in fp32 (attention.h's prefill budget), so the ratio stays near 1; 2x leaves
// room for the different fp32 summation order and the unrounded row sums of the new kernel.
// Windowed cases compare against the portable kernel's error without a window (it takes
// none): the same data, the same roundings. On a device without the sm_90 kernel the
// comparisons skip.
#include <cstdio>
#include <cstdlib>

#include "attention_test_util.h"
#include "cuda_test_util.h"

namespace ninfer {
namespace {

using test::AttnCase;
using test::AttnFixture;
using test::SeqSpec;

// Mid-page starts and ends, a fresh chunk and one over 100 cached tokens.
const std::vector<SeqSpec> kChunks = {{0, 200}, {100, 77}};
// A chunk over a long cached history.
const std::vector<SeqSpec> kHistory = {{3000, 150}};

std::vector<AttnCase> prefill_cases() {
  std::vector<AttnCase> v;
  struct Shape {
    int d, nh, nkv;
    const char* tag;
  };
  const Shape shapes[] = {{64, 4, 4, "d64_g1"}, {128, 8, 2, "d128_g4"}, {256, 16, 2, "d256_g8"}};
  const char* fmts[] = {"bf16", "int8", "int4", "rk4v4-e8", "rk2v4-e8", "fp8", "nvfp4", "k8v4"};
  static std::vector<std::string> names;  // AttnCase holds the names as C strings
  names.reserve(256);
  auto add = [&](const std::string& name, const char* fmt, const Shape& s, const std::vector<SeqSpec>& seqs,
                 int splits, float q_scale, int window, int kv_mode, int stride, int scratch = 0) {
    names.push_back(name);
    AttnCase c{names.back().c_str(), fmt, s.d, s.nh, s.nkv, seqs, splits, q_scale};
    c.window = window;
    c.kv_mode = kv_mode;
    c.check_stride = stride;
    c.scratch_pages = scratch;
    v.push_back(c);
  };
  for (const char* f : fmts) {
    std::string fs(f);
    std::replace(fs.begin(), fs.end(), '-', '_');
    for (const Shape& s : shapes) add(fs + "_" + s.tag, f, s, kChunks, 0, 3.0f, 0, 0, 1);
    add(fs + "_d128_g4_window96", f, shapes[1], kChunks, 0, 3.0f, 96, 0, 1);
    add(fs + "_d128_g4_history_split5", f, shapes[1], kHistory, 5, 3.0f, 0, 0, 1);
  }
  for (const char* f : {"bf16", "rk2v4-e8", "fp8"}) {
    std::string fs(f);
    std::replace(fs.begin(), fs.end(), '-', '_');
    add(fs + "_d128_g4_peaky", f, shapes[1], kChunks, 0, 12.0f, 0, 0, 1);
    add(fs + "_d128_g4_outliers", f, shapes[1], kChunks, 0, 3.0f, 0, 1, 1);
    add(fs + "_d128_g4_all_equal", f, shapes[1], kChunks, 0, 3.0f, 0, 2, 1);
    add(fs + "_d256_g8_history_window700_split3", f, shapes[2], kHistory, 3, 3.0f, 700, 0, 1);
    add(fs + "_d64_g1_history_window33", f, shapes[0], kHistory, 0, 3.0f, 33, 0, 1);
  }
  // Segments: a scratch pool of a few pages (8: 7 segments of the 50 pages of kHistory; 4: two
  // chunks of 2 pages each per segment; 6 and 2 with a window; head_dim 256 tiles are one page).
  for (const char* f : {"int8", "int4", "rk4v4-e8", "rk2v4-e8", "fp8", "nvfp4", "k8v4"}) {
    std::string fs(f);
    std::replace(fs.begin(), fs.end(), '-', '_');
    add(fs + "_d128_g4_history_segments", f, shapes[1], kHistory, 0, 3.0f, 0, 0, 1, 8);
  }
  add("rk2v4_e8_d128_g4_chunks_segments", "rk2v4-e8", shapes[1], kChunks, 0, 3.0f, 0, 0, 1, 4);
  add("int4_d256_g8_history_window700_segments", "int4", shapes[2], kHistory, 0, 3.0f, 700, 0, 1, 6);
  add("rk4v4_e8_d64_g1_history_window33_segments", "rk4v4-e8", shapes[0], kHistory, 0, 3.0f, 33, 0, 1, 2);
  add("fp8_d128_g4_outliers_segments", "fp8", shapes[1], kHistory, 0, 3.0f, 0, 1, 1, 8);
  // Long prompts: 8K tokens as one chunk; 2K tokens over 6K cached, with a window.
  add("bf16_d128_g4_8k", "bf16", shapes[1], {{0, 8192}}, 0, 3.0f, 0, 0, 61);
  add("rk2v4_e8_d128_g4_8k", "rk2v4-e8", shapes[1], {{0, 8192}}, 0, 3.0f, 0, 0, 61);
  add("int4_d256_g8_history6k_window1500", "int4", shapes[2], {{6000, 2048}}, 0, 3.0f, 1500, 0, 37);
  return v;
}

class PrefillAttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(PrefillAttentionTest, Sm90KernelWithinTwiceThePortableKernelsError) {
  NINFER_REQUIRE_GPU();
  const AttnCase c = GetParam();
  AttnFixture fx(c);
  SCOPED_TRACE(::testing::Message() << c.name << " seed " << fx.seed);

  // The portable kernel, without a window (it takes none), against its reference.
  fx.window = 0;
  fx.prefill_kernel = 1;
  const std::vector<uint16_t> old_out = fx.run(c.forced_splits);
  const std::vector<float> ref0 = test::attention_reference(fx, 0);
  const test::AttnErr old_err = test::attention_error(old_out, ref0);
  ASSERT_EQ(old_err.n_nan, 0u) << "the portable kernel left NaN or unwritten outputs";

  fx.window = c.window;
  fx.prefill_kernel = 2;
  int splits1 = 0;
  const std::vector<uint16_t> out = fx.run(c.forced_splits, -1, nullptr, &splits1);
  if (!fx.used_sm90) GTEST_SKIP() << "no sm_90 prefill kernel on this device or build";
  const test::AttnErr err =
      test::attention_error(out, c.window == 0 ? ref0 : test::attention_reference(fx, c.window));
  ASSERT_EQ(err.n_nan, 0u) << "unwritten or NaN outputs";
  std::printf("[ prefill ] %-40s rel_l2 %.3e (portable %.3e, ratio %.2f) max_err %.2e splits %d segments %d\n",
              c.name, err.rel, old_err.rel, err.rel / std::max(old_err.rel, 1e-30), err.max_err, splits1, fx.segments);
  EXPECT_LE(err.rel, 2.0 * old_err.rel) << "portable kernel's rel_l2 " << old_err.rel;
  if (c.scratch_pages > 0) EXPECT_GT(fx.segments, 1) << "the forced scratch pool did not split the expansion";
  if (std::string(c.fmt) != "bf16" && c.scratch_pages == 0) EXPECT_EQ(fx.segments, 1);
}

INSTANTIATE_TEST_SUITE_P(Cases, PrefillAttentionTest, ::testing::ValuesIn(prefill_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// Two runs of the same plan give the same bits (a race would show as a moving result).
TEST(PrefillAttentionProps, RepeatedRunsAgreeBitwise) {
  NINFER_REQUIRE_GPU();
  for (const char* f : {"bf16", "rk2v4-e8"}) {
    AttnCase c{"perm", f, 128, 8, 2, {{100, 300}}, 0, 3.0f};
    AttnFixture a(c);
    a.prefill_kernel = 2;
    const std::vector<uint16_t> base = a.run(0);
    if (!a.used_sm90) GTEST_SKIP() << "no sm_90 prefill kernel on this device or build";
    EXPECT_EQ(a.run(0), base) << f << ": a second run differs (a race?)";
  }
}

}  // namespace
}  // namespace ninfer
