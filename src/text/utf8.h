// UTF-8 helpers shared by the tokenizer and the chat-template interpreter. Strings are raw
// bytes (std::string); these functions find code-point boundaries, encode code points, and
// repair invalid sequences the way Rust's String::from_utf8_lossy does (one U+FFFD per
// maximal invalid subpart), which is what Hugging Face tokenizers' decoders produce.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ninfer::utf8 {

// Length in bytes of the valid code point starting at s[i], or 0 if the bytes there are
// not a complete, well-formed UTF-8 sequence (overlong forms and surrogates are invalid).
size_t valid_char_len(std::string_view s, size_t i);

// Length of the longest prefix of s that could still become a valid sequence if more
// bytes arrived (1..3), or 0 if s[i] starts no valid prefix. Used by streaming decoders.
size_t incomplete_prefix_len(std::string_view s, size_t i);

// Byte offset of the first invalid byte, or s.size() if all of s is valid UTF-8.
size_t first_invalid(std::string_view s);

// s with every maximal invalid subpart replaced by U+FFFD.
std::string lossy(std::string_view s);

void append_codepoint(std::string& out, char32_t cp);

// Decodes the code point at s[i] (must be valid); advances i past it.
char32_t next_codepoint(std::string_view s, size_t& i);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

}  // namespace ninfer::utf8
