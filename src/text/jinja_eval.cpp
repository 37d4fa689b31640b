// Jinja evaluator: expression and statement semantics (Python-like, as Jinja2 has them),
// variable scopes, and Template::parse/render.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_set>

#include "core/error.h"
#include "text/jinja_nodes.h"
#include "text/utf8.h"

namespace ninfer::jinja {
namespace {

std::vector<std::string> codepoints(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t n = utf8::valid_char_len(s, i);
    if (n == 0) n = 1;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

bool is_numeric(const Value& v) {
  return v.type() == Value::Type::Int || v.type() == Value::Type::Float || v.type() == Value::Type::Bool;
}
bool is_integral(const Value& v) { return v.type() == Value::Type::Int || v.type() == Value::Type::Bool; }
int64_t to_int(const Value& v) { return v.type() == Value::Type::Bool ? int64_t(v.as_bool()) : v.as_int(); }

[[noreturn]] void undefined_error(int line, const std::string& what, const std::string& use) {
  fail("chat template line {}: {} is undefined ({})", line, what, use);
}

std::string describe_expr(const Expr* e) {
  if (auto n = dynamic_cast<const NameRef*>(e)) return "'" + n->name + "'";
  if (auto a = dynamic_cast<const Attr*>(e)) return describe_expr(a->obj.get()) + "." + a->name;
  return "value";
}

void eval_args(Context& ctx, const std::vector<Arg>& in, std::vector<Value>& args, Kwargs& kwargs) {
  for (const Arg& a : in) {
    if (a.name.empty()) args.push_back(a.value->eval(ctx));
    else kwargs.emplace_back(a.name, a.value->eval(ctx));
  }
}

// Python slice index normalisation.
List slice_list(const List& l, const Value& start, const Value& stop, const Value& step, int line) {
  auto n = static_cast<int64_t>(l.size());
  int64_t st = step.is_undefined() || step.is_none() ? 1 : to_int(step);
  if (st == 0) fail("chat template line {}: slice step cannot be zero", line);
  auto norm = [&](const Value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    if (!is_integral(v)) fail("chat template line {}: slice indices must be integers", line);
    int64_t x = to_int(v);
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t b = norm(start, st > 0 ? 0 : n - 1), e = norm(stop, st > 0 ? n : -1);
  List out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(l[i]);
  return out;
}

}  // namespace

// ---- shared operations ------------------------------------------------------------------

void check_string_size(size_t n, int line) {
  if (n > kMaxOutputBytes)
    fail("chat template line {}: a string of {} bytes would exceed the output limit of {} bytes "
         "(kMaxOutputBytes)",
         line, n, kMaxOutputBytes);
}

void check_list_size(size_t n, int line) {
  if (n > kMaxListItems)
    fail("chat template line {}: a list of {} items would exceed the list limit of {} items (kMaxListItems)",
         line, n, kMaxListItems);
}

[[noreturn]] void overflow_error(const std::string& op, int line) {
  fail("chat template line {}: integer overflow in '{}' (integers are 64-bit)", line, op);
}

List iterate(const Value& v, int line) {
  switch (v.type()) {
    case Value::Type::Undefined:
      return {};
    case Value::Type::List:
      return v.as_list();
    case Value::Type::Dict: {
      List keys;
      for (const auto& [k, x] : v.as_dict().items) keys.emplace_back(k);
      return keys;
    }
    case Value::Type::String: {
      List chars;
      for (auto& c : codepoints(v.as_string())) chars.emplace_back(std::move(c));
      return chars;
    }
    default:
      fail("chat template line {}: '{}' object is not iterable", line, v.type_name());
  }
}

bool less_than(const Value& a, const Value& b, int line) {
  if (is_numeric(a) && is_numeric(b)) {
    if (is_integral(a) && is_integral(b)) return to_int(a) < to_int(b);
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less_than(x[i], y[i], line)) return true;
      if (less_than(y[i], x[i], line)) return false;
    }
    return x.size() < y.size();
  }
  fail("chat template line {}: '<' is not supported between '{}' and '{}'", line, a.type_name(), b.type_name());
}

bool contains(const Value& c, const Value& item, int line) {
  switch (c.type()) {
    case Value::Type::String:
      if (!item.is_string())
        fail("chat template line {}: 'in <string>' needs a string on the left, not '{}'", line, item.type_name());
      return c.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::List:
      for (const Value& x : c.as_list())
        if (x == item) return true;
      return false;
    case Value::Type::Dict:
      return item.is_string() && c.as_dict().find(item.as_string()) != nullptr;
    case Value::Type::Undefined:
      return false;
    default:
      fail("chat template line {}: argument of type '{}' is not iterable", line, c.type_name());
  }
}

Value binary_op(const std::string& op, const Value& a, const Value& b, int line) {
  auto type_error = [&]() -> Value {
    fail("chat template line {}: unsupported operand types for {}: '{}' and '{}'", line, op, a.type_name(),
         b.type_name());
  };
  if (op == "~") {
    std::string x = a.str(), y = b.str();
    check_string_size(x.size() + y.size(), line);
    return Value(x + y);
  }
  if (op == "==") return Value(a == b);
  if (op == "!=") return Value(!(a == b));
  if (op == "<") return Value(less_than(a, b, line));
  if (op == ">") return Value(less_than(b, a, line));
  if (op == "<=") return Value(!less_than(b, a, line));
  if (op == ">=") return Value(!less_than(a, b, line));
  if (op == "in") return Value(contains(b, a, line));
  if (op == "not in") return Value(!contains(b, a, line));
  if (a.is_undefined() || b.is_undefined())
    fail("chat template line {}: operator '{}' applied to an undefined value", line, op);

  if (is_numeric(a) && is_numeric(b)) {
    bool ints = is_integral(a) && is_integral(b);
    if (ints && (op == "+" || op == "-" || op == "*")) {
      int64_t r = 0;
      const bool over = op == "+"   ? __builtin_add_overflow(to_int(a), to_int(b), &r)
                        : op == "-" ? __builtin_sub_overflow(to_int(a), to_int(b), &r)
                                    : __builtin_mul_overflow(to_int(a), to_int(b), &r);
      if (over) overflow_error(op, line);
      return Value(r);
    }
    if (op == "+") return Value(a.as_double() + b.as_double());
    if (op == "-") return Value(a.as_double() - b.as_double());
    if (op == "*") return Value(a.as_double() * b.as_double());
    if (op == "/") {
      if (b.as_double() == 0) fail("chat template line {}: division by zero", line);
      return Value(a.as_double() / b.as_double());
    }
    if (op == "//" || op == "%") {
      if (b.as_double() == 0) fail("chat template line {}: integer division or modulo by zero", line);
      if (ints) {
        int64_t x = to_int(a), y = to_int(b);
        if (x == INT64_MIN && y == -1) overflow_error(op, line);
        int64_t q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) {  // floor, as in Python
          --q;
          r += y;
        }
        return Value(op == "//" ? q : r);
      }
      double x = a.as_double(), y = b.as_double();
      double q = std::floor(x / y);
      return Value(op == "//" ? q : x - q * y);
    }
    if (op == "**") {
      if (ints && to_int(b) >= 0) {  // by squaring: the exponent may be huge when the base is 0 or +-1
        int64_t r = 1, base = to_int(a), e = to_int(b);
        while (e > 0) {
          if ((e & 1) && __builtin_mul_overflow(r, base, &r)) overflow_error(op, line);
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) {
            if (r == 0) break;
            overflow_error(op, line);
          }
        }
        return Value(r);
      }
      return Value(std::pow(a.as_double(), b.as_double()));
    }
    return type_error();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_string_size(a.as_string().size() + b.as_string().size(), line);
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      check_list_size(a.as_list().size() + b.as_list().size(), line);
      List l = a.as_list();
      l.insert(l.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(l));
    }
    return type_error();
  }
  if (op == "*") {
    const Value* seq = is_integral(b) ? &a : is_integral(a) ? &b : nullptr;
    const Value* count = seq == &a ? &b : &a;
    if (seq && (seq->is_string() || seq->is_list())) {
      int64_t n = std::max<int64_t>(0, to_int(*count));
      const size_t len = seq->is_string() ? seq->as_string().size() : seq->as_list().size();
      if (len > 0 && uint64_t(n) > kMaxOutputBytes) {
        if (seq->is_string()) check_string_size(kMaxOutputBytes + 1, line);
        check_list_size(kMaxListItems + 1, line);
      }
      if (seq->is_string()) check_string_size(len * size_t(n), line);
      else check_list_size(len * size_t(n), line);
      // NOTE: an empty sequence times n is empty at once (found by fuzz_chat_template:
      // `[] * 2 ** 30` looped 2^30 times appending nothing).
      if (len == 0) return seq->is_string() ? Value(std::string()) : Value(List{});
      if (seq->is_string()) {
        std::string s;
        for (int64_t k = 0; k < n; ++k) s += seq->as_string();
        return Value(std::move(s));
      }
      List l;
      for (int64_t k = 0; k < n; ++k) l.insert(l.end(), seq->as_list().begin(), seq->as_list().end());
      return Value(std::move(l));
    }
  }
  return type_error();
}

Value get_attr(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) fail("chat template line {}: cannot read attribute '{}' of an undefined value", line, name);
  if (obj.is_dict()) return obj.get(name);
  return Value();  // Jinja: a missing attribute is undefined
}

Value get_item(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) fail("chat template line {}: cannot subscript an undefined value", line);
  if (obj.is_dict()) return key.is_string() ? obj.get(key.as_string()) : Value();
  if ((obj.is_list() || obj.is_string()) && is_integral(key)) {
    int64_t i = to_int(key);
    if (obj.is_list()) {
      auto n = static_cast<int64_t>(obj.as_list().size());
      if (i < 0) i += n;
      return i >= 0 && i < n ? obj.as_list()[i] : Value();
    }
    auto cps = codepoints(obj.as_string());
    auto n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    return i >= 0 && i < n ? Value(cps[i]) : Value();
  }
  return Value();
}

Value Context::lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(name);
    if (f != it->end()) return f->second;
  }
  if (root_.is_dict())
    if (const Value* v = root_.as_dict().find(name)) return *v;
  const auto& g = builtin_globals();
  auto f = g.find(name);
  return f == g.end() ? Value() : f->second;
}

// ---- expressions ------------------------------------------------------------------------

Value NameRef::eval(Context& ctx) const { return ctx.lookup(name); }

Value ListLit::eval(Context& ctx) const {
  List l;
  l.reserve(items.size());
  for (const auto& e : items) l.push_back(e->eval(ctx));
  return Value(std::move(l));
}

Value DictLit::eval(Context& ctx) const {
  Value d = Value::dict();
  for (const auto& [k, v] : items) {
    Value key = k->eval(ctx);
    if (!key.is_string()) fail("chat template line {}: dict keys must be strings, not '{}'", line, key.type_name());
    d.set(key.as_string(), v->eval(ctx));
  }
  return d;
}

Value Attr::eval(Context& ctx) const {
  Value o = obj->eval(ctx);
  if (o.is_undefined()) undefined_error(line, describe_expr(obj.get()), "reading ." + name);
  return get_attr(o, name, line);
}

Value Item::eval(Context& ctx) const {
  Value o = obj->eval(ctx);
  if (o.is_undefined()) undefined_error(line, describe_expr(obj.get()), "subscripted");
  return get_item(o, key->eval(ctx), line);
}

Value SliceExpr::eval(Context& ctx) const {
  Value o = obj->eval(ctx);
  Value b = start ? start->eval(ctx) : Value(), e = stop ? stop->eval(ctx) : Value(),
        s = step ? step->eval(ctx) : Value();
  if (o.is_list()) return Value(slice_list(o.as_list(), b, e, s, line));
  if (o.is_string()) {
    List chars;
    for (auto& c : codepoints(o.as_string())) chars.emplace_back(std::move(c));
    std::string out;
    for (const Value& c : slice_list(chars, b, e, s, line)) out += c.as_string();
    return Value(std::move(out));
  }
  fail("chat template line {}: cannot slice a '{}'", line, o.type_name());
}

Value CallExpr::eval(Context& ctx) const {
  std::vector<Value> pos;
  Kwargs kw;
  if (auto a = dynamic_cast<const Attr*>(callee.get())) {
    Value o = a->obj->eval(ctx);
    if (o.is_undefined()) undefined_error(line, describe_expr(a->obj.get()), "calling ." + a->name + "()");
    Value f = o.is_dict() ? o.get(a->name) : Value();
    eval_args(ctx, args, pos, kw);
    if (f.type() == Value::Type::Function) return f.as_function()(pos, kw);
    return call_method(o, a->name, pos, kw, line);
  }
  Value f = callee->eval(ctx);
  if (f.is_undefined()) undefined_error(line, describe_expr(callee.get()), "called as a function");
  if (f.type() != Value::Type::Function)
    fail("chat template line {}: {} is a '{}', not a function", line, describe_expr(callee.get()), f.type_name());
  eval_args(ctx, args, pos, kw);
  return f.as_function()(pos, kw);
}

Value FilterExpr::eval(Context& ctx) const {
  Value in = obj->eval(ctx);
  std::vector<Value> pos;
  Kwargs kw;
  eval_args(ctx, args, pos, kw);
  return fn(ctx, in, pos, kw, line);
}

Value TestExpr::eval(Context& ctx) const {
  Value in = obj->eval(ctx);
  std::vector<Value> a;
  for (const auto& e : args) a.push_back(e->eval(ctx));
  return Value(fn(ctx, in, a, line) != negate);
}

Value Unary::eval(Context& ctx) const {
  Value v = e->eval(ctx);
  if (op == "not") return Value(!v.truthy());
  if (!is_numeric(v)) fail("chat template line {}: bad operand type for unary {}: '{}'", line, op, v.type_name());
  if (op == "+") return v;
  return is_integral(v) ? Value(-to_int(v)) : Value(-v.as_double());
}

Value Binary::eval(Context& ctx) const {
  if (op == "and") {
    Value x = a->eval(ctx);
    return x.truthy() ? b->eval(ctx) : x;
  }
  if (op == "or") {
    Value x = a->eval(ctx);
    return x.truthy() ? x : b->eval(ctx);
  }
  return binary_op(op, a->eval(ctx), b->eval(ctx), line);
}

Value CondExpr::eval(Context& ctx) const {
  if (cond->eval(ctx).truthy()) return then->eval(ctx);
  return otherwise ? otherwise->eval(ctx) : Value();
}

// ---- statements -------------------------------------------------------------------------

namespace {

void render_body(const Body& body, Context& ctx, std::string& out) {
  for (const auto& n : body) n->render(ctx, out);
}

struct ScopeGuard {
  Context& ctx;
  explicit ScopeGuard(Context& c) : ctx(c) { ctx.push(); }
  ~ScopeGuard() { ctx.pop(); }
};

// Whether `target` is `v` or inside it (each list and dict visited once).
bool reaches(const Value& v, const Dict* target) {
  std::unordered_set<const void*> seen;
  std::vector<const Value*> todo = {&v};
  while (!todo.empty()) {
    const Value* x = todo.back();
    todo.pop_back();
    if (x->is_list()) {
      if (!seen.insert(&x->as_list()).second) continue;
      for (const Value& e : x->as_list()) todo.push_back(&e);
    } else if (x->is_dict()) {
      if (&x->as_dict() == target) return true;
      if (!seen.insert(&x->as_dict()).second) continue;
      for (const auto& kv : x->as_dict().items) todo.push_back(&kv.second);
    }
  }
  return false;
}

void bind_targets(Context& ctx, const std::vector<std::string>& names, const Value& v, int line) {
  if (names.size() == 1) {
    ctx.set(names[0], v);
    return;
  }
  if (!v.is_list() || v.as_list().size() != names.size())
    fail("chat template line {}: cannot unpack a '{}' into {} variables", line, v.type_name(), names.size());
  for (size_t k = 0; k < names.size(); ++k) ctx.set(names[k], v.as_list()[k]);
}

}  // namespace

void Context::wrote(size_t n, int line) {
  written_ += n;
  if (written_ > kMaxOutputBytes)
    fail("chat template line {}: the render produced more than {} bytes of text (the output limit, "
         "kMaxOutputBytes)",
         line, kMaxOutputBytes);
}

void Context::iterations(size_t n, int line) {
  iterations_ += static_cast<int64_t>(std::min<size_t>(n, size_t(kMaxLoopIterations) + 1));
  if (iterations_ > kMaxLoopIterations)
    fail("chat template line {}: the render ran more than {} loop iterations (the loop limit, "
         "kMaxLoopIterations)",
         line, kMaxLoopIterations);
}

void OutputNode::render(Context& ctx, std::string& out) const {
  std::string s = e->eval(ctx).str();
  ctx.wrote(s.size(), line);
  out += s;
}

void IfNode::render(Context& ctx, std::string& out) const {
  for (const auto& [cond, body] : branches) {
    if (cond->eval(ctx).truthy()) {
      render_body(body, ctx, out);
      return;
    }
  }
  render_body(else_body, ctx, out);
}

void ForNode::render(Context& ctx, std::string& out) const {
  List items = iterate(iter->eval(ctx), line);
  ctx.iterations(items.size(), line);
  if (cond) {
    List kept;
    for (const Value& it : items) {
      ScopeGuard g(ctx);
      bind_targets(ctx, targets, it, line);
      if (cond->eval(ctx).truthy()) kept.push_back(it);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    render_body(else_body, ctx, out);
    return;
  }
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    ScopeGuard g(ctx);  // NOTE: a fresh scope per iteration; `set` does not leak out of loops
    bind_targets(ctx, targets, items[i], line);
    Value loop = Value::dict({{"index", Value(i + 1)},
                              {"index0", Value(i)},
                              {"revindex", Value(n - i)},
                              {"revindex0", Value(n - i - 1)},
                              {"first", Value(i == 0)},
                              {"last", Value(i == n - 1)},
                              {"length", Value(n)},
                              {"depth", Value(1)},
                              {"depth0", Value(0)},
                              {"previtem", i > 0 ? items[i - 1] : Value()},
                              {"nextitem", i + 1 < n ? items[i + 1] : Value()}});
    loop.set("cycle", Value::function([i, l = line](const std::vector<Value>& args, const Kwargs&) {
      if (args.empty()) fail("chat template line {}: loop.cycle() needs at least one argument", l);
      return args[static_cast<size_t>(i) % args.size()];
    }));
    ctx.set("loop", loop);
    try {
      render_body(body, ctx, out);
    } catch (const LoopControl& lc) {
      if (lc.is_break) break;
    }
  }
}

void SetNode::render(Context& ctx, std::string&) const {
  Value v = value->eval(ctx);
  if (!attr.empty()) {
    Value target = ctx.lookup(names[0]);
    if (!target.is_dict() || !target.as_dict().is_namespace)
      fail("chat template line {}: cannot set attribute '{}' on '{}' (a '{}'); only namespace() objects allow it",
           line, attr, names[0], target.type_name());
    // Lists and dicts are shared by reference, so this is the one way a template could make a
    // value contain itself (which str, tojson and == would then recurse through forever).
    if (reaches(v, &target.as_dict()))
      fail("chat template line {}: cannot set '{}.{}' to a value that contains '{}' (a cycle)", line, names[0], attr,
           names[0]);
    target.as_dict().set(attr, std::move(v));
    return;
  }
  bind_targets(ctx, names, v, line);
}

void SetBlockNode::render(Context& ctx, std::string&) const {
  std::string captured;
  render_body(body, ctx, captured);
  ctx.set(name, Value(std::move(captured)));
}

void MacroNode::render(Context& ctx, std::string&) const {
  // NOTE: the function holds a pointer to this render's Context; it is only reachable
  // through that context's variables, so it cannot be called after the render ends.
  Context* c = &ctx;
  ctx.set(name, Value::function([this, c](const std::vector<Value>& args, const Kwargs& kwargs) {
    if (c->call_depth >= kMaxCallDepth)
      fail("chat template line {}: macro '{}' called with {} macro calls already in progress (the "
           "recursion limit, kMaxCallDepth = {})",
           line, name, c->call_depth, kMaxCallDepth);
    struct Depth {
      int& d;
      explicit Depth(int& x) : d(x) { ++d; }
      ~Depth() { --d; }
    } depth(c->call_depth);
    ScopeGuard g(*c);
    List varargs;
    for (size_t k = params.size(); k < args.size(); ++k) varargs.push_back(args[k]);
    Value extra = Value::dict();
    std::vector<bool> bound(params.size(), false);
    for (size_t k = 0; k < params.size() && k < args.size(); ++k) {
      c->set(params[k].first, args[k]);
      bound[k] = true;
    }
    for (const auto& kv : kwargs) {
      const std::string& key = kv.first;  // NOTE: not a structured binding: clang 14 cannot capture one
      const Value& v = kv.second;
      auto it = std::find_if(params.begin(), params.end(), [&](const auto& p) { return p.first == key; });
      if (it == params.end()) {
        extra.set(key, v);
        continue;
      }
      size_t k = static_cast<size_t>(it - params.begin());
      if (bound[k]) fail("chat template line {}: macro '{}' got multiple values for argument '{}'", line, name, key);
      c->set(key, v);
      bound[k] = true;
    }
    for (size_t k = 0; k < params.size(); ++k) {
      if (bound[k]) continue;
      // A parameter without a default that the call leaves out is undefined, as in Jinja2.
      c->set(params[k].first, params[k].second ? params[k].second->eval(*c) : Value());
    }
    c->set("varargs", Value(std::move(varargs)));
    c->set("kwargs", extra);
    std::string text;
    render_body(body, *c, text);
    return Value(std::move(text));
  }));
}

// ---- Template ---------------------------------------------------------------------------

Template Template::parse(std::string_view source) {
  Template t;
  t.body_ = std::make_shared<const Body>(parse_template(source));
  return t;
}

std::string Template::render(const Value& context) const {
  if (!context.is_dict()) fail("chat template: the render context must be a dict, not '{}'", context.type_name());
  Context ctx(context);
  std::string out;
  try {
    render_body(*body_, ctx, out);
  } catch (const LoopControl&) {
    fail("chat template: break/continue outside a loop");
  }
  return out;
}

}  // namespace ninfer::jinja
