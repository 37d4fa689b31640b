// Internal to src/text: the concrete Jinja syntax-tree nodes. The parser
// (jinja_parser.cpp) builds them; their eval()/render() live in jinja_eval.cpp.
#pragma once
#include "text/jinja_ast.h"

namespace ninfer::jinja {

// ---- expressions ------------------------------------------------------------------------

struct Literal : Expr {
  Value v;
  Value eval(Context&) const override { return v; }
};

struct NameRef : Expr {
  std::string name;
  Value eval(Context& ctx) const override;
};

struct ListLit : Expr {
  std::vector<ExprPtr> items;
  Value eval(Context& ctx) const override;
};

struct DictLit : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  Value eval(Context& ctx) const override;
};

struct Attr : Expr {
  ExprPtr obj;
  std::string name;
  Value eval(Context& ctx) const override;
};

struct Item : Expr {
  ExprPtr obj, key;
  Value eval(Context& ctx) const override;
};

struct SliceExpr : Expr {
  ExprPtr obj, start, stop, step;  // start/stop/step may be null
  Value eval(Context& ctx) const override;
};

struct CallExpr : Expr {
  ExprPtr callee;
  std::vector<Arg> args;
  Value eval(Context& ctx) const override;
};

struct FilterExpr : Expr {
  ExprPtr obj;
  std::string name;
  FilterFn fn = nullptr;
  std::vector<Arg> args;
  Value eval(Context& ctx) const override;
};

struct TestExpr : Expr {
  ExprPtr obj;
  std::string name;
  TestFn fn = nullptr;
  std::vector<ExprPtr> args;
  bool negate = false;
  Value eval(Context& ctx) const override;
};

struct Unary : Expr {
  std::string op;  // "not", "-", "+"
  ExprPtr e;
  Value eval(Context& ctx) const override;
};

struct Binary : Expr {
  std::string op;  // arithmetic, comparison, "~", "in", "not in", "and", "or"
  ExprPtr a, b;
  Value eval(Context& ctx) const override;
};

struct CondExpr : Expr {
  ExprPtr then, cond, otherwise;  // otherwise may be null (-> undefined)
  Value eval(Context& ctx) const override;
};

// ---- statements -------------------------------------------------------------------------

struct TextNode : Node {
  std::string text;
  void render(Context& ctx, std::string& out) const override {
    ctx.wrote(text.size(), line);
    out += text;
  }
};

struct OutputNode : Node {
  ExprPtr e;
  void render(Context& ctx, std::string& out) const override;
};

struct IfNode : Node {
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body else_body;
  void render(Context& ctx, std::string& out) const override;
};

struct ForNode : Node {
  std::vector<std::string> targets;
  ExprPtr iter, cond;  // cond may be null
  Body body, else_body;
  void render(Context& ctx, std::string& out) const override;
};

struct SetNode : Node {
  std::vector<std::string> names;  // one name, or several for tuple unpacking
  std::string attr;                // set ns.attr = ... (names has one entry)
  ExprPtr value;
  void render(Context& ctx, std::string& out) const override;
};

struct SetBlockNode : Node {
  std::string name;
  Body body;
  void render(Context& ctx, std::string& out) const override;
};

struct LoopControlNode : Node {
  bool is_break = false;
  void render(Context&, std::string&) const override { throw LoopControl{is_break}; }
};

// {% macro name(a, b=default) %}...{% endmacro %}: rendering the node binds `name` to a
// function that renders the body with the arguments bound (defaults evaluated at call
// time, as Jinja2 does) and returns the text. Extra positional / keyword arguments land in
// `varargs` / `kwargs`, as in Jinja2.
struct MacroNode : Node {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
  void render(Context& ctx, std::string& out) const override;
};

struct BodyNode : Node {  // {% generation %} ... {% endgeneration %}
  Body body;
  void render(Context& ctx, std::string& out) const override {
    for (const auto& n : body) n->render(ctx, out);
  }
};

}  // namespace ninfer::jinja
