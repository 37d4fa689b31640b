// Structured output's JSON Schema matcher, without a model: texts it must accept and
// reject byte by byte, the 400s for what it cannot enforce, $ref recursion and left-recursion
// cycles, and a property test: seeded random walks over the bytes the matcher allows end in
// JSON that a separate validator written here (over parsed JSON) accepts.
#include <gtest/gtest.h>

#include <random>

#include "server/json_schema.h"
#include "server/openai_api.h"
#include "schema_validator.h"

namespace ninfer::server {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const JsonGrammar> compile(const std::string& schema) {
  return compile_json_schema(ojson::parse(schema), "schema");
}

// Fed whole: accepted and complete.
bool matches(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
  JsonMatcher m(g);
  return m.feed(text) && m.accepting();
}

ApiError compile_error(const std::string& schema) {
  try {
    compile(schema);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << schema;
  return {};
}

// A seeded random walk: at each step one of the printable ASCII bytes the matcher allows
// (the structural ones favoured so walks end), until the value is complete.
std::string random_walk(const std::shared_ptr<const JsonGrammar>& g, std::mt19937& rng) {
  JsonMatcher m(g);
  std::string out;
  for (int step = 0; step < 4000 && !m.done(); ++step) {
    if (m.accepting() && rng() % 4 == 0) break;
    std::vector<uint8_t> ok, closing;
    for (int c = 0x20; c < 0x7f; ++c) {
      if (m.advance(m.state(), uint8_t(c)).empty()) continue;
      ok.push_back(uint8_t(c));
      if (c == '"' || c == '}' || c == ']' || c == ',' || c == ':') closing.push_back(uint8_t(c));
    }
    if (ok.empty()) break;
    const std::vector<uint8_t>& from = !closing.empty() && rng() % 3 != 0 ? closing : ok;
    const uint8_t c = from[rng() % from.size()];
    EXPECT_TRUE(m.feed(std::string(1, char(c))));
    out += char(c);
  }
  EXPECT_TRUE(m.accepting()) << "walk did not end in a complete value: " << out;
  return out;
}

constexpr const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer"},
    "height": {"type": "number"},
    "pet": {"enum": ["cat", "dog", 7, null]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 3},
    "ok": {"type": "boolean"},
    "nick": {"type": ["string", "null"], "maxLength": 4}
  },
  "required": ["name", "age", "ok"],
  "additionalProperties": false
})";

TEST(JsonSchema, AcceptsConformingTextsInTheWrittenOrder) {
  auto g = compile(kPerson);
  EXPECT_TRUE(matches(g, R"({"name":"Al","age":30,"ok":true})"));
  EXPECT_TRUE(matches(g, R"({"name":"Al","age":-3,"height":1.5e3,"pet":"dog","tags":["a","bc"],"ok":false,"nick":null})"));
  EXPECT_TRUE(matches(g, R"({"name":"","age":0,"pet":7,"ok":true,"nick":"x"})"));
  EXPECT_TRUE(matches(g, R"({"name":"\u00e9\n","age":1,"ok":true})"));
}

TEST(JsonSchema, RejectsWhatDoesNotConform) {
  auto g = compile(kPerson);
  for (const char* bad : {
           R"({"age":30,"name":"Al","ok":true})",       // out of order
           R"({"name":"Al","ok":true})",                 // required age skipped
           R"({"name":"Al","age":30})",                  // closes with ok missing
           R"({"name":"Al","age":3.5,"ok":true})",       // integer with a fraction
           R"({"name":"Al","age":030,"ok":true})",       // leading zero
           R"({"name":"Alexander!","age":1,"ok":true})", // maxLength 8
           R"({"name":"Al","age":1,"pet":"cow","ok":true})",
           R"({"name":"Al","age":1,"tags":[],"ok":true})",            // minItems 1
           R"({"name":"Al","age":1,"tags":["a","b","c","d"],"ok":true})",  // maxItems 3
           R"({"name":"Al","age":1,"ok":true,"extra":1})",
           R"({"name": "Al","age":1,"ok":true})",        // whitespace is not generated
           R"({"name":"Al","age":1,"ok":yes})",
           R"({"name":"A\x","age":1,"ok":true})",
       })
    EXPECT_FALSE(matches(g, bad)) << bad;
  // Nothing may follow a complete object.
  JsonMatcher m(g);
  ASSERT_TRUE(m.feed(R"({"name":"A","age":1,"ok":true})"));
  EXPECT_TRUE(m.done());
  EXPECT_FALSE(m.feed("x"));
  // A bare number can end or go on.
  JsonMatcher n(compile(R"({"type":"number"})"));
  ASSERT_TRUE(n.feed("12"));
  EXPECT_TRUE(n.accepting());
  EXPECT_FALSE(n.done());
  EXPECT_TRUE(n.feed(".5"));
  EXPECT_FALSE(JsonMatcher(compile(R"({"type":"number"})")).feed("1234567890123456"))
      << "more than 15 integer digits";
}

TEST(JsonSchema, JsonObjectModeTakesAnyObject) {
  auto g = json_object_grammar();
  EXPECT_TRUE(matches(g, R"({})"));
  EXPECT_TRUE(matches(g, R"({"a":[1,{"b":null}],"c":"d","e":-0.5E+2,"f":true})"));
  EXPECT_FALSE(matches(g, R"([1])"));
  EXPECT_FALSE(matches(g, R"("x")"));
  EXPECT_FALSE(matches(g, R"({"a":})"));
  EXPECT_FALSE(matches(g, R"({"a":1,})"));
}

TEST(JsonSchema, RefsToDefsAndRecursion) {
  auto g = compile(R"({
    "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
              "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"]}},
    "$ref": "#/$defs/node"})");
  EXPECT_TRUE(matches(g, R"({"v":1})"));
  EXPECT_TRUE(matches(g, R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"));
  EXPECT_FALSE(matches(g, R"({"v":1,"kids":[{"kids":[]}]})"));
  auto any = compile(R"({"anyOf": [{"type": "string", "maxLength": 2}, {"$ref": "#/definitions/n"}],
                         "definitions": {"n": {"type": "integer"}}})");
  EXPECT_TRUE(matches(any, R"("ab")"));
  EXPECT_TRUE(matches(any, R"(42)"));
  EXPECT_FALSE(matches(any, R"("abc")"));
  EXPECT_FALSE(matches(any, R"(true)"));
}

TEST(JsonSchema, ClearErrorsForWhatCannotBeEnforced) {
  ApiError e = compile_error(R"({"type":"object","properties":{"age":{"type":"integer","minimum":0}}})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "schema.properties.age.minimum");
  EXPECT_EQ(e.code, "unsupported_parameter");
  EXPECT_NE(e.message.find("'minimum'"), std::string::npos) << e.message;
  EXPECT_EQ(compile_error(R"({"type":"string","pattern":"a+"})").param, "schema.pattern");
  EXPECT_EQ(compile_error(R"({"oneOf":[{"type":"string"}]})").param, "schema.oneOf");
  EXPECT_EQ(compile_error(R"({"type":"strin"})").param, "schema.type");
  EXPECT_EQ(compile_error(R"({"$ref":"#/$defs/missing"})").param, "schema.$ref");
  EXPECT_EQ(compile_error(R"({"$ref":"http://x/y"})").param, "schema.$ref");
  EXPECT_EQ(compile_error(R"({"type":"array","items":[{"type":"string"}]})").param, "schema.items");
  EXPECT_EQ(compile_error(R"({"type":"object","properties":{"a":{}},"required":["b"]})").param, "schema.required[0]");
  EXPECT_EQ(compile_error(R"({"type":"string","maxLength":-1})").param, "schema.maxLength");
  // Left recursion: a definition that is itself, directly or through anyOf.
  ApiError cyc = compile_error(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})");
  EXPECT_NE(cyc.message.find("left recursion"), std::string::npos) << cyc.message;
  ApiError cyc2 = compile_error(R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})");
  EXPECT_NE(cyc2.message.find("left recursion"), std::string::npos) << cyc2.message;
}

TEST(JsonSchema, RandomWalksProduceValidJson) {
  const std::vector<std::string> schemas = {
      kPerson,
      R"({"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"boolean"},{"enum":["x","y"]}]},"maxItems":4})",
      R"({"$defs":{"t":{"type":"object","properties":{"n":{"type":"number"},
          "c":{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}},"required":["n"]}},"$ref":"#/$defs/t"})",
  };
  const unsigned seed = 1234;
  std::mt19937 rng(seed);
  for (const std::string& sch : schemas) {
    auto g = compile(sch);
    const json schema = json::parse(sch);
    for (int i = 0; i < 60; ++i) {
      const std::string text = random_walk(g, rng);
      const json v = json::parse(text, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << "seed " << seed << ": not JSON: " << text;
      EXPECT_TRUE(test::schema_valid(v, schema)) << "seed " << seed << ": does not validate: " << text;
    }
  }
}

// maxLength counts characters, and a string closes only after a whole UTF-8 character: a lone
// lead byte, a stray continuation byte or an overlong lead cannot end up in the output.
TEST(JsonSchema, StringsHoldOnlyWholeUtf8Characters) {
  const auto g = compile(R"({"type": "string", "maxLength": 2})");
  EXPECT_TRUE(matches(g, "\"\xC3\xA9\xE2\x82\xAC\""));      // "é€": two characters, five bytes
  EXPECT_FALSE(matches(g, "\"\xC3\xA9\xE2\x82\xAC!\""));    // a third character
  EXPECT_FALSE(matches(g, "\"\xC3\""));                        // a lead byte without its continuation
  EXPECT_FALSE(matches(g, "\"\xE2\x82\""));                    // three-byte character cut short
  EXPECT_FALSE(matches(g, "\"\x82\""));                        // a continuation byte alone
  EXPECT_FALSE(matches(g, "\"\xC0\xAF\""));                    // an overlong lead byte
  EXPECT_TRUE(matches(g, "\"\xF0\x9F\x98\x80\""));            // one four-byte character
}

// Found by fuzz_json_schema: the matcher let a string hold a lone surrogate escape ("\ud800")
// and the UTF-8 encodings of surrogates, overlong forms and code points past U+10FFFF; JSON
// parsers (nlohmann's, the server's own) refuse such text, so constrained output did not parse.
TEST(JsonSchema, StringsHoldOnlyWhatJsonParsersAccept) {
  const auto g = compile(R"({"type": "string", "maxLength": 1})");
  EXPECT_TRUE(matches(g, R"("\ud83d\ude00")"));  // one character as a surrogate pair
  EXPECT_TRUE(matches(g, R"("\uD7FF")"));
  EXPECT_TRUE(matches(g, R"("\uE000")"));
  EXPECT_FALSE(matches(g, R"("\ud800")"));        // high surrogate alone
  EXPECT_FALSE(matches(g, R"("\ud800x")"));
  EXPECT_FALSE(matches(g, R"("\ud800\u0041")"));  // high surrogate + a non-surrogate
  EXPECT_FALSE(matches(g, R"("\udc00")"));        // low surrogate alone
  EXPECT_FALSE(matches(g, "\"\xED\xA0\x80\""));   // U+D800 in UTF-8
  EXPECT_FALSE(matches(g, "\"\xE0\x80\xAF\""));   // overlong three-byte form
  EXPECT_FALSE(matches(g, "\"\xF0\x80\x80\xAF\""));  // overlong four-byte form
  EXPECT_FALSE(matches(g, "\"\xF4\x90\x80\x80\""));  // U+110000
  EXPECT_TRUE(matches(g, "\"\xED\x9F\xBF\""));    // U+D7FF
  EXPECT_TRUE(matches(g, "\"\xF4\x8F\xBF\xBF\""));  // U+10FFFF
  // Whatever a byte-by-byte walk accepts as complete parses.
  JsonMatcher m(g);
  EXPECT_TRUE(m.feed(R"("\udbff\udfff")"));
  EXPECT_TRUE(m.accepting());
  EXPECT_TRUE(nlohmann::json::accept(R"("\udbff\udfff")"));
}

}  // namespace
}  // namespace ninfer::server
