// Template errors: an unsupported or malformed construct is an Error whose message names
// the construct and the template line.
#include <gtest/gtest.h>

#include "core/error.h"
#include "text/jinja.h"

namespace ninfer::jinja {
namespace {

std::string error_of(const std::string& tmpl, const Value& ctx = Value::dict()) {
  try {
    Template::parse(tmpl).render(ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

struct ErrorCase {
  const char* name;
  const char* tmpl;
  std::vector<const char*> parts;  // each must appear in the message
};

const ErrorCase kErrors[] = {
    {"unknown_tag", "a\n{% call foo() %}{% endcall %}", {"unsupported tag 'call'", "line 2"}},
    {"unknown_tag_filter_block", "a\n{% filter upper %}x{% endfilter %}", {"unsupported tag 'filter'", "line 2"}},
    {"macro_default_order", "{% macro m(a=1, b) %}{% endmacro %}", {"parameter 'b' without a default", "line 1"}},
    {"endmacro_with_name", "{% macro m() %}{% endmacro m %}", {"unexpected 'm' in '{% endmacro %}' tag"}},
    {"unclosed_macro", "{% macro m() %}x", {"'{% endmacro %}'"}},
    {"unknown_filter", "{{ x | frobnicate }}", {"unknown filter 'frobnicate'", "line 1"}},
    {"unknown_filter_in_dead_branch", "{% if false %}{{ x | nope }}{% endif %}", {"unknown filter 'nope'"}},
    {"unknown_test", "{% if x is shiny %}{% endif %}", {"unknown test 'shiny'"}},
    {"unclosed_if", "{% if true %}never closed", {"'{% endif %}'", "end of template"}},
    {"unclosed_for", "{% for x in y %}", {"'{% endfor %}'"}},
    {"stray_endif", "{% endif %}", {"unexpected '{% endif %}'"}},
    {"unclosed_output", "{{ x ", {"unclosed '{{'"}},
    {"unclosed_comment", "{# x ", {"unclosed comment"}},
    {"unterminated_string", "{{ 'abc }}", {"unterminated string"}},
    {"bad_character", "{{ x ; y }}", {"unexpected character ';'"}},
    {"missing_expression", "{{ }}", {"unexpected '}}'"}},
    {"break_outside_loop", "{% break %}", {"outside a for loop"}},
    {"set_attr_on_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {"only namespace() objects"}},
    {"call_undefined", "{{ nosuch(1) }}", {"'nosuch' is undefined"}},
    {"attr_of_undefined", "{{ nosuch.field }}", {"'nosuch' is undefined"}},
    {"unknown_method", "{{ 'abc'.frob() }}", {"unsupported method 'frob'"}},
    {"type_error", "{{ 'a' + 1 }}", {"unsupported operand types for +: 'str' and 'int'"}},
    {"division_by_zero", "{{ 1 / 0 }}", {"division by zero"}},
    {"raise_exception", "{{ raise_exception('custom message 42') }}", {"custom message 42"}},
    {"not_iterable", "{% for x in 5 %}{% endfor %}", {"'int' object is not iterable"}},
    {"recursive_loop", "{% for x in y recursive %}{% endfor %}", {"recursive"}},
};

class JinjaErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(JinjaErrors, NamesTheConstruct) {
  std::string msg = error_of(GetParam().tmpl);
  for (const char* part : GetParam().parts)
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
}

INSTANTIATE_TEST_SUITE_P(Cases, JinjaErrors, ::testing::ValuesIn(kErrors),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(JinjaErrorsMisc, LineNumbersCountTemplateLines) {
  std::string msg = error_of("line1\nline2\n{{ 1 }}\n{{ x | bogus }}");
  EXPECT_NE(msg.find("line 4"), std::string::npos) << msg;
}

TEST(JinjaErrorsMisc, ContextMustBeADict) {
  EXPECT_THROW(Template::parse("x").render(Value(List{})), Error);
}

}  // namespace
}  // namespace ninfer::jinja
