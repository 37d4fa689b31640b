// A Jinja2 subset interpreter for chat templates (lexer, parser, tree-walking evaluator).
// It is configured like transformers' chat-template environment: trim_blocks and
// lstrip_blocks on, a single trailing newline of the template dropped, loop controls
// (break/continue) enabled, `{% generation %}` blocks rendered as their contents.
//
// Supported: {{ expr }}, {% if/elif/else %}, {% for x in xs [if cond] %} (+ else, tuple
// targets, loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem/cycle),
// {% set x = e %}, {% set ns.attr = e %}, {% set x %}...{% endset %}, {% break %},
// {% continue %}, comments, whitespace control ({%- -%} {{- -}} {%+ +%}); literals (strings,
// ints, floats, true/false/none, lists, tuples, dicts); . and [] access, slices;
// + - * / // % ** ~, comparisons, in / not in, and/or/not, `a if c else b`; filters and
// tests listed in jinja_builtins.cpp; globals range, namespace, dict, raise_exception,
// strftime_now; string, list and dict methods (strip, split, rsplit, startswith, index,
// items, get, ...); {% macro %} (defaults, varargs/kwargs; no {% call %}).
// Anything else (an unknown tag, filter, test, or an unsupported operation) is an Error
// that names the construct and the template line.
//
// Limits: a template (or the values given to it) is untrusted input, so parsing and rendering
// are bounded; exceeding a bound is an Error that names it (the constants below).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ninfer::jinja {

// NOTE: the bounds are far above what real chat templates use (nesting < 20, a few KB of
// output, loops over the messages and tools) and low enough that a hostile template cannot
// overflow the stack (parser, evaluator and tree destructor all recurse) or exhaust memory.
inline constexpr int kMaxNesting = 200;              // parse: nested blocks, brackets, operator chains
inline constexpr int kMaxCallDepth = 100;            // render: nested macro calls (recursion)
inline constexpr size_t kMaxOutputBytes = 16 << 20;  // render: text produced, and any one string built
inline constexpr size_t kMaxListItems = 1 << 20;     // render: items of any one list built (range, +, *)
inline constexpr int64_t kMaxLoopIterations = 1 << 20;  // render: for-loop iterations in all

class Value;
using List = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;
using Function = std::function<Value(const std::vector<Value>& args, const Kwargs& kwargs)>;

// An insertion-ordered string-keyed map (Python dict); a namespace() object is a Dict whose
// attributes may be assigned with {% set ns.x = ... %}.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value v);
};

// A Jinja value: undefined, none, bool, int, float, string, list, dict or function. Lists
// and dicts are shared by reference, as in Python.
class Value {
 public:
  enum class Type { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

  Value() = default;  // undefined
  Value(bool b) : v_(b) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List l) : v_(std::make_shared<List>(std::move(l))) {}
  static Value none();
  static Value dict(std::vector<std::pair<std::string, Value>> items = {});
  static Value function(Function f);

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_undefined() const { return type() == Type::Undefined; }
  bool is_none() const { return type() == Type::None; }
  bool is_string() const { return type() == Type::String; }
  bool is_number() const { return type() == Type::Int || type() == Type::Float; }
  bool is_list() const { return type() == Type::List; }
  bool is_dict() const { return type() == Type::Dict; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_double() const;  // int or float
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<List>>(v_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  Dict& as_dict() { return *std::get<std::shared_ptr<Dict>>(v_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<Function>>(v_); }

  // Dict helpers (the value must be a dict).
  Value& set(std::string key, Value v);
  Value get(std::string_view key) const;  // undefined if absent or not a dict

  bool truthy() const;           // Python truth value
  std::string str() const;       // Python str(); undefined -> ""
  std::string repr() const;      // Python repr() (how str() shows list/dict items)
  std::string to_json(int indent = -1) const;  // Python json.dumps(ensure_ascii=False)
  std::string type_name() const;  // "str", "int", "list", ... for messages
  bool operator==(const Value& o) const;

 private:
  struct None {};
  struct Undefined {};
  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<List>,
               std::shared_ptr<Dict>, std::shared_ptr<Function>>
      v_;
};

// A parsed template; render() may be called many times, from several threads.
class Template {
 public:
  // Throws Error (naming the construct and line) on a syntax error or unknown tag/filter/test.
  static Template parse(std::string_view source);
  // `context` must be a dict; its keys are the template's variables.
  std::string render(const Value& context) const;

  struct Node;  // parsed statement, see jinja_ast.h
 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
};

}  // namespace ninfer::jinja
