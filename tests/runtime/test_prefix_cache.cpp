// The engine's prefix cache against the same engine without it, on the reference model and the
// CPU backend. The oracle is always an independent uncached run of the same tokens:
// - with page-sized prefill chunks every page's KV is computed by the same chunk in both runs,
//   so logits with a cached prefix equal the uncached ones bitwise, for every KV format;
// - a sequence that diverges after shared pages, decodes, and is freed leaves them intact (a
//   later sequence attaching them still gets the uncached logits);
// - with the default chunking, within fp32 reassociation error (f32 cache);
// - only a chain of identical pages from the first one matches; the last token is always
//   computed; pages made by extend_by_repeating are never shared;
// - under pool pressure unreferenced cached pages are evicted (tail of a chain first) and the
//   answers stay exact; referenced pages are never evicted.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/engine.h"
#include "test_paths.h"

namespace ninfer {
namespace {

std::unique_ptr<Engine> make(const std::string& kv, bool cache, int chunk, int64_t capacity = 0,
                             uint64_t shuffle = 0, int64_t max_context = 512) {
  EngineOptions o;
  o.device = "cpu";
  o.kv_dtype = kv;
  o.max_context = max_context;
  o.kv_capacity = capacity;
  o.max_sequences = 4;
  o.prefill_chunk = chunk;
  o.page_shuffle_seed = shuffle;
  o.prefix_cache = cache;
  o.quiet = true;
  return Engine::create(test::model_dir("ref-qwen3-d256"), o);
}

// n tokens of a pattern that `salt` changes entirely.
std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t(3 + (i * 131 + salt * 977) % 8000));
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int32_t argmax(const std::vector<float>& v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

// Prefills `prompt` in a new sequence (attaching any cached prefix), then `n_decode` greedy
// steps; returns the logits after the prefill and after each step, concatenated. The sequence
// stays alive when `keep` is set (its id in *keep).
std::vector<float> run(Engine& e, const std::vector<int32_t>& prompt, int n_decode, int32_t* keep = nullptr) {
  const int32_t s = e.new_sequence();
  std::vector<float> logits, all;
  e.prefill(s, prompt, logits);
  all = logits;
  for (int i = 0; i < n_decode; ++i) {
    const int32_t t = argmax(logits);
    StepItem item{s, {&t, 1}, false};
    e.step({&item, 1}, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  if (keep) *keep = s;
  else e.free_sequence(s);
  return all;
}

TEST(PrefixCache, CachedPrefixLogitsEqualUncachedForEveryFormat) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  const std::vector<int32_t> shared = tokens(3 * kPageSize, 1);
  const std::vector<int32_t> a = concat(shared, tokens(41, 2)), b = concat(shared, tokens(29, 3));
  for (const KvFormat* f : kv_formats()) {
    const std::string kv(f->name);
    SCOPED_TRACE(kv);
    auto ref = make(kv, false, kPageSize);
    auto e = make(kv, true, kPageSize, 0, 4242);
    ASSERT_TRUE(e->prefix_cache_enabled());
    ASSERT_FALSE(ref->prefix_cache_enabled());
    const std::vector<float> ref_a = run(*ref, a, 5), ref_b = run(*ref, b, 5);
    int32_t sa = -1, sb = -1;
    const std::vector<float> got_a = run(*e, a, 5, &sa);
    EXPECT_EQ(e->prefix_cache_stats().hits, 0u);
    // b shares a's three full pages while a is alive, then decodes past them.
    const std::vector<float> got_b = run(*e, b, 5, &sb);
    EXPECT_EQ(e->prefix_cache_stats().hits, uint64_t(shared.size()));
    EXPECT_EQ(e->prefix_cache_stats().queries, uint64_t(a.size() + b.size()));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(e->pages().block_table(sa)[size_t(i)], e->pages().block_table(sb)[size_t(i)]);
      EXPECT_EQ(e->pages().refs(e->pages().block_table(sa)[size_t(i)]), 2);
    }
    EXPECT_NE(e->pages().block_table(sa)[3], e->pages().block_table(sb)[3]);  // the partial page is private
    EXPECT_EQ(got_a, ref_a);
    EXPECT_EQ(got_b, ref_b);
    e->free_sequence(sa);
    e->free_sequence(sb);
    EXPECT_EQ(e->pages().n_used(), 0);
    // a again, now entirely from pages that b read and decoded next to: had b written into a
    // shared page, these logits would differ.
    const uint64_t hits = e->prefix_cache_stats().hits;
    EXPECT_EQ(run(*e, a, 5), ref_a);
    EXPECT_EQ(e->prefix_cache_stats().hits - hits, uint64_t(shared.size()));
  }
}

TEST(PrefixCache, DefaultChunkingAgreesWithinReassociationError) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  const std::vector<int32_t> first = tokens(300, 4);
  const std::vector<int32_t> second = concat(std::vector<int32_t>(first.begin(), first.begin() + 4 * kPageSize),
                                             tokens(150, 5));
  auto ref = make("f32", false, 512);
  auto e = make("f32", true, 512);
  run(*e, first, 0);
  const std::vector<float> want = run(*ref, second, 3), got = run(*e, second, 3);
  EXPECT_EQ(e->prefix_cache_stats().hits, uint64_t(4 * kPageSize));
  ASSERT_EQ(got.size(), want.size());
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i]));
    max_err = std::max(max_err, double(std::fabs(got[i] - want[i])));
    max_ref = std::max(max_ref, double(std::fabs(want[i])));
  }
  // NOTE: the same function summed over other lengths (the chunks differ), as
  // EnginePaged.PageBoundariesAndPlacementDoNotChangeLogits bounds it.
  EXPECT_LT(max_err / max_ref, 1e-4) << max_err;
}

TEST(PrefixCache, OnlyAChainOfIdenticalPagesMatchesAndTheLastTokenIsComputed) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto e = make("bf16", true, kPageSize);
  auto ref = make("bf16", false, kPageSize);
  const std::vector<int32_t> p0 = tokens(kPageSize, 10), p1 = tokens(kPageSize, 11), p2 = tokens(kPageSize, 12);
  const std::vector<int32_t> x = tokens(kPageSize, 13);
  const std::vector<int32_t> full = concat(concat(p0, p1), p2);  // exactly 3 pages
  run(*e, full, 0);
  EXPECT_EQ(e->pages().n_published(), 3);
  // Same pages: the last page is recomputed (its last token's logits are the answer).
  EXPECT_EQ(e->match_prefix(full).n_pages, 2);
  EXPECT_EQ(e->match_prefix(concat(full, {7})).n_pages, 3);
  EXPECT_EQ(e->match_prefix(std::vector<int32_t>(p0.begin(), p0.end())).n_pages, 0);
  EXPECT_EQ(e->match_prefix(concat(p0, {7})).n_pages, 1);
  // Page 1 and 2 equal but page 0 differs: nothing (a page's KV depends on all before it).
  EXPECT_EQ(e->match_prefix(concat(concat(concat(x, p1), p2), {7})).n_pages, 0);
  // Page 0 equal, page 1 differs: one page.
  EXPECT_EQ(e->match_prefix(concat(concat(concat(p0, x), p2), {7})).n_pages, 1);
  EXPECT_EQ(e->match_prefix(full).n_unreferenced, 2);
  EXPECT_EQ(run(*e, full, 2), run(*ref, full, 2));
  EXPECT_EQ(e->prefix_cache_stats().hits, uint64_t(2 * kPageSize));
  // Short prompts never attach anything.
  EXPECT_EQ(run(*e, std::vector<int32_t>(p0.begin(), p0.begin() + 10), 1),
            run(*ref, std::vector<int32_t>(p0.begin(), p0.begin() + 10), 1));
  EXPECT_EQ(e->prefix_cache_stats().hits, uint64_t(2 * kPageSize));
}

TEST(PrefixCache, GeneratedTokensArePublishedToo) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  // A chat's next turn starts with the previous prompt and answer: pages filled during
  // decode are found as well.
  auto e = make("f32", true, kPageSize);
  GenerateOptions g;
  g.max_new_tokens = 100;
  g.ignore_eos = true;
  g.sampling.temperature = 0;
  const std::vector<int32_t> prompt = tokens(50, 20);
  GenerateResult r = e->generate(prompt, g);
  ASSERT_EQ(r.tokens.size(), 100u);
  std::vector<int32_t> next = concat(prompt, r.tokens);  // 150 tokens cached (the last one was not fed)
  next.pop_back();
  next = concat(next, tokens(20, 21));
  EXPECT_EQ(e->match_prefix(next).n_pages, 2);
}

TEST(PrefixCache, EvictionUnderPressureKeepsAnswersExact) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  // 6 pages in all; max_context 384 (one sequence may take the whole pool).
  auto e = make("rk2v4-e8", true, kPageSize, 6 * kPageSize, 99, 6 * kPageSize);
  auto ref = make("rk2v4-e8", false, kPageSize, 0, 0, 6 * kPageSize);
  ASSERT_EQ(e->pages().n_pages(), 6);
  const std::vector<int32_t> a = tokens(200, 30), b = tokens(300, 31);  // 4 and 5 pages
  const std::vector<float> ref_a = run(*ref, a, 2), ref_b = run(*ref, b, 2);
  EXPECT_EQ(run(*e, a, 2), ref_a);
  EXPECT_EQ(e->pages().n_cached(), 3);  // a's full pages; its partial page went back to the free list
  EXPECT_EQ(e->pages().n_used(), 0);
  // b needs 5 of 6 pages: 3 free ones and 2 evicted, a's chain tail first.
  EXPECT_EQ(run(*e, b, 2), ref_b);
  EXPECT_EQ(e->prefix_cache_stats().evictions, 2u);
  EXPECT_EQ(e->match_prefix(a).n_pages, 1);
  const uint64_t hits = e->prefix_cache_stats().hits;
  EXPECT_EQ(run(*e, a, 2), ref_a);
  EXPECT_EQ(e->prefix_cache_stats().hits - hits, uint64_t(kPageSize));
  EXPECT_EQ(e->pages().n_used(), 0);
  EXPECT_EQ(e->pages().n_used() + e->pages().n_free(), e->pages().n_pages());
  // A referenced page is never evicted: a live sequence holds a's first page (and one page
  // of its own), so a 5-page request finds 4 pages and fails cleanly after evicting every
  // unreferenced page; a's first page survives and a is still answered exactly.
  int32_t holder = -1;
  run(*e, concat(std::vector<int32_t>(a.begin(), a.begin() + kPageSize), {5}), 0, &holder);
  const int32_t held = e->pages().block_table(holder)[0];
  EXPECT_EQ(e->pages().refs(held), 1);
  EXPECT_TRUE(e->pages().is_published(held));
  EXPECT_EQ(e->pages().n_used(), 2);
  const int32_t s = e->new_sequence();
  std::vector<float> logits;
  EXPECT_THROW(e->prefill(s, b, logits), KvFullError);
  e->free_sequence(s);
  EXPECT_EQ(e->pages().refs(held), 1);
  EXPECT_TRUE(e->pages().is_published(held));
  EXPECT_EQ(e->match_prefix(a).n_pages, 1);
  EXPECT_EQ(run(*e, a, 2), ref_a);
  e->free_sequence(holder);
  EXPECT_EQ(e->pages().n_used(), 0);
  EXPECT_EQ(e->pages().n_used() + e->pages().n_free(), e->pages().n_pages());
}

TEST(PrefixCache, RepeatedPagesAreNeverShared) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto e = make("bf16", true, kPageSize);
  const int32_t s = e->new_sequence();
  std::vector<float> logits;
  e->prefill(s, tokens(128, 40), logits);
  e->extend_by_repeating(s, 320);
  const std::vector<int32_t> all = concat(e->sequence_tokens(s), {9});
  e->free_sequence(s);
  // Only the two pages the model computed are found; the repeated ones hold KV of other positions.
  EXPECT_EQ(e->match_prefix(all).n_pages, 2);
}

TEST(PrefixCache, OffByDefaultAndDroppedWithTheFormat) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  EngineOptions o;
  EXPECT_FALSE(o.prefix_cache);
  auto off = make("bf16", false, 512);
  const std::vector<int32_t> p = tokens(200, 50);
  run(*off, p, 0);
  run(*off, p, 0);
  EXPECT_EQ(off->prefix_cache_stats().hits, 0u);
  EXPECT_EQ(off->pages().n_published(), 0);
  auto e = make("bf16", true, 512);
  run(*e, p, 0);
  EXPECT_EQ(e->match_prefix(p).n_pages, 3);
  e->set_kv_format(find_kv_format("int8"));
  EXPECT_EQ(e->match_prefix(p).n_pages, 0);
  EXPECT_EQ(e->pages().n_free(), e->pages().n_pages());
}

}  // namespace
}  // namespace ninfer
