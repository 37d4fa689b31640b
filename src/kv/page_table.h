// Paged KV-cache bookkeeping, independent of format and backend: a pool of fixed-size pages
// (kPageSize tokens each; the same page id indexes every layer's K and V pools) and a block
// table per sequence (logical page i of the sequence -> physical page id). Backends own the
// page memory; this class decides which pages a sequence uses.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ninfer {

constexpr int kPageSize = 64;

inline int pages_for_tokens(int64_t n_tokens) { return int((n_tokens + kPageSize - 1) / kPageSize); }

class PageTable {
 public:
  // shuffle_seed != 0 hands out physical pages in a pseudo-random order (tests use it to check
  // that results do not depend on physical placement).
  explicit PageTable(int n_pages, uint64_t shuffle_seed = 0);

  int n_pages() const { return n_pages_; }
  int n_free() const { return int(free_.size()); }
  int n_used() const { return n_pages_ - n_free(); }

  int32_t create_sequence();
  bool has_sequence(int32_t seq) const { return seqs_.count(seq) != 0; }
  // Makes the sequence's block table cover n_tokens tokens. Returns false (allocating
  // nothing) when the pool has too few free pages.
  bool reserve(int32_t seq, int64_t n_tokens);
  // Frees every page of the sequence and forgets it.
  void release(int32_t seq);
  const std::vector<int32_t>& block_table(int32_t seq) const;
  int n_sequences() const { return int(seqs_.size()); }

 private:
  int n_pages_;
  std::vector<int32_t> free_;  // stack of free page ids
  std::unordered_map<int32_t, std::vector<int32_t>> seqs_;
  int32_t next_seq_ = 0;
};

}  // namespace ninfer
