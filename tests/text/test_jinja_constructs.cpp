// The Jinja interpreter, construct by construct. Every expected string below was produced
// by Jinja2 3.1 configured as transformers configures it for chat templates
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson =
// json.dumps(ensure_ascii=False)), rendering the same template with the same context.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/jinja.h"
#include "text/jinja_json.h"

namespace ninfer::jinja {
namespace {

const char* kContext = R"J({
  "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
               {"role": "assistant", "content": "Hello!"}],
  "name": "World", "n": 7, "x": 2.5, "flag": true, "nothing": null,
  "items": ["a", "b", "c"], "nums": [3, 1, 2], "d": {"k": "v", "z": 1},
  "tools": [{"name": "get_weather", "parameters": {"city": {"type": "string"}}, "ok": true, "w": 1.5, "n": null}],
  "text": "  padded \n"
})J";

struct Case {
  const char* name;
  const char* tmpl;
  const char* expected;
};

const Case kCases[] = {
    {"literal_text",
     R"J(plain text)J",
     R"J(plain text)J"},
    {"output_string_concat",
     R"J({{ 'a' + "b" ~ 3 ~ none }})J",
     R"J(ab3None)J"},
    {"arithmetic",
     R"J({{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }} {{ -n }})J",
     R"J(7 9 3 -4 1 2 3.5 1024 2.5 -7)J"},
    {"float_repr",
     R"J({{ 0.1 }} {{ 1.0 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 100.0 / 3 }} {{ x }} {{ 10 / 5 }})J",
     R"J(0.1 1.0 1e+20 1.5e-07 33.333333333333336 2.5 2.0)J"},
    {"comparisons",
     R"J({{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ n == 7 }} {{ n != 7 }} {{ 1 == 1.0 }} {{ [1,2] == [1,2] }} {{ 'x' > 'X' }})J",
     R"J(True False True True False True True True)J"},
    {"logic",
     R"J({{ true and false }} {{ true or false }} {{ not flag }} {{ nothing or 'fallback' }} {{ 0 and 1 }} {{ not nothing is none }})J",
     R"J(False True False fallback 0 False)J"},
    {"in_operator",
     R"J({{ 'b' in items }} {{ 'q' not in items }} {{ 'ell' in 'hello' }} {{ 'k' in d }} {{ 'v' in d }})J",
     R"J(True True True True False)J"},
    {"ternary",
     R"J({{ 'yes' if flag else 'no' }} {{ 'yes' if nothing else 'no' }}[{{ 'only' if nothing }}])J",
     R"J(yes no[])J"},
    {"attr_and_subscript",
     R"J({{ d.k }} {{ d['z'] }} {{ messages[1].role }} {{ messages[-1]['content'] }} {{ items[0] }}{{ items[-1] }} [{{ d.missing }}] {{ messages[5] is defined }})J",
     R"J(v 1 user Hello! ac [] False)J"},
    {"slices",
     R"J({{ items[1:] }} {{ items[:-1] }} {{ items[::-1] }} {{ 'abcdef'[1:4] }} {{ nums[::2] }})J",
     R"J(['b', 'c'] ['a', 'b'] ['c', 'b', 'a'] bcd [3, 2])J"},
    {"list_dict_literals",
     R"J({{ [1, 'two', none, true] }} {{ {'a': 1, 'b': [2]} }} {{ [] }} {{ {} }})J",
     R"J([1, 'two', None, True] {'a': 1, 'b': [2]} [] {})J"},
    {"for_loop_vars",
     R"J({% for i in items %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}{{ i }}{{ loop.length }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}|{% endfor %})J",
     R"J(013a3F|122b3|231c3L|)J"},
    {"for_else_and_filter",
     R"J({% for i in [] %}x{% else %}empty{% endfor %} {% for i in nums if i > 1 %}{{ i }}{{ loop.length }}{% endfor %})J",
     R"J(empty 3222)J"},
    {"for_dict_items",
     R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {% for k in d %}{{ k }}{% endfor %})J",
     R"J(k=v;z=1; kz)J"},
    {"loop_cycle_prev_next",
     R"J({% for i in items %}{{ loop.cycle('o', 'e') }}{{ loop.previtem }}>{{ loop.nextitem }} {% endfor %})J",
     R"J(o>b ea>c ob> )J"},
    {"break_continue",
     R"J({% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}{% endfor %})J",
     R"J(0134)J"},
    {"set_scoping",
     R"J({% set a = 1 %}{% for i in items %}{% set a = a + 1 %}{{ a }}{% endfor %} {{ a }})J",
     R"J(222 1)J"},
    {"namespace",
     R"J({% set ns = namespace(count=0, last='') %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% set ns.last = m.role %}{% endfor %}{{ ns.count }} {{ ns.last }})J",
     R"J(3 assistant)J"},
    {"set_block",
     R"J({% set greeting %}Hello {{ name }}!{% endset %}[{{ greeting }}])J",
     R"J([Hello World!])J"},
    {"if_elif_else",
     R"J({% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %} {% endfor %})J",
     R"J(one two many )J"},
    {"filters_basic",
     R"J([{{ text | trim }}] {{ items | length }} {{ 'abc' | upper }} {{ 'ABC' | lower }} {{ n | string }} {{ 'hello world' | title }} {{ 'hELLO' | capitalize }} {{ items | join(', ') }} {{ items | first }}{{ items | last }})J",
     R"J([padded] 3 ABC abc 7 Hello World Hello a, b, c ac)J"},
    {"filters_more",
     R"J({{ nums | sort }} {{ nums | reverse | list }} {{ '3' | int + 1 }} {{ '2.5' | float }} {{ -3 | abs }} {{ 'a-b-c' | replace('-', '+') }} {{ nothing | default('dflt') }} {{ undefined_var | default('dflt') }} {{ '' | default('e', true) }} {% for k, v in d | items %}{{ k }}{{ v }}{% endfor %})J",
     R"J([1, 2, 3] [2, 1, 3] 4 2.5 3 a+b+c None dflt e kvz1)J"},
    {"filters_select",
     R"J({{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | map(attribute='role') | join(',') }} {{ nums | select('odd') | list }} {{ messages | rejectattr('role', 'eq', 'system') | map(attribute='content') | list }})J",
     R"J(1 system,user,assistant [3, 1] ['Hi', 'Hello!'])J"},
    {"tojson",
     R"J({{ tools | tojson }}|{{ 'quote" and é\n' | tojson }}|{{ d | tojson(indent=2) }}|{{ [] | tojson }})J",
     R"J([{"name": "get_weather", "parameters": {"city": {"type": "string"}}, "ok": true, "w": 1.5, "n": null}]|"quote\" and é\n"|{
  "k": "v",
  "z": 1
}|[])J"},
    {"tests",
     R"J({{ n is defined }} {{ zz is defined }} {{ zz is undefined }} {{ nothing is none }} {{ n is not none }} {{ name is string }} {{ n is number }} {{ n is integer }} {{ x is float }} {{ d is mapping }} {{ items is iterable }} {{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ n is eq 7 }} {{ flag is true }} {{ flag is boolean }})J",
     R"J(True False True True True True True True True True True True False True True True True)J"},
    {"string_methods",
     R"J({{ text.strip() }}|{{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ '-'.join(items) }}|{{ 'xxhixx'.strip('x') }}|{{ 'abc'.upper() }})J",
     R"J(padded|x  |  x|['a', 'b', '', 'c']|['a', 'b']|True|True|bba|a-b-c|hi|ABC)J"},
    {"dict_methods",
     R"J({{ d.keys() | list }} {{ d.values() | list }} {{ d.get('k') }} {{ d.get('nope', 'dflt') }} {{ d.get('nope') }})J",
     R"J(['k', 'z'] ['v', 1] v dflt None)J"},
    {"whitespace_control",
     R"J(a  {%- if true -%}  b  {%- endif -%}  c {{- ' d ' -}} e)J",
     R"J(abc d e)J"},
    {"trim_and_lstrip_blocks",
     R"J(start
  {% if true %}
    inner
  {% endif %}
end
{# comment #}
after
)J",
     R"J(start
    inner
end
after)J"},
    {"plus_modifiers",
     R"J(x
  {%+ if true +%}
y{% endif %})J",
     R"J(x
  
y)J"},
    {"comments",
     R"J(a{# ignored {{ not rendered }} #}b {#- strip -#} c)J",
     R"J(abc)J"},
    {"string_escapes",
     R"J({{ 'tab\there' }}|{{ "q\"q" }}|{{ 'it\'s' }}|{{ '\u00e9' }})J",
     R"J(tab	here|q"q|it's|é)J"},
    {"adjacent_strings_and_tilde",
     R"J({{ 'a' 'b' }} {{ 1 ~ 2 }} {{ [1] + [2] }} {{ 'ab' * 3 }})J",
     R"J(ab 12 [1, 2] ababab)J"},
    {"none_rendering",
     R"J({{ none }} {{ true }} {{ false }} {{ nothing }} [{{ undefined_thing }}])J",
     R"J(None True False None [])J"},
    {"range_and_dict",
     R"J({{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ dict(a=1, b='x') }})J",
     R"J([0, 1, 2] [1, 3, 5] {'a': 1, 'b': 'x'})J"},
    {"unicode",
     R"J({{ 'héllo' | length }} {{ 'héllo'[1] }} {{ 'naïve'[::-1] }})J",
     R"J(5 é evïan)J"},
    {"nested_loops",
     R"J({% for m in messages %}{% for c in m.role %}{% if loop.index <= 2 %}{{ c }}{% endif %}{% endfor %}{{ loop.index }} {% endfor %})J",
     R"J(sy1 us2 as3 )J"},
    {"method_chains",
     R"J({{ '<think>\nA\n</think>\n\nB'.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}|{{ ('x' ~ 'y').upper() }}|{{ (items | length - 1) - 1 }}|{{ messages[::-1][0].role }}|{% for m in messages if m.content is string and 'ell' in m.content %}{{ m.role }}{% endfor %})J",
     R"J(A|XY|1|assistant|assistant)J"},
    {"macro_defaults_and_kwargs",
     R"J({% macro tag(name, body='-', close=true) %}<{{ name }}>{{ body }}{% if close %}</{{ name }}>{% endif %}{% endmacro %}{{ tag('a') }}|{{ tag('b', 'x') }}|{{ tag('c', close=false) }}|{{ tag(body='y', name='d') }})J",
     R"J(<a>-</a>|<b>x</b>|<c>-|<d>y</d>)J"},
    {"macro_recursive_and_set",
     R"J({% macro render(v) %}{% if v is mapping %}{{ '{' }}{% for k, x in v|items %}{{ k }}:{{ render(x) }}{% if not loop.last %},{% endif %}{% endfor %}{{ '}' }}{% elif v is sequence and v is not string %}[{% for x in v %}{{ render(x) }}{% endfor %}]{% else %}{{ v }}{% endif %}{% endmacro %}{% set out = render(tools[0]) %}{{ out | length }} {{ out }})J",
     R"J(71 {name:get_weather,parameters:{city:{type:string}},ok:True,w:1.5,n:None})J"},
    {"macro_whitespace_control",
     R"J({%- macro line(m) -%}
    {{- m.role | upper }}: {{ m.content }}
{% endmacro -%}
{%- for m in messages %}
{{- line(m) }}
{%- endfor %})J",
     R"J(SYSTEM: Be brief.
USER: Hi
ASSISTANT: Hello!
)J"},
    {"macro_sees_outer_and_missing_arg",
     R"J({% set greeting = 'Hey' %}{% macro hi(who, extra) %}{{ greeting }} {{ who }}{{ extra is defined }}{% endmacro %}{{ hi(name) }} {{ hi('x', 1) }})J",
     R"J(Hey WorldFalse Hey xTrue)J"},
    {"macro_varargs_kwargs",
     R"J({% macro m(a) %}{{ a }}/{{ varargs | length }}{{ varargs[1] }}/{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }})J",
     R"J(1/23/{'k': 'v'})J"},
    {"str_rsplit",
     R"J({{ 'a,b,c,d'.rsplit(',', 1) }} {{ 'a,b,c'.rsplit(',') }} {{ '  a  b c '.rsplit(None, 1) }} {{ 'a b  c'.rsplit() }} {{ 'x</think>y</think>z'.rsplit('</think>', 1)[-1] }} {{ ''.rsplit(',') }} {{ 'abc'.rsplit('abc') }})J",
     R"J(['a,b,c', 'd'] ['a', 'b', 'c'] ['  a  b', 'c'] ['a', 'b', 'c'] z [''] ['', ''])J"},
    {"str_methods_more",
     R"J({{ 'a\nb\r\nc\n'.splitlines() }} {{ 'prefix-x'.removeprefix('prefix-') }} {{ 'x.json'.removesuffix('.json') }} {{ '123'.isdigit() }} {{ '12a'.isdigit() }} {{ 'abc'.isalpha() }} {{ ' \t'.isspace() }} {{ 'ABC'.isupper() }} {{ 'abC'.islower() }} {{ 'a-b-c'.rfind('-') }} {{ items.index('b') }} {{ nums.count(1) }})J",
     R"J(['a', 'b', 'c'] x x True False True True True False 3 1 1)J"},
    {"test_false_true",
     R"J({{ flag is true }} {{ flag is false }} {{ nothing is false }} {{ 0 is false }} {% if enable_thinking is defined and enable_thinking is false %}no{% else %}think{% endif %})J",
     R"J(True False False False think)J"},
};

class JinjaConstructs : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaConstructs, RendersLikeJinja2) {
  Value ctx = from_json(nlohmann::ordered_json::parse(kContext));
  EXPECT_EQ(Template::parse(GetParam().tmpl).render(ctx), GetParam().expected) << "template: " << GetParam().tmpl;
}

INSTANTIATE_TEST_SUITE_P(Jinja2Oracle, JinjaConstructs, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(JinjaTemplate, ParsedOnceRenderedManyTimes) {
  Template t = Template::parse("{% for m in messages %}{{ m }};{% endfor %}");
  for (int k = 0; k < 3; ++k) {
    Value ctx = Value::dict({{"messages", Value(List{Value(k), Value("x")})}});
    EXPECT_EQ(t.render(ctx), std::to_string(k) + ";x;");
  }
}

TEST(JinjaTemplate, ContextValuesAreNotModified) {
  Value ns_owner = from_json(nlohmann::json::parse(R"({"a": [1, 2]})"));
  Template::parse("{% set a = [9] %}{{ a }}").render(ns_owner);
  EXPECT_EQ(ns_owner.get("a").repr(), "[1, 2]");
}

}  // namespace
}  // namespace ninfer::jinja
