// The GPU's Gated DeltaNet (backend/cuda/delta_net.h) against the CPU oracle
// (backend/cpu/delta_net.h) on random and adversarial inputs: both projection layouts, the real
// models' head shape (128 x 128) and small ones, a batch of three sequences with their own state
// slots, one fresh (position 0) and two continuing a carried state, then decode steps. Output
// in bf16 (the GPU writes the out_proj input as bf16), state in fp32.
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/delta_net.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/delta_net.h"
#include "cuda_test_util.h"

namespace ninfer {
namespace {

struct Shape {
  int nk, nv, dk, dv, conv;
  bool grouped;
  int kd() const { return nk * dk; }
  int vd() const { return nv * dv; }
  int cd() const { return 2 * kd() + vd(); }
  int width() const { return cd() + vd() + 2 * nv; }
  size_t state_floats() const { return size_t(conv - 1) * cd() + size_t(nv) * dk * dv; }
};

cpu::ParallelFor serial = [](int n, const std::function<void(int)>& fn) {
  for (int i = 0; i < n; ++i) fn(i);
};

void check(const Shape& s, bool adversarial, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << "nk " << s.nk << " nv " << s.nv << " dk " << s.dk << " dv " << s.dv << " conv "
                                  << s.conv << (s.grouped ? " grouped" : " flat") << (adversarial ? " adversarial" : ""));
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  // Three sequences: 37 tokens from position 0 (slot 2), 70 continuing (slot 0), 1 continuing (slot 1).
  const int lens[3] = {37, 70, 1}, slots[3] = {2, 0, 1}, fresh[3] = {1, 0, 0};
  const int T = 108, n_slots = 3;
  std::vector<float> proj(size_t(T) * s.width());
  for (float& v : proj) v = n(rng);
  if (adversarial)
    for (int t = 0; t < T; ++t) {
      float* row = proj.data() + size_t(t) * s.width();
      if (t % 5 == 1) for (int h = 0; h < s.nv; ++h) row[s.cd() + s.vd() + s.nv + h] = 40.0f;  // a: decay to ~0 (flat cols)
      if (t % 7 == 2) for (int h = 0; h < s.nv; ++h) row[s.cd() + s.vd() + h] = (h & 1) ? 30.0f : -30.0f;  // beta 1 / 0
      if (t % 9 == 4) for (int i = 0; i < s.width(); ++i) row[i] *= 1e-3f;  // tiny rows
    }
  std::vector<float> conv_w(size_t(s.cd()) * s.conv), a_log(size_t(s.nv)), dt(size_t(s.nv)), norm_w(size_t(s.dv));
  for (float& v : conv_w) v = 0.5f * n(rng);
  for (float& v : a_log) v = std::log(0.02f) + u(rng) * (0.0f - std::log(0.02f));
  for (float& v : dt) v = 0.3f * n(rng);
  for (float& v : norm_w) v = 1.0f + 0.2f * n(rng);
  std::vector<float> state(size_t(n_slots) * s.state_floats());
  for (float& v : state) v = 0.3f * n(rng);
  // CPU: each sequence on its own copy of its slot.
  std::vector<float> want(size_t(T) * s.vd()), cpu_state = state;
  int t0 = 0;
  for (int c = 0; c < 3; ++c) {
    float* st = cpu_state.data() + size_t(slots[c]) * s.state_floats();
    if (fresh[c]) std::fill(st, st + s.state_floats(), 0.0f);
    cpu::DeltaNetParams p;
    p.nk = s.nk, p.nv = s.nv, p.dk = s.dk, p.dv = s.dv, p.conv = s.conv, p.grouped = s.grouped;
    p.n_tokens = lens[c];
    p.proj = proj.data() + size_t(t0) * s.width();
    p.ld_proj = s.width();
    p.conv_w = conv_w.data(), p.a_log = a_log.data(), p.dt_bias = dt.data(), p.norm_w = norm_w.data();
    p.conv_state = st;
    p.state = st + size_t(s.conv - 1) * s.cd();
    p.out = want.data() + size_t(t0) * s.vd();
    p.ld_out = s.vd();
    cpu::delta_net_forward(p, serial);
    t0 += lens[c];
  }
  // GPU: one launch for the batch.
  test::DevBuf<float> d_proj, d_conv, d_alog, d_dt, d_norm, d_state, d_y(size_t(T) * s.cd());
  d_proj.upload(proj), d_conv.upload(conv_w), d_alog.upload(a_log), d_dt.upload(dt), d_norm.upload(norm_w);
  d_state.upload(state);
  test::DevBuf<uint16_t> d_out(size_t(T) * s.vd());
  d_out.poison();
  std::vector<cuda::DeltaNetChunk> chunks;
  t0 = 0;
  for (int c = 0; c < 3; ++c) chunks.push_back({t0, lens[c], slots[c], fresh[c]}), t0 += lens[c];
  test::DevBuf<cuda::DeltaNetChunk> d_chunks;
  d_chunks.upload(chunks);
  cuda::DeltaNetParams g;
  g.nk = s.nk, g.nv = s.nv, g.dk = s.dk, g.dv = s.dv, g.conv = s.conv, g.grouped = s.grouped;
  g.proj = d_proj.get(), g.ld_proj = s.width();
  g.conv_w = d_conv.get(), g.a_log = d_alog.get(), g.dt_bias = d_dt.get(), g.norm_w = d_norm.get();
  g.state = d_state.get(), g.slot_floats = s.state_floats(), g.layer_offset = 0;
  g.chunks = d_chunks.get(), g.n_chunks = 3, g.n_tokens = T;
  g.y = d_y.get(), g.out = d_out.get();
  cuda::launch_delta_net(g, nullptr);
  const std::vector<uint16_t> got = d_out.download();
  const std::vector<float> got_state = d_state.download();
  for (int t = 0; t < T; ++t) {
    double mx = 0, amax = 0;
    for (int i = 0; i < s.vd(); ++i) {
      const double w = want[size_t(t) * s.vd() + i], v = test::bf16f(got[size_t(t) * s.vd() + i]);
      ASSERT_TRUE(std::isfinite(v)) << "token " << t;
      mx = std::max(mx, std::abs(v - w));
      amax = std::max(amax, std::abs(w));
    }
    // bf16 output: 2^-8 relative rounding, plus fp32 accumulation-order differences
    ASSERT_LE(mx, 8e-3 * amax + 1e-6) << "token " << t;
  }
  double mx = 0, amax = 0;
  for (size_t i = 0; i < state.size(); ++i) {
    mx = std::max(mx, double(std::abs(got_state[i] - cpu_state[i])));
    amax = std::max(amax, double(std::abs(cpu_state[i])));
  }
  EXPECT_LE(mx, 1e-4 * amax) << "state";
}

TEST(CudaDeltaNet, MatchesTheCpuRecurrence) {
  NINFER_REQUIRE_GPU();
  const Shape shapes[] = {{2, 4, 32, 32, 4, false}, {2, 4, 32, 32, 4, true}, {16, 32, 128, 128, 4, false},
                          {16, 32, 128, 128, 4, true}, {3, 6, 16, 64, 2, false}};
  uint32_t seed = 5;
  for (const Shape& s : shapes)
    for (bool adv : {false, true}) check(s, adv, seed++);
}

}  // namespace
}  // namespace ninfer
