// Every architecture family and rope type against transformers 5.17 (tests/data/tiny: tiny
// random-weight checkpoints made by scripts/make_tiny_models.py, fp32 goldens on the stored
// bf16 weights). The CPU backend with an exact (f32) cache must match the stored logits to
// 1e-3 relative (max abs error over the vector / max abs logit; fp32 compute on both sides,
// different summation orders: ~1e-6 expected) at every stored position, and reproduce the
// 8-token greedy continuation (eos not treated as a stop, as the goldens were made; the
// goldens' top-2 logit gap is >= 0.05 at every step, far above the error bound).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "kv/format.h"
#include "kv/page_table.h"
#include "model/config.h"
#include "model/model.h"
#include "test_paths.h"

namespace ninfer {
namespace {

using nlohmann::json;

const std::vector<std::string> kTiny = {"llama-rope-default", "llama-rope-linear", "llama-rope-dynamic", "llama-rope-yarn",
                             "llama-rope-yarn-mscale", "llama-rope-llama3", "llama-rope-longrope", "llama-rope-partial",
                             "mistral-sliding", "qwen2-sliding", "gemma2", "gemma3", "gemma3-cond", "phi3", "granite",
                             "olmo2", "mixtral", "qwen3-moe", "qwen3-moe-nonorm", "qwen3-next", "qwen3.5",
                             "qwen3.5-cond", "qwen3.5-moe"};

std::filesystem::path tiny_dir(const std::string& name) { return test::test_data_dir() / "tiny" / name; }

double rel_err(const float* got, const json& want) {
  double mx = 0, amax = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = want[i].get<double>();
    mx = std::max(mx, std::abs(double(got[i]) - w));
    amax = std::max(amax, std::abs(w));
  }
  return mx / amax;
}

// Prefills ids in chunks of `chunk` tokens (all logits), then decodes n_greedy tokens greedily.
void run(Backend& be, const Model& m, const std::vector<int32_t>& ids, int chunk, int n_greedy,
         std::vector<float>& all, std::vector<int32_t>& greedy) {
  const int vocab = m.config.vocab;
  PageTable pt(64, 7);
  be.init_kv(find_kv_format("f32"), pt.n_pages());
  be.init_state(1);  // the hybrids' DeltaNet state (slot 0); a no-op for the others
  const int32_t seq = pt.create_sequence();
  ASSERT_TRUE(pt.reserve(seq, int64_t(ids.size()) + n_greedy));
  const auto& bt = pt.block_table(seq);
  all.clear();
  std::vector<float> part;
  for (int p = 0; p < int(ids.size()); p += chunk) {
    const int n = std::min(chunk, int(ids.size()) - p);
    SeqChunk ch{ids.data() + p, n, p, bt.data(), int(bt.size()), true, 0};
    be.forward({&ch, 1}, part);
    all.insert(all.end(), part.begin(), part.end());
  }
  std::vector<float> last(all.end() - vocab, all.end());
  int pos = int(ids.size());
  greedy.clear();
  for (int i = 0; i < n_greedy; ++i) {
    const int32_t best = int32_t(std::max_element(last.begin(), last.end()) - last.begin());
    greedy.push_back(best);
    SeqChunk d{&best, 1, pos++, bt.data(), int(bt.size()), false, 0};
    be.forward({&d, 1}, last);
  }
}

class TinyGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyGolden, CpuMatchesTransformers) {
  const std::string name = GetParam();
  auto m = load_model(tiny_dir(name));
  const json g = json::parse(read_file(tiny_dir(name) / "golden.json"));
  auto be = make_cpu_backend(*m, {});
  const int vocab = m->config.vocab;
  for (const json& p : g["prompts"]) {
    const std::vector<int32_t> ids = p["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> want_greedy = p["greedy_ids"].get<std::vector<int32_t>>();
    SCOPED_TRACE(name + " prompt of " + std::to_string(ids.size()) + " tokens");
    std::vector<float> all;
    std::vector<int32_t> greedy;
    run(*be, *m, ids, int(ids.size()), int(want_greedy.size()), all, greedy);
    const auto& pos = p["positions"];
    double worst = 0;
    for (size_t i = 0; i < pos.size(); ++i) {
      const int t = pos[i].get<int>();
      const double e = rel_err(all.data() + size_t(t) * vocab, p["logits"][i]);
      worst = std::max(worst, e);
      EXPECT_LT(e, 1e-3) << "position " << t;
    }
    std::printf("%s, %zu tokens: worst relative logit error %.2e\n", name.c_str(), ids.size(), worst);
    EXPECT_EQ(greedy, want_greedy);
    // Chunked prefill (chunks of 37: not a page multiple, so chunks start mid-page and mid-window)
    // gives the same logits, except where the rope depends on each forward's length
    // (dynamic, longrope: transformers' tables are per call; model/rope.h).
    if (!rope_depends_on_length(m->config.ropes[0]) && ids.size() > 37) {
      std::vector<float> chunked;
      run(*be, *m, ids, 37, 0, chunked, greedy);
      const int t = pos[pos.size() - 1].get<int>();
      EXPECT_LT(rel_err(chunked.data() + size_t(t) * vocab, p["logits"][pos.size() - 1]), 1e-3) << "chunked";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, TinyGolden, ::testing::ValuesIn(kTiny), [](const auto& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
});

}  // namespace
}  // namespace ninfer
