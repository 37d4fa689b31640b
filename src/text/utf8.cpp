// UTF-8 validation and lossy repair (see utf8.h). Ranges follow the Unicode standard's
// table 3-7 of well-formed byte sequences.
#include "text/utf8.h"

namespace ninfer::utf8 {
namespace {

// For a lead byte, the expected sequence length and the allowed range of the second byte
// (the only byte whose range depends on the lead); 0 length = not a lead byte.
struct Lead {
  int len;
  uint8_t lo, hi;
};

Lead lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b >= 0xE1 && b <= 0xEC) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b >= 0xEE && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes from s[i] that form a valid (possibly truncated) prefix of a sequence.
size_t valid_prefix(std::string_view s, size_t i, int* want) {
  Lead L = lead_info(static_cast<uint8_t>(s[i]));
  *want = L.len;
  if (L.len == 0) return 0;
  if (L.len == 1) return 1;
  size_t n = 1;
  for (int k = 1; k < L.len && i + k < s.size(); ++k) {
    uint8_t c = static_cast<uint8_t>(s[i + k]);
    bool ok = (k == 1) ? (c >= L.lo && c <= L.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

size_t valid_char_len(std::string_view s, size_t i) {
  int want = 0;
  size_t n = valid_prefix(s, i, &want);
  return (want > 0 && n == static_cast<size_t>(want)) ? n : 0;
}

size_t incomplete_prefix_len(std::string_view s, size_t i) {
  int want = 0;
  size_t n = valid_prefix(s, i, &want);
  // Incomplete only if the prefix runs to the end of s and is shorter than the sequence.
  if (want > 1 && n < static_cast<size_t>(want) && i + n == s.size()) return n;
  return 0;
}

size_t first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = valid_char_len(s, i);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

std::string lossy(std::string_view s) {
  size_t bad = first_invalid(s);
  if (bad == s.size()) return std::string(s);
  std::string out(s.substr(0, bad));
  size_t i = bad;
  while (i < s.size()) {
    int want = 0;
    size_t n = valid_prefix(s, i, &want);
    if (want > 0 && n == static_cast<size_t>(want)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      // A maximal invalid subpart: the valid-looking prefix (at least one byte).
      out.append(kReplacementChar);
      i += n == 0 ? 1 : n;
    }
  }
  return out;
}

void append_codepoint(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t next_codepoint(std::string_view s, size_t& i) {
  uint8_t b = static_cast<uint8_t>(s[i]);
  size_t n = valid_char_len(s, i);
  if (n <= 1) {
    ++i;
    return b;
  }
  char32_t cp = b & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

}  // namespace ninfer::utf8
