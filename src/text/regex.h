// A compiled PCRE2 pattern (UTF + UCP, so \p{L}, \s, \w are Unicode-aware, JIT when
// available) and a loop over its matches. Used for tokenizer.json's Split pre-tokenizer
// and Replace normalizers, whose patterns were written for Oniguruma (Rust tokenizers);
// the constructs those patterns use behave the same in PCRE2.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ninfer {

class Regex {
 public:
  struct Options {
    bool literal = false;    // the pattern is a plain string, not a regex
    bool multiline = false;  // ^ and $ match at line breaks ('\n'), as in Oniguruma/Ruby
  };
  // Throws Error naming `what` (e.g. "tokenizer.json pre_tokenizer Split") on a bad pattern.
  Regex(std::string_view pattern, Options opts, std::string_view what);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // All non-overlapping matches in s as [begin, end) byte ranges. s must be valid UTF-8.
  // An empty match advances by one code point, as in Rust's regex iterators.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;

  // s with every match replaced by `with` (taken literally).
  std::string replace_all(std::string_view s, std::string_view with) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ninfer
