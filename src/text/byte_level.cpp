// Byte-level alphabet tables (see byte_level.h), built once on first use.
#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace ninfer::byte_level {
namespace {

// Highest code point in the alphabet: 255 + 68 unprintable bytes = U+0143.
constexpr char32_t kMaxChar = 0x143;

struct Tables {
  std::array<std::string, 256> to_char;
  std::array<int16_t, kMaxChar + 1> to_byte;
  Tables() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      utf8::append_codepoint(to_char[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_to_char(uint8_t b) { return tables().to_char[b]; }

std::optional<uint8_t> char_to_byte(char32_t cp) {
  if (cp > kMaxChar || tables().to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().to_byte[cp]);
}

std::string encode(std::string_view s) {
  const Tables& t = tables();
  std::string out;
  out.reserve(s.size() * 2);
  for (char c : s) out.append(t.to_char[static_cast<uint8_t>(c)]);
  return out;
}

std::optional<std::string> decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    char32_t cp = utf8::next_codepoint(s, i);
    auto b = char_to_byte(cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace ninfer::byte_level
