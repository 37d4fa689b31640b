// Jinja lexer (see jinja_lexer.h). Whitespace rules, from Jinja2's lexer with
// trim_blocks=True and lstrip_blocks=True (transformers' chat-template environment):
//   - "{%-", "{{-", "{#-": strip all whitespace before the tag;
//   - "-%}", "-}}", "-#}": strip all whitespace after the tag;
//   - "{%" / "{#" without '+': strip spaces/tabs between the last newline (or the start
//     of the template, or a newline eaten just before) and the tag (lstrip_blocks);
//   - "%}" / "#}" without '+': drop one newline right after the tag (trim_blocks).
// Newlines are normalised to '\n' and one trailing newline of the template is dropped
// (keep_trailing_newline=False).
#include "text/jinja_lexer.h"

#include <cstdlib>

#include "core/error.h"
#include "text/utf8.h"

namespace ninfer::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      size_t k = find_tag(pos_);
      std::string data = s_.substr(pos_, (k == std::string::npos ? s_.size() : k) - pos_);
      if (k == std::string::npos) {
        emit_text(std::move(data));
        pos_ = s_.size();
        break;
      }
      char kind = s_[k + 1];  // '{', '%' or '#'
      char mod = k + 2 < s_.size() ? s_[k + 2] : '\0';
      if (mod != '-' && mod != '+') mod = '\0';
      if (mod == '-') {
        while (!data.empty() && is_space(data.back())) data.pop_back();
      } else if (mod != '+' && kind != '{') {
        size_t l_pos = data.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 || line_starting) {
          bool blank = true;
          for (size_t i = l_pos; i < data.size(); ++i) blank = blank && is_space(data[i]);
          if (blank) data.resize(l_pos);
        }
      }
      emit_text(std::move(data));
      line_ += count_newlines(pos_, k);
      pos_ = k + 2 + (mod ? 1 : 0);
      size_t end_start;
      if (kind == '#') {
        size_t e = s_.find("#}", pos_);
        if (e == std::string::npos) fail("chat template line {}: unclosed comment '{{#'", line_);
        line_ += count_newlines(pos_, e);
        end_start = e;
        bool strip = e > pos_ && s_[e - 1] == '-';
        bool keep = e > pos_ && s_[e - 1] == '+';
        pos_ = e + 2;
        finish_tag(strip, keep, /*block=*/true);
      } else {
        bool block = kind == '%';
        tokens_.push_back(Token{block ? Token::Kind::BlockBegin : Token::Kind::VarBegin, "", 0, 0, line_});
        bool strip = false, keep = false;
        end_start = lex_inside(block, &strip, &keep);
        tokens_.push_back(Token{block ? Token::Kind::BlockEnd : Token::Kind::VarEnd, "", 0, 0, line_});
        finish_tag(strip, keep, block);
      }
      line_starting = pos_ > 0 && s_[pos_ - 1] == '\n' && pos_ - 1 >= end_start;
    }
    tokens_.push_back(Token{Token::Kind::Eof, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    size_t k = from;
    while ((k = s_.find('{', k)) != std::string::npos) {
      if (k + 1 < s_.size() && (s_[k + 1] == '{' || s_[k + 1] == '%' || s_[k + 1] == '#')) return k;
      ++k;
    }
    return std::string::npos;
  }

  int count_newlines(size_t a, size_t b) const {
    int n = 0;
    for (size_t i = a; i < b && i < s_.size(); ++i) n += s_[i] == '\n';
    return n;
  }

  void emit_text(std::string data) {
    if (!data.empty()) tokens_.push_back(Token{Token::Kind::Text, std::move(data), 0, 0, line_});
  }

  // After a tag's closing delimiter (pos_ is just past it): apply '-' / trim_blocks.
  void finish_tag(bool strip, bool keep, bool block) {
    if (strip) {
      while (pos_ < s_.size() && is_space(s_[pos_])) {
        line_ += s_[pos_] == '\n';
        ++pos_;
      }
    } else if (block && !keep && pos_ < s_.size() && s_[pos_] == '\n') {
      ++line_;
      ++pos_;
    }
  }

  // Lexes expression tokens up to the closing "}}" / "%}"; returns the offset where the
  // closing delimiter (including its '-'/'+') starts; pos_ ends just past it.
  size_t lex_inside(bool block, bool* strip, bool* keep) {
    const char* close = block ? "%}" : "}}";
    while (true) {
      while (pos_ < s_.size() && is_space(s_[pos_])) {
        line_ += s_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= s_.size()) fail("chat template line {}: unclosed '{}' tag", line_, block ? "{%" : "{{");
      size_t at = pos_;
      if ((s_[pos_] == '-' || s_[pos_] == '+') && s_.compare(pos_ + 1, 2, close) == 0) {
        *strip = s_[pos_] == '-';
        *keep = s_[pos_] == '+';
        pos_ += 3;
        return at;
      }
      if (s_.compare(pos_, 2, close) == 0) {
        pos_ += 2;
        return at;
      }
      lex_token();
    }
  }

  void lex_token() {
    char c = s_[pos_];
    if (is_name_start(c)) {
      size_t b = pos_;
      while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
      tokens_.push_back(Token{Token::Kind::Name, s_.substr(b, pos_ - b), 0, 0, line_});
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t b = pos_;
      bool is_float = false;
      while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      if (pos_ + 1 < s_.size() && s_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))) {
        is_float = true;
        ++pos_;
        while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      }
      if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
        size_t q = pos_ + 1;
        if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
        if (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) {
          is_float = true;
          pos_ = q;
          while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
        }
      }
      std::string num;
      for (size_t i = b; i < pos_; ++i)
        if (s_[i] != '_') num.push_back(s_[i]);
      Token t{is_float ? Token::Kind::Float : Token::Kind::Int, num, 0, 0, line_};
      if (is_float) t.fval = std::strtod(num.c_str(), nullptr);
      else t.ival = std::strtoll(num.c_str(), nullptr, 10);
      tokens_.push_back(std::move(t));
      return;
    }
    if (c == '\'' || c == '"') {
      lex_string(c);
      return;
    }
    static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "="};
    for (const char* op : ops) {
      size_t n = std::char_traits<char>::length(op);
      if (s_.compare(pos_, n, op) == 0) {
        tokens_.push_back(Token{Token::Kind::Op, op, 0, 0, line_});
        pos_ += n;
        return;
      }
    }
    fail("chat template line {}: unexpected character '{}'", line_, std::string(1, c));
  }

  // A Python-style string literal; escapes as in Python (unknown ones keep the backslash).
  void lex_string(char q) {
    int start_line = line_;
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("chat template line {}: unterminated string literal", start_line);
      char c = s_[pos_++];
      if (c == q) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) fail("chat template line {}: unterminated string literal", start_line);
      char e = s_[pos_++];
      auto hex = [&](int n) {
        if (pos_ + n > s_.size()) fail("chat template line {}: bad \\x/\\u escape", line_);
        std::string h = s_.substr(pos_, n);
        char* end = nullptr;
        unsigned long v = std::strtoul(h.c_str(), &end, 16);
        if (end != h.c_str() + n) fail("chat template line {}: bad \\x/\\u escape '{}'", line_, h);
        pos_ += n;
        return static_cast<char32_t>(v);
      };
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '0': out.push_back('\0'); break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\n': ++line_; break;  // line continuation
        case 'x': utf8::append_codepoint(out, hex(2)); break;
        case 'u': utf8::append_codepoint(out, hex(4)); break;
        case 'U': utf8::append_codepoint(out, hex(8)); break;
        default:
          out.push_back('\\');
          out.push_back(e);
      }
    }
    tokens_.push_back(Token{Token::Kind::String, std::move(out), 0, 0, start_line});
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace ninfer::jinja
