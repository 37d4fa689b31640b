// Internal to src/text: the Jinja lexer. Splits a template into text and tag tokens,
// applying whitespace control on the way (trim_blocks, lstrip_blocks, '-' and '+'
// modifiers) exactly as Jinja2's lexer does, and drops comments.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::jinja {

struct Token {
  enum class Kind { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };
  Kind kind;
  std::string text;  // Text: the data; Name/Op: the spelling; String: the unescaped value
  int64_t ival = 0;
  double fval = 0;
  int line = 1;
};

std::vector<Token> lex(std::string_view source);

}  // namespace ninfer::jinja
