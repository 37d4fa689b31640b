// The bounds on untrusted templates and text (jinja.h, Tokenizer::kMaxEncodeBytes): each is an
// Error that names the limit, and input just inside a bound still works. Without the bounds
// these inputs overflow the stack (nesting, recursion), or run for hours and exhaust memory.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "test_paths.h"
#include "text/jinja.h"
#include "text/tokenizer.h"

namespace ninfer {
namespace {

using jinja::Template;
using jinja::Value;

std::string render(const std::string& tmpl, const Value& ctx = Value::dict()) {
  return Template::parse(tmpl).render(ctx);
}

std::string error_of(const std::string& tmpl) {
  try {
    render(tmpl);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(JinjaLimits, NestedBracketsAreBounded) {
  const int n = jinja::kMaxNesting;
  // Half the limit of nested parentheses parses and renders.
  EXPECT_EQ(render("{{ " + repeat("(", n / 2) + "1" + repeat(")", n / 2) + " }}"), "1");
  // 100,000 would overflow the parser's stack; past the limit it is an Error naming it.
  std::string deep = "{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}";
  EXPECT_NE(error_of(deep).find("kMaxNesting"), std::string::npos) << error_of(deep).substr(0, 300);
  std::string lists = "{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}";
  EXPECT_NE(error_of(lists).find("kMaxNesting"), std::string::npos);
}

TEST(JinjaLimits, OperatorChainsAndBlocksAreBounded) {
  // `1+1+...` is a left-deep tree: evaluating and destroying it recurse once per term.
  EXPECT_EQ(render("{{ 1" + repeat("+1", 50) + " }}"), "51");
  EXPECT_NE(error_of("{{ 1" + repeat("+1", 200000) + " }}").find("kMaxNesting"), std::string::npos);
  EXPECT_NE(error_of("{{ x" + repeat("|string", 200000) + " }}").find("kMaxNesting"), std::string::npos);
  EXPECT_NE(error_of("{{ x" + repeat(".a", 200000) + " }}").find("kMaxNesting"), std::string::npos);
  EXPECT_NE(error_of("{{ " + repeat("not ", 200000) + "x }}").find("kMaxNesting"), std::string::npos);
  EXPECT_NE(error_of(repeat("{% if true %}", 100000) + "x" + repeat("{% endif %}", 100000)).find("kMaxNesting"),
            std::string::npos);
  EXPECT_EQ(render(repeat("{% if true %}", 20) + "x" + repeat("{% endif %}", 20)), "x");
}

TEST(JinjaLimits, MacroRecursionIsBounded) {
  // Bounded recursion (depth 10) works as in Jinja2.
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(10) }}"),
            "10987654321");
  // Unbounded recursion overflowed the stack; now it names the limit.
  std::string e = error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
  EXPECT_NE(e.find("kMaxCallDepth"), std::string::npos) << e;
  EXPECT_NE(e.find("macro 'f'"), std::string::npos) << e;
}

TEST(JinjaLimits, OutputSizeIsBounded) {
  // 1 KiB x 2^15 loop iterations = 32 MiB of output, past the 16 MiB limit.
  std::string e = error_of("{% for i in range(32768) %}" + std::string(1024, 'x') + "{% endfor %}");
  EXPECT_NE(e.find("kMaxOutputBytes"), std::string::npos) << e;
  // Strings doubled in a loop grow past any memory without printing anything.
  e = error_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  EXPECT_NE(e.find("kMaxOutputBytes"), std::string::npos) << e;
  e = error_of("{{ 'ab' * 1000000000000 }}");
  EXPECT_NE(e.find("kMaxOutputBytes"), std::string::npos) << e;
  // Found by fuzz_chat_template: an empty sequence times 2^30 looped 2^30 times (a timeout).
  EXPECT_EQ(render("{{ ([] * 2 ** 30) | length }} {{ ('' * 2 ** 62) | length }}"), "0 0");
  // 1 MiB is fine.
  EXPECT_EQ(render("{{ 'x' * 1048576 }}").size(), 1048576u);
}

TEST(JinjaLimits, ListsLoopsAndIntegersAreBounded) {
  EXPECT_NE(error_of("{{ range(10000000000) | length }}").find("kMaxListItems"), std::string::npos);
  EXPECT_NE(error_of("{{ [1] * 100000000 }}").find("kMaxListItems"), std::string::npos);
  EXPECT_EQ(render("{{ range(3, -9223372036854775807, -4611686018427387904) | list }}"),
            "[3, -4611686018427387901, -9223372036854775805]");
  // Nested loops multiply: 1000 x 2^20 iterations. A loop is charged when it starts, so this
  // fails at once instead of after the budget's worth of iterations.
  std::string e = error_of("{% for i in range(1000) %}{% for j in range(1048576) %}{% endfor %}{% endfor %}");
  EXPECT_NE(e.find("kMaxLoopIterations"), std::string::npos) << e;
  // Signed overflow was undefined behaviour; 0 ** huge took 10^18 steps.
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 3 ** 64 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ (-9223372036854775807 - 1) // -1 }}").find("integer overflow"), std::string::npos);
  EXPECT_EQ(render("{{ 0 ** 1000000000000000000 }} {{ 2 ** 62 }} {{ (-1) ** 1000000000000000001 }}"),
            "0 4611686018427387904 -1");
}

TEST(JinjaLimits, NamespaceCyclesAreRefused) {
  // {{ ns }} of a namespace that contains itself recursed until the stack overflowed.
  std::string e = error_of("{% set ns = namespace(a=1) %}{% set ns.a = [ns] %}{{ ns }}");
  EXPECT_NE(e.find("a cycle"), std::string::npos) << e;
  e = error_of("{% set a = namespace(x=1) %}{% set b = namespace(y=a) %}{% set a.x = {'k': b} %}{{ a }}");
  EXPECT_NE(e.find("a cycle"), std::string::npos) << e;
  // Sharing without a cycle is fine.
  EXPECT_EQ(render("{% set a = namespace(x=1) %}{% set b = namespace(p=a, q=a) %}{{ b.p.x + b.q.x }}"), "2");
}

// Found by the ASan run of this suite: removeprefix/removesuffix and str.count held a
// reference into their argument's temporary (stack-use-after-scope).
TEST(JinjaSanitizerRegressions, StringMethodArgumentsOutliveTheCall) {
  EXPECT_EQ(render("{{ 'banana'.count('an') }} {{ 'prefix-x'.removeprefix('prefix-') }} {{ 'x.json'.removesuffix('.json') }}"),
            "2 x x");
}

TEST(TokenizerLimits, EncodeInputIsBounded) {
  Tokenizer tok = Tokenizer::load(test::test_data_dir() / "tokenizers" / "bytelevel-tiny");
  const std::string big(Tokenizer::kMaxEncodeBytes + 1, 'a');
  try {
    tok.encode(big, false);
    FAIL() << "encode took " << big.size() << " bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kMaxEncodeBytes"), std::string::npos) << e.what();
  }
  // 256 KiB (a 60K-token prompt) still encodes.
  std::string text;
  while (text.size() < (1u << 18)) text += "The quick brown fox jumps over the lazy dog. ";
  EXPECT_GT(tok.encode(text, false).size(), 25000u);
}

}  // namespace
}  // namespace ninfer
