#include "server/structured_output.h"

#include <algorithm>
#include <limits>

namespace ninfer::server {

VocabTrie::VocabTrie(const Tokenizer& tok) {
  const int32_t n = tok.vocab_size();
  pieces_.resize(size_t(n));
  nodes_.emplace_back();
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_special(id)) continue;
    std::string p = tok.token_piece(id);
    if (p.empty()) continue;
    int32_t at = 0;
    for (char ch : p) {
      const uint8_t c = uint8_t(ch);
      auto& kids = nodes_[size_t(at)].kids;
      auto it = std::lower_bound(kids.begin(), kids.end(), c, [](const auto& k, uint8_t b) { return k.first < b; });
      if (it != kids.end() && it->first == c) {
        at = it->second;
      } else {
        const int32_t next = int32_t(nodes_.size());
        kids.insert(it, {c, next});
        nodes_.emplace_back();  // NOTE: invalidates `kids`; not used after this
        at = next;
      }
    }
    nodes_[size_t(at)].tokens.push_back(id);
    pieces_[size_t(id)] = std::move(p);
  }
}

JsonConstraint::JsonConstraint(std::shared_ptr<const VocabTrie> trie, std::shared_ptr<const JsonGrammar> g,
                               std::vector<int32_t> end_ids)
    : trie_(std::move(trie)), m_(std::move(g)), end_ids_(std::move(end_ids)) {}

void JsonConstraint::walk(int32_t node, const JsonMatcher::State& s) {
  for (const auto& [c, child] : trie_->nodes()[size_t(node)].kids) {
    JsonMatcher::State next = m_.advance(s, c);
    if (next.empty()) continue;
    for (int32_t t : trie_->nodes()[size_t(child)].tokens)
      if (size_t(t) < allowed_.size()) allowed_[size_t(t)] = 1;
    walk(child, next);
  }
}

bool JsonConstraint::mask(std::span<float> logits) {
  allowed_.assign(logits.size(), 0);
  if (!ended_) {
    walk(0, m_.state());
    if (m_.accepting())
      for (int32_t t : end_ids_)
        if (t >= 0 && size_t(t) < logits.size()) allowed_[size_t(t)] = 1;
  }
  bool any = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (allowed_[i]) any = true;
    else logits[i] = -std::numeric_limits<float>::infinity();
  }
  return any;
}

void JsonConstraint::accept(int32_t token) {
  if (std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end()) {
    ended_ = true;
    return;
  }
  // A token mask() allowed always feeds; anything else ends the constraint (nothing more is
  // allowed), so the request stops rather than emit invalid JSON.
  if (token < 0 || token >= trie_->size() || trie_->piece(token).empty() || !m_.feed(trie_->piece(token)))
    ended_ = true;
}

bool JsonConstraint::done() const { return ended_ || m_.done(); }

}  // namespace ninfer::server
