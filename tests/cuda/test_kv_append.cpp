// KV append kernels against the CPU codecs: the GPU must write byte-identical codes and
// scales (int8, int4, rk4v4-e8 K and V, rk2v4-e8 K and V) and bf16 values, placed in the
// device layout of kv_cache.h. Row cases: all zero, all equal (a lone spike after H), one huge
// outlier, exact int8 rounding ties, +-amax, NaN/+-Inf, fp16-subnormal scales, scales that
// round to 0, scales clamped to 65504, and Gaussian rows of several widths.
#include <cmath>
#include <limits>

#include "backend/cuda/kv_cache.h"
#include "cuda_test_util.h"
#include "kv/format.h"

namespace ninfer {
namespace {

using test::DevBuf;

// Adversarial and random rows of length d; `i` selects the case.
std::vector<float> make_row(int i, int d, std::mt19937& rng) {
  std::vector<float> x(size_t(d), 0.0f);
  std::normal_distribution<float> n(0.0f, 1.0f);
  switch (i % 12) {
    case 0: break;                                                   // all zero
    case 1: for (float& v : x) v = 3.0f; break;                      // all equal
    case 2: for (float& v : x) v = n(rng); x[size_t(d / 3)] = 1e6f; break;  // one huge outlier
    case 3:  // exact ties: amax 15.875 = 127 * 0.125 gives scale 0.125 exactly; values (k + 0.5) * 0.125
      for (int j = 0; j < d; ++j) x[size_t(j)] = (float((j * 7) % 200 - 100) + 0.5f) * 0.125f * 0.6f;
      for (int g = 0; g < d; g += 64) x[size_t(g)] = 15.875f;
      break;
    case 4: for (int j = 0; j < d; ++j) x[size_t(j)] = (j % 2 ? -1.0f : 1.0f) * 15.875f; break;  // +-amax
    case 5:  // NaN and infinities
      for (float& v : x) v = n(rng);
      x[1] = std::numeric_limits<float>::quiet_NaN();
      x[2] = std::numeric_limits<float>::infinity();
      x[size_t(d - 1)] = -std::numeric_limits<float>::infinity();
      break;
    case 6: for (float& v : x) v = n(rng) * 1e-7f; break;            // scales in fp16 subnormals
    case 7: for (float& v : x) v = n(rng) * 1e-12f; break;           // scale rounds to 0
    case 8: for (float& v : x) v = n(rng) * 1e6f; break;             // scale clamps to 65504
    default: for (float& v : x) v = n(rng) * (i % 5 + 1); break;     // random
  }
  return x;
}

struct AppendCase {
  int head_dim;
  const char* fmt;
};

class KvAppend : public ::testing::TestWithParam<AppendCase> {};

TEST_P(KvAppend, BytesMatchCpuCodec) {
  NINFER_REQUIRE_GPU();
  const AppendCase c = GetParam();
  const KvFormat& fmt = find_kv_format(c.fmt);
  const int d = c.head_dim, nkv = 3, n_tok = 131;  // 131 tokens: pages 0..2, partly filled
  const uint32_t seed = 1234u + uint32_t(d);
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " format " << c.fmt << " head_dim " << d);
  std::mt19937 rng(seed);
  const int ld = 2 * nkv * d;
  std::vector<float> src(size_t(n_tok) * ld);
  for (int t = 0; t < n_tok; ++t)
    for (int j = 0; j < 2 * nkv; ++j) {
      std::vector<float> row = make_row(t * 2 * nkv + j, d, rng);
      std::copy(row.begin(), row.end(), src.begin() + size_t(t) * ld + size_t(j) * d);
    }
  const int n_pages = 5;
  const std::vector<int32_t> page_of_block = {3, 0, 4};  // shuffled physical pages
  std::vector<int32_t> tok_page(static_cast<size_t>(n_tok)), tok_slot(static_cast<size_t>(n_tok));
  for (int t = 0; t < n_tok; ++t) {
    tok_page[size_t(t)] = page_of_block[size_t(t / 64)];
    tok_slot[size_t(t)] = t % 64;
  }
  cuda::CacheKind kind{};
  ASSERT_TRUE(cuda::cache_kind_for(c.fmt, &kind));
  const size_t kblk = cuda::cache_block_bytes(kind, d, 0), vblk = cuda::cache_block_bytes(kind, d, 1);
  DevBuf<float> d_src;
  d_src.upload(src);
  DevBuf<int32_t> d_page, d_slot;
  d_page.upload(tok_page);
  d_slot.upload(tok_slot);
  DevBuf<uint8_t> k_pool(size_t(n_pages) * nkv * kblk), v_pool(size_t(n_pages) * nkv * vblk);
  k_pool.poison();
  v_pool.poison();
  cuda::KvAppendParams p;
  p.src = d_src.get();
  p.ld = ld;
  p.k_col = 0;
  p.v_col = nkv * d;
  p.tok_page = d_page.get();
  p.tok_slot = d_slot.get();
  p.k_pool = k_pool.get();
  p.v_pool = v_pool.get();
  p.n_tokens = n_tok;
  p.n_kv_heads = nkv;
  p.head_dim = d;
  p.kind = kind;
  p.k_rotate = fmt.k.rotation == KvRotation::HadamardHead;
  cuda::launch_kv_append(p, nullptr);
  const std::vector<uint8_t> kh = k_pool.download(), vh = v_pool.download();
  const size_t scale_b = cuda::cache_scale_bytes(kind, d);
  ASSERT_EQ(cuda::cache_code_bytes(kind, d, 0) + scale_b, fmt.k_bytes(d));
  ASSERT_EQ(cuda::cache_code_bytes(kind, d, 1) + scale_b, fmt.v_bytes(d));
  int mismatches = 0;
  for (int t = 0; t < n_tok; ++t) {
    for (int side = 0; side < 2; ++side) {
      for (int h = 0; h < nkv; ++h) {
        const float* row = src.data() + size_t(t) * ld + size_t(side * nkv + h) * d;
        std::vector<uint8_t> want(side == 0 ? fmt.k_bytes(d) : fmt.v_bytes(d));
        (side == 0 ? fmt.k : fmt.v).encode(row, d, want.data());
        const uint8_t* b =
            (side == 0 ? kh : vh).data() + (size_t(tok_page[size_t(t)]) * nkv + h) * (side == 0 ? kblk : vblk);
        std::vector<uint8_t> got(want.size());
        cuda::gather_cpu_row(kind, side, b, d, tok_slot[size_t(t)], got.data());
        if (got != want && mismatches++ < 5) {
          size_t i = 0;
          while (got[i] == want[i]) ++i;
          ADD_FAILURE() << "token " << t << (side ? " V" : " K") << " head " << h << " row case "
                        << (t * 2 * nkv + side * nkv + h) % 12 << ": first differing byte " << i << " got "
                        << int(got[i]) << " want " << int(want[i]);
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(Formats, KvAppend,
                         ::testing::Values(AppendCase{64, "int8"}, AppendCase{128, "int8"}, AppendCase{256, "int8"},
                                           AppendCase{64, "bf16"}, AppendCase{128, "bf16"}, AppendCase{256, "bf16"},
                                           AppendCase{64, "int4"}, AppendCase{128, "int4"}, AppendCase{256, "int4"},
                                           AppendCase{64, "rk4v4-e8"}, AppendCase{128, "rk4v4-e8"},
                                           AppendCase{256, "rk4v4-e8"}, AppendCase{64, "rk2v4-e8"},
                                           AppendCase{128, "rk2v4-e8"}, AppendCase{256, "rk2v4-e8"}),
                         [](const auto& info) {
                           std::string s = std::string(info.param.fmt) + "_d" + std::to_string(info.param.head_dim);
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace ninfer
