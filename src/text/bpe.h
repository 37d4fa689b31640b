// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): a vocabulary (token
// string -> id) and a ranked merge list. tokenize() turns one pre-tokenized word into ids
// exactly as Hugging Face tokenizers' BPE::merge_word does: split into characters (with
// byte_fallback to "<0xNN>" tokens or unk for characters not in the vocabulary), then
// repeatedly apply the lowest-ranked applicable merge (leftmost first on ties).
// Cost: O(n log n) in the word length n (a heap of candidate merges).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ninfer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;  // a word that is itself in the vocabulary is one token
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
};

class BpeModel {
 public:
  BpeModel() = default;
  // `merges` in rank order (rank = index). `what` names the file for error messages.
  BpeModel(TokenMap vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           BpeOptions opts, std::string_view what);

  // Appends the ids of one word to out.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  const TokenMap& vocab() const { return vocab_; }
  std::optional<int32_t> token_to_id(std::string_view token) const;

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  TokenMap vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions opts_;
  std::optional<int32_t> unk_id_;
  int32_t byte_ids_[256];  // id of "<0xNN>" or -1 (byte_fallback)
};

}  // namespace ninfer
