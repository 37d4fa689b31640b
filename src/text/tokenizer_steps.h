// Internal to src/text: the pipeline stages of a Hugging Face tokenizer.json besides the
// model, each parsed from its JSON object and applied the way the Rust `tokenizers` crate
// applies it.
//   Normalizer     text -> text              Sequence, Replace, Prepend, Strip,
//                                            NFC, NFD, NFKC, NFKD (utf8proc)
//   PreTokenizer   text -> pieces            Sequence, Split, ByteLevel, Metaspace, Digits
//   Decoder        token strings -> text     Sequence, ByteLevel, Replace, ByteFallback,
//                                            Fuse, Strip, Metaspace
//   PostProcessor  ids -> ids with specials  TemplateProcessing, ByteLevel, Roberta, Bert,
//                                            Sequence
// Any other type is an Error naming the stage, the type and the file.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/regex.h"

namespace ninfer::tok {

using json = nlohmann::json;

// A token id field: an integer in [0, INT32_MAX] (not a float, not past int32: nlohmann's own
// conversion of 1e308 to int is undefined behaviour); an Error naming `what` and `field` otherwise.
int32_t json_token_id(const json& v, std::string_view what, std::string_view field);

class Normalizer {
 public:
  // j is tokenizer.json's "normalizer" (null = none). `what` names the file.
  static Normalizer parse(const json& j, std::string_view what);
  std::string apply(std::string s) const;
  enum class Form { NFC, NFD, NFKC, NFKD };

 private:
  enum class Kind { Replace, Prepend, Strip, Unicode };
  struct Step {
    Kind kind;
    std::shared_ptr<const Regex> re{};
    std::string content{};
    bool left = false, right = false;
    Form form = Form::NFC;  // Unicode
  };
  void add(const json& j, std::string_view what);
  std::vector<Step> steps_;
};

// A pre-token: its text and whether it starts at offset 0 of the input (Metaspace's
// prepend_scheme "first" prepends only there).
struct Piece {
  std::string text;
  bool at_origin = false;
};

// Unicode normalization of valid UTF-8 text (Throws Error if utf8proc refuses it).
std::string unicode_normalize(std::string_view s, Normalizer::Form form);

class PreTokenizer {
 public:
  static PreTokenizer parse(const json& j, std::string_view what);
  void apply(std::vector<Piece>& pieces) const;

 private:
  enum class Kind { Split, ByteLevel, Metaspace };
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  struct Step {
    Kind kind;
    std::shared_ptr<const Regex> re{};  // Split pattern; ByteLevel's regex when use_regex
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    std::string replacement{};      // Metaspace
    enum class Prepend { Always, First, Never } prepend = Prepend::Always;
    bool split = true;  // Metaspace
  };
  void add(const json& j, std::string_view what);
  static void split(const Regex& re, Behavior behavior, bool invert, const Piece& in,
                    std::vector<Piece>& out);
  std::vector<Step> steps_;
};

class Decoder {
 public:
  static Decoder parse(const json& j, std::string_view what);
  // The whole chain over the token strings of a decode() call, concatenated (bytes; may
  // hold invalid UTF-8 that the caller repairs).
  std::string decode(std::vector<std::string> tokens) const;
  // The bytes one token contributes in the middle of a text: the per-token steps only
  // (ByteLevel, Replace, ByteFallback, Metaspace's replacement), no start-of-text stripping.
  std::string piece(std::string_view token) const;
  // Leading spaces the chain removes from the start of a text (Strip after Fuse, or
  // Metaspace's prefix); a streaming decoder removes them from its first output.
  size_t leading_strip() const { return leading_strip_; }

 private:
  enum class Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace };
  struct Step {
    Kind kind;
    std::shared_ptr<const Regex> re{};
    std::string content{};   // Replace: replacement; Strip: the char; Metaspace: replacement
    size_t start = 0, stop = 0;  // Strip
    bool strip_first = false;    // Metaspace: prepend_scheme != never
  };
  void add(const json& j, std::string_view what);
  bool none_ = true;  // no decoder: tokens are joined with ' ' (Hugging Face's default)
  size_t leading_strip_ = 0;
  std::vector<Step> steps_;
};

class PostProcessor {
 public:
  static PostProcessor parse(const json& j, std::string_view what);
  // The special-token ids a single sequence gets before and after it.
  const std::vector<int32_t>& prefix() const { return before_; }
  const std::vector<int32_t>& suffix() const { return after_; }

 private:
  std::vector<int32_t> before_, after_;
  void add(const json& j, std::string_view what);
};

}  // namespace ninfer::tok
