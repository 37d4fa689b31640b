// BPE merge loop (see bpe.h). Symbols form a doubly linked list over a vector; a min-heap
// holds candidate merges (rank, left position). A popped candidate is applied only if it is
// still current: its left symbol is alive, has a right neighbour, and that pair still maps
// to the same merge (the same staleness check as Hugging Face's Word::merge_all).
#include "text/bpe.h"

#include <fmt/format.h>

#include <queue>

#include "core/error.h"
#include "text/utf8.h"

namespace ninfer {

BpeModel::BpeModel(TokenMap vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions opts, std::string_view what)
    : vocab_(std::move(vocab)), opts_(std::move(opts)) {
  if (opts_.unk_token) {
    auto it = vocab_.find(*opts_.unk_token);
    if (it == vocab_.end()) fail("{}: model.unk_token '{}' is not in model.vocab", what, *opts_.unk_token);
    unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(fmt::format("<0x{:02X}>", b));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  merges_.reserve(merges.size());
  const std::string& prefix = opts_.continuing_subword_prefix;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia == vocab_.end() || ib == vocab_.end())
      fail("{}: merge #{} '{} {}' uses a token that is not in model.vocab", what, rank, a, b);
    std::string_view tail = b;
    if (!prefix.empty() && tail.starts_with(prefix)) tail.remove_prefix(prefix.size());
    std::string merged = a + std::string(tail);
    auto im = vocab_.find(merged);
    if (im == vocab_.end())
      fail("{}: merge #{} '{} {}' produces '{}', which is not in model.vocab", what, rank, a, b, merged);
    // NOTE: a repeated pair keeps its last rank, as Hugging Face's HashMap collect does.
    merges_[pair_key(ia->second, ib->second)] = Merge{static_cast<uint32_t>(rank), im->second};
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::tokenize(std::string_view w, std::vector<int32_t>& out) const {
  if (w.empty()) return;
  if (opts_.ignore_merges) {
    if (auto id = token_to_id(w)) {
      out.push_back(*id);
      return;
    }
  }

  // 1. Characters -> initial symbols.
  std::vector<int32_t> ids;
  ids.reserve(w.size());
  int32_t pending_unk = -1;  // an unk not yet emitted (fuse_unk may extend it), or -1
  std::string scratch;
  const bool affixes = !opts_.continuing_subword_prefix.empty() || !opts_.end_of_word_suffix.empty();
  size_t i = 0;
  while (i < w.size()) {
    size_t n = utf8::valid_char_len(w, i);
    if (n == 0) n = 1;  // callers pass valid UTF-8; be safe anyway
    std::string_view ch = w.substr(i, n);
    if (affixes) {
      scratch.clear();
      if (i != 0) scratch += opts_.continuing_subword_prefix;
      scratch += ch;
      if (i + n == w.size()) scratch += opts_.end_of_word_suffix;
      ch = scratch;
    }
    i += n;
    auto it = vocab_.find(ch);
    if (it != vocab_.end()) {
      if (pending_unk >= 0) {
        ids.push_back(pending_unk);
        pending_unk = -1;
      }
      ids.push_back(it->second);
      continue;
    }
    if (opts_.byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        // NOTE: a pending unk is not flushed first; Hugging Face orders them the same way.
        for (char c : ch) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !opts_.fuse_unk) ids.push_back(pending_unk);
      pending_unk = *unk_id_;
    }
    // Without an unk token an unknown character is dropped, as in Hugging Face.
  }
  if (pending_unk >= 0) ids.push_back(pending_unk);

  const size_t n_sym = ids.size();
  if (n_sym <= 1 || merges_.empty()) {
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }

  // 2. Merge loop.
  std::vector<int32_t> prev(n_sym), next(n_sym);
  std::vector<uint8_t> alive(n_sym, 1);
  for (size_t k = 0; k < n_sym; ++k) {
    prev[k] = static_cast<int32_t>(k) - 1;
    next[k] = k + 1 < n_sym ? static_cast<int32_t>(k + 1) : -1;
  }
  struct Cand {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    auto it = merges_.find(pair_key(ids[pos], ids[next[pos]]));
    if (it != merges_.end()) heap.push(Cand{it->second.rank, pos, it->second.new_id});
  };
  for (size_t k = 0; k + 1 < n_sym; ++k) consider(static_cast<int32_t>(k));
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    if (!alive[c.pos] || next[c.pos] < 0) continue;
    int32_t r = next[c.pos];
    auto it = merges_.find(pair_key(ids[c.pos], ids[r]));
    if (it == merges_.end() || it->second.new_id != c.new_id) continue;  // stale
    ids[c.pos] = c.new_id;
    alive[r] = 0;
    next[c.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.pos;
    consider(prev[c.pos]);
    consider(c.pos);
  }
  for (int32_t k = 0; k >= 0; k = next[k]) out.push_back(ids[k]);
}

}  // namespace ninfer
