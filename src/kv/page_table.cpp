#include "kv/page_table.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "core/error.h"

namespace ninfer {

namespace {

// NOTE: a 64-bit multiply-xorshift finaliser (odd multipliers, shifts of about half the word)
// so that every input bit reaches every output bit; the chain is not cryptographic: lookup()
// compares the tokens and parent key of a hit, so a collision costs a miss, never a wrong page.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  x ^= x >> 33;
  return x;
}

}  // namespace

uint64_t page_key(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent ^ 0x6a09e667f3bcc909ull);
  for (size_t i = 0; i < tokens.size(); i += 2) {
    const uint64_t lo = uint32_t(tokens[i]);
    const uint64_t hi = i + 1 < tokens.size() ? uint32_t(tokens[i + 1]) : 0xffffffffull;
    h = mix64(h + (lo | (hi << 32)));
  }
  return mix64(h ^ tokens.size());
}

uint64_t hash_bytes(uint64_t seed, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = mix64(seed ^ 0xbb67ae8584caa73bull);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix64(h + w);
  }
  uint64_t tail = 0;
  for (size_t k = 0; i + k < n; ++k) tail |= uint64_t(p[i + k]) << (8 * k);
  return mix64(h + tail + (uint64_t(n) << 56));
}

PageTable::PageTable(int n_pages, uint64_t shuffle_seed) : n_pages_(n_pages) {
  NINFER_CHECK(n_pages >= 0, "negative page count {}", n_pages);
  free_.resize(size_t(n_pages));
  info_.resize(size_t(n_pages));
  // Stack order: page 0 is handed out first.
  for (int i = 0; i < n_pages; ++i) free_[size_t(i)] = n_pages - 1 - i;
  if (shuffle_seed != 0) {
    std::mt19937_64 rng(shuffle_seed);
    std::shuffle(free_.begin(), free_.end(), rng);
  }
}

int32_t PageTable::create_sequence() {
  int32_t id = next_seq_++;
  seqs_.emplace(id, std::vector<int32_t>{});
  return id;
}

void PageTable::unpublish(int32_t page) {
  PageInfo& pi = info_[size_t(page)];
  NINFER_CHECK(pi.published, "page {} is not published", page);
  index_.erase(pi.key);
  pi.published = false;
  pi.tokens.clear();
  pi.tokens.shrink_to_fit();
}

int32_t PageTable::take_page() {
  int32_t p;
  if (!free_.empty()) {
    p = free_.back();
    free_.pop_back();
  } else {
    // NOTE: the least recently released cached page. A sequence releases its pages last page
    // first, so a chain's tail is evicted before its head: the prefix that stays findable is
    // as long as possible (a page whose parent was evicted is unreachable until it ages out).
    NINFER_CHECK(!lru_.empty(), "take_page with no free page");
    p = lru_.front();
    lru_.pop_front();
    unpublish(p);
    ++evictions_;
  }
  NINFER_CHECK(info_[size_t(p)].refs == 0, "page {} handed out with {} references", p, info_[size_t(p)].refs);
  info_[size_t(p)].refs = 1;
  return p;
}

bool PageTable::reserve(int32_t seq, int64_t n_tokens) {
  auto it = seqs_.find(seq);
  NINFER_CHECK(it != seqs_.end(), "unknown sequence {}", seq);
  std::vector<int32_t>& bt = it->second;
  int need = pages_for_tokens(n_tokens) - int(bt.size());
  if (need <= 0) return true;
  if (need > n_free()) return false;
  for (int i = 0; i < need; ++i) bt.push_back(take_page());
  return true;
}

void PageTable::release(int32_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  const std::vector<int32_t>& bt = it->second;
  for (size_t i = bt.size(); i-- > 0;) {
    const int32_t p = bt[i];
    PageInfo& pi = info_[size_t(p)];
    NINFER_CHECK(pi.refs > 0, "page {} released with no references", p);
    if (--pi.refs > 0) continue;
    if (pi.published) {
      lru_.push_back(p);
      pi.lru_pos = std::prev(lru_.end());
    } else {
      free_.push_back(p);
    }
  }
  seqs_.erase(it);
}

const std::vector<int32_t>& PageTable::block_table(int32_t seq) const {
  auto it = seqs_.find(seq);
  NINFER_CHECK(it != seqs_.end(), "unknown sequence {}", seq);
  return it->second;
}

int32_t PageTable::lookup(uint64_t key, uint64_t parent, std::span<const int32_t> tokens) const {
  auto it = index_.find(key);
  if (it == index_.end()) return -1;
  const PageInfo& pi = info_[size_t(it->second)];
  if (pi.parent != parent || !std::equal(tokens.begin(), tokens.end(), pi.tokens.begin(), pi.tokens.end()))
    return -1;
  return it->second;
}

void PageTable::attach(int32_t seq, int32_t page) {
  auto it = seqs_.find(seq);
  NINFER_CHECK(it != seqs_.end(), "unknown sequence {}", seq);
  NINFER_CHECK(page >= 0 && page < n_pages_, "page id {} out of range", page);
  PageInfo& pi = info_[size_t(page)];
  NINFER_CHECK(pi.published, "attach of unpublished page {}", page);
  if (pi.refs++ == 0) lru_.erase(pi.lru_pos);
  it->second.push_back(page);
}

bool PageTable::publish(int32_t seq, int index, uint64_t key, uint64_t parent, std::span<const int32_t> tokens) {
  NINFER_CHECK(tokens.size() == size_t(kPageSize), "publish of a page with {} tokens", tokens.size());
  const std::vector<int32_t>& bt = block_table(seq);
  NINFER_CHECK(index >= 0 && size_t(index) < bt.size(), "publish of page {} of a {}-page sequence", index, bt.size());
  const int32_t p = bt[size_t(index)];
  PageInfo& pi = info_[size_t(p)];
  if (pi.published || index_.count(key) != 0) return false;
  pi.published = true;
  pi.key = key;
  pi.parent = parent;
  pi.tokens.assign(tokens.begin(), tokens.end());
  index_.emplace(key, p);
  return true;
}

void PageTable::drop_cache() {
  for (int32_t p : lru_) {
    unpublish(p);
    free_.push_back(p);
  }
  lru_.clear();
  std::vector<int32_t> referenced;
  for (const auto& [key, p] : index_) referenced.push_back(p);
  for (int32_t p : referenced) unpublish(p);
}

}  // namespace ninfer
