// KV append kernels against the CPU codecs: the GPU must write byte-identical codes and
// scales (int8, int4, rk4v4-e8 K and V, rk2v4-e8 K and V, fp8, nvfp4, k8v4) and bf16 values,
// placed in the device layout of kv_cache.h. Row cases: all zero, all equal (a lone spike
// after H), one huge outlier, exact int8 rounding ties, +-amax, NaN/+-Inf, fp16-subnormal
// scales, scales that round to 0, scales clamped to 65504, and Gaussian rows of several
// widths. For fp8 / nvfp4 the int8 tie case is replaced by rows whose *rotated* values sit
// exactly on e4m3 / e2m1 rounding midpoints (ties to even, subnormal e4m3 codes, saturation),
// with exactly representable scales (nvfp4: e4m3 block scales; fp8: fp16 row scale 2^k).
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

// Unnormalised-then-scaled Hadamard in double, the inverse of the format's rotation (self-
// inverse): rot 1 over the whole row, 2 over each 64-group, 0 none.
void hadamard_inplace(std::vector<double>& x, int rot) {
  if (rot == 0) return;
  const int d = int(x.size()), n = rot == 1 ? d : 64;
  for (int base = 0; base < d; base += n) {
    for (int h = 1; h < n; h <<= 1)
      for (int i = 0; i < n; i += 2 * h)
        for (int j = i; j < i + h; ++j) {
          const double a = x[size_t(base + j)], b = x[size_t(base + j + h)];
          x[size_t(base + j)] = a + b;
          x[size_t(base + j + h)] = a - b;
        }
    for (int i = base; i < base + n; ++i) x[size_t(i)] /= std::sqrt(double(n));
  }
}

// A row whose rotated values hit minifloat rounding midpoints (see the header). The stored
// values y are built first, then x = H^-1 y: exact ties for nvfp4 (rot 2, and rot 1 at d 64 /
// 256: short dyadic grids) and for the unrotated fp8 V; near-ties elsewhere (fp8 K, d 128).
std::vector<float> make_tie_row(int d, bool nvfp4, int rot, std::mt19937& rng) {
  std::vector<double> y(static_cast<size_t>(d));
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  if (nvfp4) {
    // e2m1 midpoints and codes (x s): 0.25 0.75 1.25 1.75 2.5 3.5 5 and 0.5 .. 6; block amax 6 s
    // with s = 2^k exactly e4m3.
    const double vals[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 0.0, 0.125};
    for (int b = 0; b < d; b += 16) {
      const double s = std::ldexp(1.0, pick(rng) % 7 - 3);
      for (int i = 0; i < 16; ++i) {
        const int r = pick(rng);
        y[size_t(b + i)] = (r & 1 ? -1.0 : 1.0) * vals[size_t((r >> 1) % 16)] * s;
      }
      y[size_t(b + pick(rng) % 16)] = 6.0 * s;
    }
  } else {
    // e4m3 midpoints between adjacent codes (incl. subnormals and the 416/448 top), scale
    // s = fp16(amax / 448) = 2^k exactly (amax 448 s).
    const double s = std::ldexp(1.0, pick(rng) % 9 - 4);
    auto e4m3 = [](int c) { return c < 8 ? std::ldexp(double(c), -9) : std::ldexp(double(8 + c % 8), c / 8 - 10); };
    for (int i = 0; i < d; ++i) {
      const int r = pick(rng), c = (r >> 1) % 126;
      const double mid = 0.5 * (e4m3(c) + e4m3(c + 1));
      y[size_t(i)] = (r & 1 ? -1.0 : 1.0) * (i % 5 == 4 ? e4m3(c) : mid) * s;
    }
    y[size_t(pick(rng) % d)] = 448.0 * s;
  }
  hadamard_inplace(y, rot);
  return std::vector<float>(y.begin(), y.end());
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
  cuda::CacheKind kind{};
  ASSERT_TRUE(cuda::cache_kind_for(c.fmt, &kind));
  const int ld = 2 * nkv * d;
  std::vector<float> src(size_t(n_tok) * ld);
  for (int t = 0; t < n_tok; ++t)
    for (int j = 0; j < 2 * nkv; ++j) {
      std::vector<float> row = make_row(t * 2 * nkv + j, d, rng);
      if (cuda::cache_lowbit(kind) && (t * 2 * nkv + j) % 12 == 3) {
        const int side = j / nkv;
        row = make_tie_row(d, cuda::cache_side_nvfp4(kind, side),
                           int(side == 0 ? fmt.k.rotation : fmt.v.rotation), rng);
      }
      std::copy(row.begin(), row.end(), src.begin() + size_t(t) * ld + size_t(j) * d);
    }
  const int n_pages = 5;
  const std::vector<int32_t> page_of_block = {3, 0, 4};  // shuffled physical pages
  std::vector<int32_t> tok_page(static_cast<size_t>(n_tok)), tok_slot(static_cast<size_t>(n_tok));
  for (int t = 0; t < n_tok; ++t) {
    tok_page[size_t(t)] = page_of_block[size_t(t / 64)];
    tok_slot[size_t(t)] = t % 64;
  }
  const size_t kblk = cuda::cache_block_bytes(kind, d, 0), vblk = cuda::cache_block_bytes(kind, d, 1);
  DevBuf<float> d_src;
  d_src.upload(src);
  DevBuf<int32_t> d_page, d_slot;
  d_page.upload(tok_page);
  d_slot.upload(tok_slot);
  DevBuf<uint8_t> k_pool(size_t(n_pages) * nkv * kblk), v_pool(size_t(n_pages) * nkv * vblk);
  k_pool.poison();
  v_pool.poison();
  test::append_kv_rows(d_src.get(), n_tok, nkv, d, kind, fmt.k.rotation == KvRotation::HadamardHead, d_page.get(),
                       d_slot.get(), k_pool.get(), v_pool.get());
  const std::vector<uint8_t> kh = k_pool.download(), vh = v_pool.download();
  ASSERT_EQ(cuda::cache_code_bytes(kind, d, 0) + cuda::cache_scale_bytes(kind, d, 0), fmt.k_bytes(d));
  ASSERT_EQ(cuda::cache_code_bytes(kind, d, 1) + cuda::cache_scale_bytes(kind, d, 1), fmt.v_bytes(d));
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
                                           AppendCase{128, "rk2v4-e8"}, AppendCase{256, "rk2v4-e8"},
                                           AppendCase{64, "fp8"}, AppendCase{128, "fp8"}, AppendCase{256, "fp8"},
                                           AppendCase{64, "nvfp4"}, AppendCase{128, "nvfp4"},
                                           AppendCase{256, "nvfp4"}, AppendCase{64, "k8v4"}, AppendCase{128, "k8v4"},
                                           AppendCase{256, "k8v4"}),
                         [](const auto& info) {
                           std::string s = std::string(info.param.fmt) + "_d" + std::to_string(info.param.head_dim);
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace ninfer
