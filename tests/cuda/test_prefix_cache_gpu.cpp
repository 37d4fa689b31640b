// The prefix cache on the CUDA backend: a request whose first pages come from the cache
// (shared with a live sequence that diverged after them) gives the logits of the same request
// run without the cache, for every KV format the GPU runs; and a freed, diverged sequence
// leaves the shared pages intact. The oracle is the uncached run on the same backend.
// Models: the tiny Llama of tests/data (in the tree, so it travels to any GPU machine) and
// ref-qwen3-d256 from ../shared where present.
//
// Tolerances. With page-sized prefill chunks both runs compute every page with the same
// chunk, the same kernels and the same encoders (bit-exact with the CPU codecs), so the KV
// bytes are equal and only a reduction whose order depends on physical page placement could
// differ: 1e-3 of the largest logit, far below any real error (a page read from the wrong
// sequence moves logits by O(1)). With the default chunking (512) the cached run's tail is a
// shorter GEMM than the uncached one's (other cuBLAS tiles, other bf16 roundings, lossy codes
// that may land on the other side of a quantizer boundary): the bf16-mode model bound of
// test_cuda_golden, 3e-2.
#include <algorithm>
#include <filesystem>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "kv/format.h"
#include "runtime/engine.h"
#include "test_paths.h"

namespace ninfer {
namespace {

struct Model {
  std::string name;
  std::filesystem::path dir;
  int vocab;
};

// The tiny Llama's weights beside a tokenizer of the test data (the engine loads one; these
// tests feed token ids and never use it), in a directory of links made once.
std::filesystem::path tiny_model_dir() {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / "ninfer_test_prefix_cache_tiny";
  const fs::path src = test::test_data_dir() / "tiny" / "llama-rope-default";
  fs::create_directories(d);
  for (const fs::path& f : {src / "config.json", src / "model.safetensors",
                            test::test_data_dir() / "tokenizers" / "llama3-tiny" / "tokenizer.json"})
    if (!fs::exists(d / f.filename())) fs::create_symlink(f, d / f.filename());
  return d;
}

// The models present here; the tiny one always is.
std::vector<Model> models() {
  std::vector<Model> m{{"tiny llama", tiny_model_dir(), 256}};
  if (std::filesystem::exists(test::model_dir("ref-qwen3-d256") / "config.json"))
    m.push_back({"ref-qwen3-d256", test::model_dir("ref-qwen3-d256"), 8192});
  return m;
}

std::unique_ptr<Engine> make(const Model& m, const std::string& kv, bool cache, int chunk, uint64_t shuffle = 0) {
  EngineOptions o;
  o.device = "cuda";
  o.kv_dtype = kv;
  o.max_context = 1024;
  o.kv_capacity = 4096;
  o.prefill_chunk = chunk;
  o.page_shuffle_seed = shuffle;
  o.prefix_cache = cache;
  o.quiet = true;
  return Engine::create(m.dir, o);
}

std::vector<int32_t> tokens(const Model& m, int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t(3 + (i * 131 + salt * 977) % (m.vocab - 3)));
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Prefill (attaching any cached prefix) and `n_decode` greedy steps; the logits after each,
// concatenated. With keep, the sequence stays alive and its id is stored there.
std::vector<float> run(Engine& e, const std::vector<int32_t>& prompt, int n_decode, int32_t* keep = nullptr) {
  const int32_t s = e.new_sequence();
  std::vector<float> logits, all;
  e.prefill(s, prompt, logits);
  all = logits;
  for (int i = 0; i < n_decode; ++i) {
    const int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    StepItem item{s, {&t, 1}, false};
    e.step({&item, 1}, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  if (keep) *keep = s;
  else e.free_sequence(s);
  return all;
}

double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  if (got.size() != want.size()) return INFINITY;
  return test::max_rel_err(got.data(), want.data(), int(want.size()));
}

TEST(CudaPrefixCache, CachedPrefixLogitsMatchUncachedForEveryGpuFormat) {
  NINFER_REQUIRE_GPU();
  for (const Model& m : models()) {
  SCOPED_TRACE(m.name);
  const std::vector<int32_t> shared = tokens(m, 5 * kPageSize, 1);
  const std::vector<int32_t> a = concat(shared, tokens(m, 41, 2)), b = concat(shared, tokens(m, 29, 3));
  int tested = 0;
  for (const KvFormat* f : kv_formats()) {
    const std::string kv(f->name);
    if (!cuda_supports_kv_format(kv)) continue;
    SCOPED_TRACE(kv);
    ++tested;
    auto ref = make(m, kv, false, kPageSize);
    auto e = make(m, kv, true, kPageSize, 31337);
    ASSERT_TRUE(e->prefix_cache_enabled());
    const std::vector<float> ref_a = run(*ref, a, 4), ref_b = run(*ref, b, 4);
    int32_t sa = -1, sb = -1;
    const std::vector<float> got_a = run(*e, a, 4, &sa);
    const std::vector<float> got_b = run(*e, b, 4, &sb);  // shares a's 5 pages while a lives
    EXPECT_EQ(e->prefix_cache_stats().hits, uint64_t(shared.size()));
    EXPECT_EQ(e->pages().block_table(sa)[0], e->pages().block_table(sb)[0]);
    EXPECT_LE(rel_err(got_a, ref_a), 1e-3);
    EXPECT_LE(rel_err(got_b, ref_b), 1e-3);
    e->free_sequence(sa);
    e->free_sequence(sb);
    // a again from the pages b shared and decoded next to.
    EXPECT_LE(rel_err(run(*e, a, 4), ref_a), 1e-3);
    EXPECT_EQ(e->prefix_cache_stats().hits, uint64_t(2 * shared.size()));
    EXPECT_EQ(e->pages().n_used(), 0);
  }
  EXPECT_GE(tested, 8) << "every shipped format runs on the GPU";
  }
}

TEST(CudaPrefixCache, DefaultChunkingWithinTheModelBound) {
  NINFER_REQUIRE_GPU();
  for (const Model& m : models())
  for (const char* kv : {"bf16", "rk2v4-e8"}) {
    SCOPED_TRACE(m.name + " " + kv);
    const std::vector<int32_t> first = tokens(m, 700, 4);
    const std::vector<int32_t> second =
        concat(std::vector<int32_t>(first.begin(), first.begin() + 10 * kPageSize), tokens(m, 150, 5));
    auto ref = make(m, kv, false, 512);
    auto e = make(m, kv, true, 512);
    run(*e, first, 0);
    const std::vector<float> got = run(*e, second, 3);
    EXPECT_EQ(e->prefix_cache_stats().hits, uint64_t(10 * kPageSize));
    EXPECT_LE(rel_err(got, run(*ref, second, 3)), 3e-2);
  }
}

}  // namespace
}  // namespace ninfer
