// Structured output's grammar: a JSON Schema (the subset below) compiled into a graph of
// nodes, and a byte-level matcher that says which bytes may come next. The token-level
// constraint (structured_output.h) runs this matcher over the vocabulary's bytes.
//
// Supported: type (string, number, integer, boolean, null, object, array, or a list of
// them), enum, const, properties, required, additionalProperties (false; true/absent only
// without properties), items, minItems, maxItems, minLength, maxLength, anyOf, $ref to
// "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed), and the annotations title,
// description, default, examples, $schema, $id, $comment. Anything else is a 400 naming the
// keyword and where it is ("response_format.json_schema.schema.properties.age.minimum").
//
// What the matcher produces (a subset of valid JSON for the schema, so every output parses
// and validates):
//   - compact JSON: no whitespace outside strings (NOTE: so a model cannot stall emitting
//     spaces, and the output still parses);
//   - object properties in the schema's order, required ones always, optional ones may be
//     skipped; objects without `properties` take any keys and any values;
//   - numbers of at most 15 integer digits, 15 fraction digits and 2 exponent digits (NOTE:
//     every number stays finite in length and within double range).
//
// Matcher state: a set of stacks of frames (a frame: node, phase, a counter, a byte buffer for
// keys and literals). anyOf forks a stack per alternative; dead stacks are dropped, equal
// ones merged, and at most kMaxStacks are kept.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::server {

class JsonGrammar;

// Throws ApiError (400, param = the path of the offending keyword under `where`).
// The schema as ordered_json: properties are generated in the order the client wrote them.
std::shared_ptr<const JsonGrammar> compile_json_schema(const nlohmann::ordered_json& schema, const std::string& where);
// Any JSON object (response_format json_object).
std::shared_ptr<const JsonGrammar> json_object_grammar();

class JsonMatcher {
 public:
  struct Frame {
    int32_t node = 0;
    int32_t phase = 0;
    int32_t n = 0;    // chars of a string, items of an array, next property of an object
    int32_t aux = 0;  // \u hex digits seen, a string's UTF-8 continuation bytes still due, or the property whose value is being matched
    std::string buf;  // a literal or a property key matched so far
    bool operator==(const Frame&) const = default;
  };
  using Stack = std::vector<Frame>;
  using State = std::vector<Stack>;

  explicit JsonMatcher(std::shared_ptr<const JsonGrammar> g);

  const State& state() const { return state_; }
  void set_state(State s) { state_ = std::move(s); }
  // The state after byte c (empty: c may not come next).
  State advance(const State& s, uint8_t c) const;
  // Feeds bytes; false (and the state unchanged) if any may not come.
  bool feed(std::string_view bytes);
  // The input so far is a complete value (an end may come).
  bool accepting() const { return accepting(state_); }
  bool accepting(const State& s) const;
  // The value is complete and nothing may follow it.
  bool done() const;

 private:
  std::shared_ptr<const JsonGrammar> g_;
  State state_;
};

}  // namespace ninfer::server
