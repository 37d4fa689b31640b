// Paged KV-cache bookkeeping, independent of format and backend: a pool of fixed-size pages
// (kPageSize tokens each; the same page id indexes every layer's K and V pools) and a block
// table per sequence (logical page i of the sequence -> physical page id). Backends own the
// page memory; this class decides which pages a sequence uses.
//
// Prefix caching. A full page can be published under a key (the engine's hash chain of the
// tokens up to and including the page: page_key below). A published page may then be attached
// read-only to other sequences: every page carries a reference count (the block tables holding
// it). When the count drops to zero a published page is not freed but kept, unreferenced, in
// an LRU list; reserve() takes never-published free pages first and evicts the least recently
// released cached page only when none is left. So n_free() counts both (pages a reserve can
// get), n_cached() the unreferenced cached ones, and n_used() the referenced ones:
//   n_used() + n_free() == n_pages(),  n_cached() <= n_free().
// A page with more than one reference, or a published one, is never written again (the
// engine checks it before every write: writable()).
#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace ninfer {

constexpr int kPageSize = 64;

inline int pages_for_tokens(int64_t n_tokens) { return int((n_tokens + kPageSize - 1) / kPageSize); }

// The key of a full page: a 64-bit hash of the previous page's key (the chain's seed for page 0)
// and the page's kPageSize tokens. Equal keys are also checked against the stored tokens and
// parent key before a page is shared (PageTable::lookup), so a hash collision cannot hand a
// sequence someone else's KV.
uint64_t page_key(uint64_t parent, std::span<const int32_t> tokens);
// A chain seed from any bytes (model identity, KV format, rope settings).
uint64_t hash_bytes(uint64_t seed, const void* data, size_t n);

class PageTable {
 public:
  // shuffle_seed != 0 hands out physical pages in a pseudo-random order (tests use it to check
  // that results do not depend on physical placement).
  explicit PageTable(int n_pages, uint64_t shuffle_seed = 0);

  int n_pages() const { return n_pages_; }
  // Pages reserve() can hand out: never-published free pages + unreferenced cached pages.
  int n_free() const { return int(free_.size() + lru_.size()); }
  // Pages referenced by at least one sequence (a shared page counts once).
  int n_used() const { return n_pages_ - n_free(); }
  // Unreferenced pages kept for prefix reuse (evicted, oldest first, when reserve needs them).
  int n_cached() const { return int(lru_.size()); }
  // Published pages (referenced or not) that lookup() can find.
  int n_published() const { return int(index_.size()); }
  uint64_t evictions() const { return evictions_; }

  int32_t create_sequence();
  bool has_sequence(int32_t seq) const { return seqs_.count(seq) != 0; }
  // Makes the sequence's block table cover n_tokens tokens. Returns false (allocating
  // nothing) when the pool has too few free pages.
  bool reserve(int32_t seq, int64_t n_tokens);
  // Drops the sequence's reference to each of its pages and forgets it. A page left without
  // references returns to the free list, or to the LRU of cached pages when it is published.
  void release(int32_t seq);
  const std::vector<int32_t>& block_table(int32_t seq) const;
  int n_sequences() const { return int(seqs_.size()); }

  // The published page under `key` whose stored parent key and tokens equal these, or -1.
  int32_t lookup(uint64_t key, uint64_t parent, std::span<const int32_t> tokens) const;
  // Appends a published page to the block table of `seq` (which must cover a whole number of
  // pages), taking a reference; an unreferenced page leaves the LRU.
  void attach(int32_t seq, int32_t page);
  // Publishes logical page `index` of `seq` (a full page: tokens.size() == kPageSize) under
  // key. Returns false, changing nothing, when the key is already published (another sequence
  // computed the same page first): the page stays private to its sequences.
  bool publish(int32_t seq, int index, uint64_t key, uint64_t parent, std::span<const int32_t> tokens);
  int refs(int32_t page) const { return info_[size_t(page)].refs; }
  bool is_published(int32_t page) const { return info_[size_t(page)].published; }
  // True when a forward may write the page: one reference and not published.
  bool writable(int32_t page) const { return refs(page) == 1 && !is_published(page); }
  // Forgets every published page (unreferenced ones become free): the KV format changed.
  void drop_cache();

 private:
  struct PageInfo {
    int refs = 0;
    bool published = false;
    uint64_t key = 0, parent = 0;
    std::vector<int32_t> tokens;            // [kPageSize] when published
    std::list<int32_t>::iterator lru_pos;   // valid when published and refs == 0
  };
  int32_t take_page();
  void unpublish(int32_t page);

  int n_pages_;
  std::vector<int32_t> free_;  // stack of free, unpublished page ids
  std::list<int32_t> lru_;     // unreferenced published pages, least recently released first
  std::vector<PageInfo> info_;
  std::unordered_map<uint64_t, int32_t> index_;  // key -> published page
  std::unordered_map<int32_t, std::vector<int32_t>> seqs_;
  int32_t next_seq_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace ninfer
