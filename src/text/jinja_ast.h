// Internal to src/text: the Jinja syntax tree and the evaluation entry points shared by
// the parser (jinja_parser.cpp), the evaluator (jinja_eval.cpp) and the built-in filters,
// tests and methods (jinja_builtins.cpp).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/jinja.h"

namespace ninfer::jinja {

class Context;

struct Expr {
  int line = 0;
  virtual ~Expr() = default;
  virtual Value eval(Context& ctx) const = 0;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  std::string name;  // empty for a positional argument
  ExprPtr value;
};

struct Template::Node {
  int line = 0;
  virtual ~Node() = default;
  virtual void render(Context& ctx, std::string& out) const = 0;
};
using Node = Template::Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

// Parses a token stream into a body; throws Error on syntax errors.
Body parse_template(std::string_view source);

// Built-ins. Filters and tests are looked up at parse time so an unknown name is an error
// even in a branch that never runs.
using FilterFn = Value (*)(Context& ctx, const Value& in, const std::vector<Value>& args, const Kwargs& kwargs,
                           int line);
using TestFn = bool (*)(Context& ctx, const Value& in, const std::vector<Value>& args, int line);
FilterFn find_filter(const std::string& name);
TestFn find_test(const std::string& name);
// A method call on a string or dict (s.strip(), d.items(), ...); throws if unknown.
Value call_method(const Value& obj, const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs,
                  int line);
// Globals available to every template (range, namespace, dict, raise_exception, ...).
const std::unordered_map<std::string, Value>& builtin_globals();

// Operations shared by the evaluator and the built-ins.
Value binary_op(const std::string& op, const Value& a, const Value& b, int line);
// The size bounds of jinja.h for strings and lists about to be built (Error naming the limit).
void check_string_size(size_t n, int line);
void check_list_size(size_t n, int line);
[[noreturn]] void overflow_error(const std::string& op, int line);
bool contains(const Value& container, const Value& item, int line);
bool less_than(const Value& a, const Value& b, int line);
Value get_attr(const Value& obj, const std::string& name, int line);
Value get_item(const Value& obj, const Value& key, int line);
List iterate(const Value& v, int line);  // the items a for loop / filter sees

// Variable scopes of one render() call.
class Context {
 public:
  explicit Context(const Value& root) : root_(root) { scopes_.emplace_back(); }
  Value lookup(const std::string& name) const;
  void set(const std::string& name, Value v) { scopes_.back()[name] = std::move(v); }
  void push() { scopes_.emplace_back(); }
  void pop() { scopes_.pop_back(); }

  // Accounting for the render limits of jinja.h (each throws an Error naming its limit).
  void wrote(size_t n, int line);     // n more bytes of text produced (kMaxOutputBytes)
  void iterations(size_t n, int line);  // n more loop iterations (kMaxLoopIterations)
  int call_depth = 0;                 // macro calls in progress (kMaxCallDepth)

 private:
  size_t written_ = 0;
  int64_t iterations_ = 0;
  const Value& root_;
  std::vector<std::unordered_map<std::string, Value>> scopes_;
};

// Thrown by {% break %} / {% continue %}; caught by the enclosing for loop.
struct LoopControl {
  bool is_break;
};

}  // namespace ninfer::jinja
