#include "kv/page_table.h"

#include <algorithm>
#include <random>

#include "core/error.h"

namespace ninfer {

PageTable::PageTable(int n_pages, uint64_t shuffle_seed) : n_pages_(n_pages) {
  NINFER_CHECK(n_pages >= 0, "negative page count {}", n_pages);
  free_.resize(size_t(n_pages));
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

bool PageTable::reserve(int32_t seq, int64_t n_tokens) {
  auto it = seqs_.find(seq);
  NINFER_CHECK(it != seqs_.end(), "unknown sequence {}", seq);
  std::vector<int32_t>& bt = it->second;
  int need = pages_for_tokens(n_tokens) - int(bt.size());
  if (need <= 0) return true;
  if (need > n_free()) return false;
  for (int i = 0; i < need; ++i) {
    bt.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void PageTable::release(int32_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  for (int32_t p : it->second) free_.push_back(p);
  seqs_.erase(it);
}

const std::vector<int32_t>& PageTable::block_table(int32_t seq) const {
  auto it = seqs_.find(seq);
  NINFER_CHECK(it != seqs_.end(), "unknown sequence {}", seq);
  return it->second;
}

}  // namespace ninfer
