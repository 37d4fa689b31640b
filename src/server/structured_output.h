// Structured output at the token level: a JsonMatcher (json_schema.h) turned into the
// scheduler's TokenConstraint. Each step, the vocabulary's byte trie is walked from the
// matcher's state: a token is allowed when every byte of it may come next, and a subtree is
// skipped at its first byte that may not; the end tokens are allowed when the JSON is
// complete. One constraint per sequence (it holds that sequence's matcher state).
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/token_constraint.h"
#include "server/json_schema.h"
#include "text/tokenizer.h"

namespace ninfer::server {

// The vocabulary's token bytes as a trie (special tokens and empty pieces left out). Built
// once per server; read-only afterwards.
class VocabTrie {
 public:
  explicit VocabTrie(const Tokenizer& tok);
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> kids;  // (byte, node), sorted by byte
    std::vector<int32_t> tokens;                    // tokens whose bytes end here
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::string& piece(int32_t id) const { return pieces_[size_t(id)]; }
  int32_t size() const { return int32_t(pieces_.size()); }

 private:
  std::vector<Node> nodes_;
  std::vector<std::string> pieces_;
};

class JsonConstraint : public TokenConstraint {
 public:
  // end_ids: the tokens that end the request (allowed once the JSON is complete).
  JsonConstraint(std::shared_ptr<const VocabTrie> trie, std::shared_ptr<const JsonGrammar> g,
                 std::vector<int32_t> end_ids);
  bool mask(std::span<float> logits) override;
  void accept(int32_t token) override;
  bool done() const override;

 private:
  void walk(int32_t node, const JsonMatcher::State& s);
  std::shared_ptr<const VocabTrie> trie_;
  JsonMatcher m_;
  std::vector<int32_t> end_ids_;
  std::vector<char> allowed_;
  bool ended_ = false;
};

}  // namespace ninfer::server
