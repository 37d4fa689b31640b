// The head-width copies (backend/cuda/head_pad.h) against a CPU loop: the q/k/v heads of a
// head_dim 96 model zero-padded to 128 (fp32) and the attention output cut back to 96 (bf16).
// A copy is exact: every element compares bit for bit (NaN, infinities and -0 included), the
// outputs are poisoned first (0xFF bytes), and the columns of a row past its heads must keep
// the poison (never written). Shapes: one token; row strides wider than the heads (ld + 3, + 5);
// Phi-3-mini's 32 + 2 * 32 heads; and more elements than one launch's 65,536 x 256 threads
// (the grid-stride loop). Inputs from a fixed, printed seed.
#include <cstring>
#include <stdexcept>

#include "backend/cuda/head_pad.h"
#include "cuda_test_util.h"

namespace ninfer {
namespace {

using test::DevBuf;

struct Shape {
  int n_tokens, n_heads, src_dim, dst_dim, src_extra, dst_extra;
};

// dst as launch_copy_heads_* leaves it: poison (all-ones bits) outside the heads' columns.
template <typename Bits>
std::vector<Bits> reference(const std::vector<Bits>& src, const Shape& s) {
  const size_t src_ld = size_t(s.n_heads) * s.src_dim + s.src_extra;
  const size_t dst_ld = size_t(s.n_heads) * s.dst_dim + s.dst_extra;
  std::vector<Bits> dst(size_t(s.n_tokens) * dst_ld, Bits(~Bits(0)));
  for (size_t t = 0; t < size_t(s.n_tokens); ++t)
    for (size_t h = 0; h < size_t(s.n_heads); ++h)
      for (size_t i = 0; i < size_t(s.dst_dim); ++i)
        dst[t * dst_ld + h * s.dst_dim + i] = i < size_t(s.src_dim) ? src[t * src_ld + h * s.src_dim + i] : Bits(0);
  return dst;
}

// Random bits of finite values of the type plus NaN, +-Inf and -0 at fixed places.
template <typename Bits>
std::vector<Bits> random_bits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Bits> v(n);
  for (Bits& b : v) {
    b = Bits(rng());
    // an all-ones exponent (fp32 bits 23..30, bf16 bits 7..14) loses its top bit: finite
    const Bits exp_mask = sizeof(Bits) == 4 ? Bits(0x7f800000u) : Bits(0x7f80u);
    const Bits exp_top = sizeof(Bits) == 4 ? Bits(0x40000000u) : Bits(0x4000u);
    if ((b & exp_mask) == exp_mask) b = Bits(b & ~exp_top);
  }
  const Bits nan = sizeof(Bits) == 4 ? Bits(0x7fc00001u) : Bits(0x7fc1u);
  const Bits inf = sizeof(Bits) == 4 ? Bits(0xff800000u) : Bits(0xff80u);
  const Bits neg0 = sizeof(Bits) == 4 ? Bits(0x80000000u) : Bits(0x8000u);
  for (size_t i = 0; i < n; i += 997) v[i] = i % 3 == 0 ? nan : i % 3 == 1 ? inf : neg0;
  return v;
}

const Shape kPad[] = {{1, 4, 96, 128, 0, 0}, {7, 4, 96, 128, 3, 5}, {5, 96, 96, 128, 0, 7},
                      {4097, 33, 96, 128, 0, 0}, {3, 2, 64, 64, 1, 2}};
const Shape kCut[] = {{1, 2, 128, 96, 0, 0}, {9, 32, 128, 96, 3, 4}, {4500, 40, 128, 96, 0, 0}};

TEST(CudaHeadPad, PadsF32HeadsWithZeros) {
  NINFER_REQUIRE_GPU();
  for (const Shape& s : kPad) {
    const uint32_t seed = 40u + uint32_t(s.n_tokens * 131 + s.n_heads);
    SCOPED_TRACE(::testing::Message() << "tokens " << s.n_tokens << " heads " << s.n_heads << " " << s.src_dim
                                      << " -> " << s.dst_dim << " seed " << seed);
    const int src_ld = s.n_heads * s.src_dim + s.src_extra, dst_ld = s.n_heads * s.dst_dim + s.dst_extra;
    const std::vector<uint32_t> src = random_bits<uint32_t>(size_t(s.n_tokens) * src_ld, seed);
    std::vector<float> srcf(src.size());
    std::memcpy(srcf.data(), src.data(), src.size() * 4);
    DevBuf<float> d_src, d_dst(size_t(s.n_tokens) * dst_ld);
    d_src.upload(srcf);
    d_dst.poison();
    cuda::launch_copy_heads_f32(d_src.get(), src_ld, s.src_dim, d_dst.get(), dst_ld, s.dst_dim, s.n_tokens,
                                s.n_heads, nullptr);
    const std::vector<float> got = d_dst.download();
    const std::vector<uint32_t> want = reference(src, s);
    for (size_t i = 0; i < want.size(); ++i) {
      uint32_t g;
      std::memcpy(&g, &got[i], 4);
      ASSERT_EQ(g, want[i]) << "element " << i << " (token " << i / size_t(dst_ld) << ", column " << i % size_t(dst_ld)
                            << ")";
    }
  }
}

TEST(CudaHeadPad, CutsBf16HeadsBack) {
  NINFER_REQUIRE_GPU();
  for (const Shape& s : kCut) {
    const uint32_t seed = 90u + uint32_t(s.n_tokens * 131 + s.n_heads);
    SCOPED_TRACE(::testing::Message() << "tokens " << s.n_tokens << " heads " << s.n_heads << " " << s.src_dim
                                      << " -> " << s.dst_dim << " seed " << seed);
    const int src_ld = s.n_heads * s.src_dim + s.src_extra, dst_ld = s.n_heads * s.dst_dim + s.dst_extra;
    const std::vector<uint16_t> src = random_bits<uint16_t>(size_t(s.n_tokens) * src_ld, seed);
    DevBuf<uint16_t> d_src, d_dst(size_t(s.n_tokens) * dst_ld);
    d_src.upload(src);
    d_dst.poison();
    cuda::launch_copy_heads_bf16(d_src.get(), src_ld, s.src_dim, d_dst.get(), dst_ld, s.dst_dim, s.n_tokens,
                                 s.n_heads, nullptr);
    const std::vector<uint16_t> got = d_dst.download();
    const std::vector<uint16_t> want = reference(src, s);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "element " << i << " (token " << i / size_t(dst_ld) << ", column "
                                 << i % size_t(dst_ld) << ")";
  }
}

// Heads wider than the rows are refused before anything is launched (no GPU needed).
TEST(CudaHeadPad, RefusesHeadsWiderThanTheirRows) {
  EXPECT_THROW(cuda::launch_copy_heads_f32(nullptr, 4 * 96 - 1, 96, nullptr, 4 * 128, 128, 1, 4, nullptr),
               std::runtime_error);
  EXPECT_THROW(cuda::launch_copy_heads_bf16(nullptr, 2 * 128, 128, nullptr, 2 * 96 - 1, 96, 1, 2, nullptr),
               std::runtime_error);
  EXPECT_THROW(cuda::launch_copy_heads_f32(nullptr, 128, 0, nullptr, 128, 128, 1, 1, nullptr), std::runtime_error);
}

}  // namespace
}  // namespace ninfer
