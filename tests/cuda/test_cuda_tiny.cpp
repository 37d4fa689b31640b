// Every architecture family and rope type on the GPU (tests/data/tiny, the transformers 5.17
// checkpoints of tests/backend/test_tiny_goldens.cpp) against the CPU backend with the same
// KV format, teacher-forced: the prompt plus its golden greedy continuation in one prefill
// chunk (all logits), then the continuation again as decode steps, one token per forward
// (which take the CUDA-graph path and, for MoE, the gathered expert GEMV).
//
// Tolerances: split GEMM mode (GEMM inputs ~fp32, test_cuda_golden.cpp) leaves the attention
// roundings (Q and P to bf16: 2^-9 relative each) and, for MoE, bf16 expert inputs; the same
// cache format on both sides stores identical codes (the encoders are bit-exact), so the
// logit error / max |logit| measured on the reference models is a few 1e-3: bound 1e-2 for
// bf16 and int8 caches. Compressed caches re-round the decoded cache values (rk4v4-e8): 3e-2.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "kv/format.h"
#include "kv/page_table.h"
#include "model/config.h"
#include "model/model.h"
#include "test_paths.h"

namespace ninfer {
namespace {

using nlohmann::json;

const std::vector<std::string> kTiny = {
    "llama-rope-default", "llama-rope-linear", "llama-rope-dynamic", "llama-rope-yarn", "llama-rope-yarn-mscale",
    "llama-rope-llama3",  "llama-rope-longrope", "llama-rope-partial", "mistral-sliding", "qwen2-sliding",
    "gemma2",             "gemma3",             "gemma3-cond",        "phi3",            "granite",
    "olmo2",              "mixtral",            "qwen3-moe",          "qwen3-moe-nonorm"};

// Prefill of ids (all logits) then decode steps over `cont`; returns [ids.size() + cont.size(), vocab].
std::vector<float> run(Backend& be, const KvFormat& fmt, int vocab, const std::vector<int32_t>& ids,
                       const std::vector<int32_t>& cont) {
  PageTable pt(64, 11);
  be.init_kv(fmt, pt.n_pages());
  const int32_t seq = pt.create_sequence();
  EXPECT_TRUE(pt.reserve(seq, int64_t(ids.size() + cont.size()) + 1));
  const auto& bt = pt.block_table(seq);
  std::vector<float> all, step;
  SeqChunk ch{ids.data(), int(ids.size()), 0, bt.data(), int(bt.size()), true};
  be.forward({&ch, 1}, all);
  int pos = int(ids.size());
  for (int32_t tok : cont) {
    SeqChunk d{&tok, 1, pos++, bt.data(), int(bt.size()), false};
    be.forward({&d, 1}, step);
    all.insert(all.end(), step.begin(), step.begin() + vocab);
  }
  return all;
}

double rel_err(const float* got, const float* want, int n) {
  double e = 0, m = 0;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(got[i])) return INFINITY;
    e = std::max(e, std::fabs(double(got[i]) - want[i]));
    m = std::max(m, std::fabs(double(want[i])));
  }
  return e / m;
}

class CudaTiny : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaTiny, GpuMatchesCpu) {
  NINFER_REQUIRE_GPU();
  const std::string name = GetParam();
  const auto dir = test::test_data_dir() / "tiny" / name;
  auto m = load_model(dir);
  std::string why;
  if (!cuda_supports_model(m->config, &why)) GTEST_SKIP() << name << ": " << why;
  const json g = json::parse(read_file(dir / "golden.json"));
  CudaBackendOptions opt;
  opt.gemm_mode = CudaGemmMode::Split;
  opt.gemm_mode_from_env = false;
  auto gpu = make_cuda_backend(*m, opt);
  auto cpu = make_cpu_backend(*m, {});
  const int vocab = m->config.vocab;
  for (const char* fname : {"bf16", "int8", "rk4v4-e8"}) {
    const KvFormat& fmt = find_kv_format(fname);
    const double bound = std::string(fname) == "rk4v4-e8" ? 3e-2 : 1e-2;
    for (const json& p : g["prompts"]) {
      const std::vector<int32_t> ids = p["ids"].get<std::vector<int32_t>>();
      const std::vector<int32_t> cont = p["greedy_ids"].get<std::vector<int32_t>>();
      const std::vector<float> want = run(*cpu, fmt, vocab, ids, cont);
      const std::vector<float> got = run(*gpu, fmt, vocab, ids, cont);
      ASSERT_EQ(got.size(), want.size());
      double worst = 0;
      int at = -1;
      for (size_t t = 0; t < want.size() / size_t(vocab); ++t) {
        const double e = rel_err(got.data() + t * vocab, want.data() + t * vocab, vocab);
        if (e > worst) worst = e, at = int(t);
      }
      EXPECT_LT(worst, bound) << name << " " << fname << " prompt of " << ids.size() << " tokens, worst at row " << at;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, CudaTiny, ::testing::ValuesIn(kTiny), [](const auto& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
});

}  // namespace
}  // namespace ninfer
