// The page table's prefix-cache bookkeeping: reference counts of shared pages, publish and
// lookup (a key hit with other tokens or another parent is a miss), the LRU of unreferenced
// cached pages and its eviction order, and the invariant that every page is either referenced
// or free (n_used + n_free == n_pages) through any sequence of operations.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "kv/page_table.h"

namespace ninfer {
namespace {

std::vector<int32_t> page_tokens(int32_t base) {
  std::vector<int32_t> t(kPageSize);
  for (int i = 0; i < kPageSize; ++i) t[size_t(i)] = base + i;
  return t;
}

TEST(PrefixPages, PageKeyDependsOnParentTokensAndOrder) {
  const std::vector<int32_t> a = page_tokens(100);
  std::vector<int32_t> b = a;
  std::swap(b[3], b[4]);
  std::vector<int32_t> c = a;
  c[63] += 1;
  const uint64_t ka = page_key(7, a);
  EXPECT_EQ(ka, page_key(7, a));
  EXPECT_NE(ka, page_key(8, a));
  EXPECT_NE(ka, page_key(7, b));
  EXPECT_NE(ka, page_key(7, c));
  EXPECT_NE(hash_bytes(0, "bf16", 4), hash_bytes(0, "int8", 4));
  EXPECT_NE(hash_bytes(0, "ab", 2), hash_bytes(0, "ab\0", 3));
}

TEST(PrefixPages, SharedPagesAreCountedOnceAndCachedAfterRelease) {
  PageTable pt(6);
  const std::vector<int32_t> t0 = page_tokens(0), t1 = page_tokens(1000);
  const uint64_t k0 = page_key(1, t0), k1 = page_key(k0, t1);
  int32_t a = pt.create_sequence();
  ASSERT_TRUE(pt.reserve(a, 2 * kPageSize + 10));  // 3 pages, the last one partial
  EXPECT_TRUE(pt.publish(a, 0, k0, 1, t0));
  EXPECT_TRUE(pt.publish(a, 1, k1, k0, t1));
  EXPECT_FALSE(pt.publish(a, 1, k1, k0, t1));  // already published
  const int32_t p0 = pt.block_table(a)[0], p1 = pt.block_table(a)[1], p2 = pt.block_table(a)[2];
  EXPECT_FALSE(pt.writable(p0));
  EXPECT_TRUE(pt.writable(p2));
  EXPECT_EQ(pt.lookup(k0, 1, t0), p0);
  EXPECT_EQ(pt.lookup(k1, k0, t1), p1);
  // A key hit whose stored tokens or parent differ is a miss (what a collision would look like).
  EXPECT_EQ(pt.lookup(k0, 1, t1), -1);
  EXPECT_EQ(pt.lookup(k1, 2, t1), -1);
  EXPECT_EQ(pt.lookup(k0 + 1, 1, t0), -1);

  int32_t b = pt.create_sequence();
  pt.attach(b, p0);
  pt.attach(b, p1);
  EXPECT_EQ(pt.refs(p0), 2);
  EXPECT_EQ(pt.n_used(), 3);  // p0 and p1 counted once
  ASSERT_TRUE(pt.reserve(b, 2 * kPageSize + 1));
  EXPECT_EQ(pt.n_used(), 4);
  EXPECT_NE(pt.block_table(b)[2], p2);

  pt.release(a);  // p0, p1 still held by b; p2 back to the free list
  EXPECT_EQ(pt.refs(p0), 1);
  EXPECT_EQ(pt.n_used(), 3);
  EXPECT_EQ(pt.n_cached(), 0);
  pt.release(b);  // p0, p1 unreferenced: cached, still free to take
  EXPECT_EQ(pt.n_used(), 0);
  EXPECT_EQ(pt.n_cached(), 2);
  EXPECT_EQ(pt.n_free(), 6);
  EXPECT_EQ(pt.lookup(k0, 1, t0), p0);

  // Attaching an unreferenced cached page takes it off the free count.
  int32_t c = pt.create_sequence();
  pt.attach(c, p0);
  EXPECT_EQ(pt.n_cached(), 1);
  EXPECT_EQ(pt.n_free(), 5);
  EXPECT_EQ(pt.n_used(), 1);
  pt.release(c);
  EXPECT_EQ(pt.n_cached(), 2);
  EXPECT_EQ(pt.evictions(), 0u);
}

TEST(PrefixPages, EvictsOnlyUnreferencedPagesTailOfTheChainFirst) {
  PageTable pt(4);
  std::vector<std::vector<int32_t>> toks;
  std::vector<uint64_t> keys;
  uint64_t parent = 9;
  for (int i = 0; i < 3; ++i) {
    toks.push_back(page_tokens(100 * i));
    keys.push_back(page_key(parent, toks.back()));
    parent = keys.back();
  }
  int32_t a = pt.create_sequence();
  ASSERT_TRUE(pt.reserve(a, 3 * kPageSize));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pt.publish(a, i, keys[size_t(i)], i ? keys[size_t(i - 1)] : 9, toks[size_t(i)]));
  const std::vector<int32_t> pages = pt.block_table(a);
  // A second sequence holds page 0: it must survive any pressure.
  int32_t b = pt.create_sequence();
  pt.attach(b, pages[0]);
  pt.release(a);
  EXPECT_EQ(pt.n_cached(), 2);  // pages 1 and 2
  EXPECT_EQ(pt.n_free(), 3);    // 1 never used + 2 cached
  // Pressure: one page comes from the free list, the next evicts the chain's tail (page 2)
  // before page 1.
  int32_t c = pt.create_sequence();
  ASSERT_TRUE(pt.reserve(c, 2 * kPageSize));
  EXPECT_EQ(pt.evictions(), 1u);
  EXPECT_EQ(pt.lookup(keys[2], keys[1], toks[2]), -1);
  EXPECT_EQ(pt.lookup(keys[1], keys[0], toks[1]), pages[1]);
  ASSERT_TRUE(pt.reserve(c, 3 * kPageSize));
  EXPECT_EQ(pt.evictions(), 2u);
  EXPECT_EQ(pt.lookup(keys[1], keys[0], toks[1]), -1);
  EXPECT_EQ(pt.lookup(keys[0], 9, toks[0]), pages[0]);  // referenced: never evicted
  EXPECT_FALSE(pt.reserve(c, 4 * kPageSize));           // nothing left to take
  EXPECT_EQ(pt.n_used(), 4);
  // The evicted pages are plain private pages of c now.
  for (int32_t p : pt.block_table(c)) EXPECT_TRUE(pt.writable(p));
  pt.release(c);
  pt.release(b);
  EXPECT_EQ(pt.n_used(), 0);
  EXPECT_EQ(pt.n_cached(), 1);
  pt.drop_cache();
  EXPECT_EQ(pt.n_cached(), 0);
  EXPECT_EQ(pt.n_published(), 0);
  EXPECT_EQ(pt.lookup(keys[0], 9, toks[0]), -1);
  EXPECT_EQ(pt.n_free(), 4);
}

// Random operations (seed printed): every page is referenced xor free, references equal the
// block-table occurrences, and published pages are exactly the index's.
TEST(PrefixPages, RandomOperationsKeepTheAccounting) {
  const uint64_t seed = 20261203;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int n_pages = 24;
  PageTable pt(n_pages, 77);
  std::vector<int32_t> live;
  std::vector<std::pair<uint64_t, std::vector<int32_t>>> published;  // key, tokens (parent 0)
  for (int step = 0; step < 3000; ++step) {
    const int op = int(rng() % 4);
    if (op == 0 || live.empty()) {
      int32_t s = pt.create_sequence();
      // Attach some published pages first (as the engine does for a prefix).
      for (int k = 0; k < 2 && !published.empty(); ++k) {
        const auto& [key, t] = published[rng() % published.size()];
        const int32_t p = pt.lookup(key, 0, t);
        if (p >= 0) pt.attach(s, p);
      }
      live.push_back(s);
    } else if (op == 1) {
      const int32_t s = live[rng() % live.size()];
      const int64_t have = int64_t(pt.block_table(s).size());
      pt.reserve(s, (have + 1 + int64_t(rng() % 3)) * kPageSize);
    } else if (op == 2) {
      const int32_t s = live[rng() % live.size()];
      const std::vector<int32_t>& bt = pt.block_table(s);
      if (!bt.empty()) {
        std::vector<int32_t> t = page_tokens(int32_t(rng() % 1000000));
        const uint64_t key = page_key(0, t);
        if (pt.publish(s, int(rng() % bt.size()), key, 0, t)) published.push_back({key, t});
      }
    } else {
      const size_t i = rng() % live.size();
      pt.release(live[i]);
      live.erase(live.begin() + long(i));
    }
    std::vector<int> refs(size_t(n_pages), 0);
    for (int32_t s : live)
      for (int32_t p : pt.block_table(s)) ++refs[size_t(p)];
    int used = 0;
    for (int p = 0; p < n_pages; ++p) {
      ASSERT_EQ(pt.refs(p), refs[size_t(p)]) << "page " << p << " step " << step;
      used += refs[size_t(p)] > 0;
    }
    ASSERT_EQ(pt.n_used(), used) << step;
    ASSERT_EQ(pt.n_used() + pt.n_free(), n_pages) << step;
    ASSERT_LE(pt.n_cached(), pt.n_free());
    int published_pages = 0;
    for (int p = 0; p < n_pages; ++p) published_pages += pt.is_published(p);
    ASSERT_EQ(published_pages, pt.n_published()) << step;
  }
  for (int32_t s : live) pt.release(s);
  EXPECT_EQ(pt.n_used(), 0);
  EXPECT_GT(pt.evictions(), 0u);
}

}  // namespace
}  // namespace ninfer
