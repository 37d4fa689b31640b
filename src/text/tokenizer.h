// Tokenizer: a Hugging Face tokenizer.json (BPE model: byte-level GPT-2/Qwen/Llama-3 style
// or SentencePiece style with byte fallback) plus tokenizer_config.json (BOS/EOS tokens,
// add_bos_token, chat template). Encoding follows the `tokenizers` crate: added/special
// tokens are found in the raw text first (leftmost, longest), the text between them is
// normalized, pre-tokenized and run through BPE, then the post-processor adds BOS/EOS.
//
// A Tokenizer is immutable after load() and cheap to copy (shared state); all methods are
// const and safe to call from several threads.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {

class Tokenizer {
  struct Impl;

 public:
  // Reads model_dir/tokenizer.json and, if present, tokenizer_config.json (and
  // chat_template.jinja when the config has no template). Throws Error naming the file and
  // field on malformed or unsupported input.
  static Tokenizer load(const std::filesystem::path& model_dir);
  // The same from explicit paths; an empty config path means "no tokenizer_config.json".
  static Tokenizer from_files(const std::filesystem::path& tokenizer_json,
                              const std::filesystem::path& tokenizer_config_json = {});

  // The longest text encode() takes, in bytes. NOTE: 64 MiB is about 16M tokens, 16x the
  // longest context ninfer runs (1M tokens); the bound keeps every position within the BPE's
  // int32 symbol arrays and caps the work (and memory) one call can be made to do.
  static constexpr size_t kMaxEncodeBytes = size_t(64) << 20;

  // add_special: add what the post-processor / add_bos_token / add_eos_token asks for
  // (e.g. BOS). Special and added tokens written in `text` are always recognised.
  // Throws Error if text is not valid UTF-8 or is longer than kMaxEncodeBytes.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const;

  // Ids with no token (outside the vocabulary) are skipped, as in Hugging Face. Invalid
  // UTF-8 that the tokens spell (e.g. half a character) comes out as U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The raw bytes one token stands for in the middle of a text ("Ġthe" -> " the",
  // "▁the" -> " the", "<0x0A>" -> "\n"); may be part of a UTF-8 character. "" for an
  // unknown id.
  std::string token_piece(int32_t id) const;

  // Incremental decoding for streaming: push() returns the newly completed text, holding
  // back the bytes of a UTF-8 character that is not complete yet; what it returns is always
  // valid UTF-8 (bytes that can never complete become U+FFFD). flush() returns what is
  // held back. The concatenated output equals decode() of the same ids, except that a
  // sequence of invalid bytes may get a different number of U+FFFD.
  class StreamDecoder {
   public:
    explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false);
    std::string push(int32_t id);
    std::string flush();

   private:
    std::shared_ptr<const Impl> impl_;
    bool skip_special_;
    size_t strip_left_;    // leading spaces still to remove at the start of the text
    std::string pending_;  // bytes not yet returned
  };

  int32_t vocab_size() const;  // highest token id + 1
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> token_id(std::string_view token) const;  // exact vocab/added lookup
  std::string token_text(int32_t id) const;  // the vocabulary string ("Ġthe"), "" if unknown
  bool is_special(int32_t id) const;
  const std::string& chat_template() const;  // "" if none
  // The same tokenizer with another chat template (--chat-template FILE).
  Tokenizer with_chat_template(std::string chat_template) const;
  std::string bos_token() const;             // "" if none
  std::string eos_token() const;             // "" if none

 private:
  // from_files without the conversion of nlohmann's type errors into an Error.
  static Tokenizer from_files_checked(const std::filesystem::path& tokenizer_json,
                                      const std::filesystem::path& tokenizer_config_json);
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ninfer
