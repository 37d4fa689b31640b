// Jinja parser: recursive descent over the lexer's tokens, with Jinja2's operator
// precedence (lowest first): `x if c else y`, or, and, not, comparisons and (not) in,
// + -, ~, * / // %, **, unary - +, then postfix . [] () and filters / tests.
#include <set>

#include "core/error.h"
#include "text/jinja_lexer.h"
#include "text/jinja_nodes.h"

namespace ninfer::jinja {
namespace {

using K = Token::Kind;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_all() {
    std::string which;
    return parse_body({}, &which);
  }

 private:
  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool is_op(const char* op, size_t k = 0) const { return peek(k).kind == K::Op && peek(k).text == op; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).kind == K::Name && peek(k).text == n; }

  [[noreturn]] void error(const std::string& msg) const {
    fail("chat template line {}: {}", peek().line, msg);
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case K::Text: return "text";
      case K::VarBegin: return "'{{'";
      case K::VarEnd: return "'}}'";
      case K::BlockBegin: return "'{%'";
      case K::BlockEnd: return "'%}'";
      case K::Name: return "'" + t.text + "'";
      case K::String: return "a string";
      case K::Int:
      case K::Float: return "a number";
      case K::Op: return "'" + t.text + "'";
      case K::Eof: return "the end of the template";
    }
    return "?";
  }
  void expect_op(const char* op) {
    if (!is_op(op)) error(fmt::format("expected '{}', found {}", op, describe(peek())));
    ++i_;
  }
  void expect(K kind, const char* what) {
    if (peek().kind != kind) error(fmt::format("expected {}, found {}", what, describe(peek())));
    ++i_;
  }
  std::string expect_name(const char* what) {
    if (peek().kind != K::Name) error(fmt::format("expected {}, found {}", what, describe(peek())));
    return next().text;
  }
  void end_tag(const std::string& tag) {
    if (peek().kind != K::BlockEnd)
      error(fmt::format("unexpected {} in '{{% {} %}}' tag", describe(peek()), tag));
    ++i_;
  }

  // Bounds the syntax tree's depth (kMaxNesting): one level per nested block or expression and
  // one per link of an operator, filter or postfix chain (`a ~ b ~ c` is a tree of depth 3),
  // since evaluating and destroying the tree both recurse through it.
  struct Nest {
    Parser& p;
    int n = 0;
    explicit Nest(Parser& pp, int levels = 1) : p(pp) {
      for (int k = 0; k < levels; ++k) deeper();
    }
    void deeper() {
      ++n;
      if (++p.depth_ > kMaxNesting)
        p.error(fmt::format("the template nests deeper than {} levels (blocks, brackets and operator chains; the "
                            "nesting limit, kMaxNesting)",
                            kMaxNesting));
    }
    ~Nest() { p.depth_ -= n; }
  };

  template <typename T>
  std::unique_ptr<T> make(int line) {
    auto p = std::make_unique<T>();
    p->line = line;
    return p;
  }

  // ---- statements ----

  // Parses nodes until a block tag named in `ends` (its name consumed, reported in *which).
  Body parse_body(const std::set<std::string>& ends, std::string* which) {
    Nest nest(*this);
    Body body;
    while (true) {
      const Token& tk = peek();
      switch (tk.kind) {
        case K::Eof: {
          if (!ends.empty()) {
            std::string list;
            for (const auto& e : ends) list += (list.empty() ? "" : " or ") + ("'{% " + e + " %}'");
            error("unexpected end of template, expected " + list);
          }
          return body;
        }
        case K::Text: {
          auto n = make<TextNode>(tk.line);
          n->text = tk.text;
          ++i_;
          body.push_back(std::move(n));
          break;
        }
        case K::VarBegin: {
          ++i_;
          auto n = make<OutputNode>(tk.line);
          n->e = parse_expr();
          expect(K::VarEnd, "'}}'");
          body.push_back(std::move(n));
          break;
        }
        case K::BlockBegin: {
          ++i_;
          int line = peek().line;
          std::string tag = expect_name("a tag name after '{%'");
          if (ends.count(tag)) {
            *which = tag;
            return body;
          }
          body.push_back(parse_tag(tag, line));
          break;
        }
        default:
          error("unexpected " + describe(tk));
      }
    }
  }

  NodePtr parse_tag(const std::string& tag, int line) {
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("chat template line {}: '{{% {} %}}' outside a for loop", line, tag);
      auto n = make<LoopControlNode>(line);
      n->is_break = tag == "break";
      end_tag(tag);
      return n;
    }
    if (tag == "generation") {
      end_tag(tag);
      auto n = make<BodyNode>(line);
      std::string which;
      n->body = parse_body({"endgeneration"}, &which);
      end_tag(which);
      return n;
    }
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") fail("chat template line {}: unsupported tag 'call' ({{% call %}} blocks are not implemented)", line);
    static const std::set<std::string> known_ends = {"endif", "endfor", "endset", "else", "elif", "endgeneration",
                                                     "endmacro"};
    if (known_ends.count(tag)) fail("chat template line {}: unexpected '{{% {} %}}'", line, tag);
    fail("chat template line {}: unsupported tag '{}'", line, tag);
  }

  NodePtr parse_macro(int line) {
    auto n = make<MacroNode>(line);
    n->name = expect_name("a macro name");
    expect_op("(");
    bool seen_default = false;
    while (!is_op(")")) {
      std::string p = expect_name("a macro parameter name");
      ExprPtr dflt;
      if (is_op("=")) {
        ++i_;
        dflt = parse_expr();
        seen_default = true;
      } else if (seen_default) {
        error(fmt::format("macro '{}': parameter '{}' without a default follows one with a default", n->name, p));
      }
      n->params.emplace_back(std::move(p), std::move(dflt));
      if (!is_op(",")) break;
      ++i_;
    }
    expect_op(")");
    end_tag("macro");
    std::string which;
    // NOTE: break/continue inside a macro body do not reach a loop around the call.
    int saved_depth = loop_depth_;
    loop_depth_ = 0;
    n->body = parse_body({"endmacro"}, &which);
    loop_depth_ = saved_depth;
    end_tag("endmacro");
    return n;
  }

  NodePtr parse_if(int line) {
    auto n = make<IfNode>(line);
    std::string which = "if";
    while (which == "if" || which == "elif") {
      ExprPtr cond = parse_expr();
      end_tag(which);
      Body b = parse_body({"elif", "else", "endif"}, &which);
      n->branches.emplace_back(std::move(cond), std::move(b));
    }
    if (which == "else") {
      end_tag("else");
      n->else_body = parse_body({"endif"}, &which);
    }
    end_tag("endif");
    return n;
  }

  NodePtr parse_for(int line) {
    auto n = make<ForNode>(line);
    n->targets.push_back(expect_name("a loop variable"));
    while (is_op(",")) {
      ++i_;
      n->targets.push_back(expect_name("a loop variable"));
    }
    if (!is_name("in")) error(fmt::format("expected 'in' in for loop, found {}", describe(peek())));
    ++i_;
    n->iter = parse_expr(/*with_cond=*/false);
    if (is_name("if")) {
      ++i_;
      n->cond = parse_expr(false);
    }
    if (is_name("recursive")) error("unsupported: recursive for loops");
    end_tag("for");
    std::string which;
    ++loop_depth_;
    n->body = parse_body({"else", "endfor"}, &which);
    --loop_depth_;
    if (which == "else") {
      end_tag("else");
      n->else_body = parse_body({"endfor"}, &which);
    }
    end_tag("endfor");
    return n;
  }

  NodePtr parse_set(int line) {
    std::vector<std::string> names{expect_name("a variable name after 'set'")};
    std::string attr;
    if (is_op(".")) {
      ++i_;
      attr = expect_name("an attribute name");
    } else {
      while (is_op(",")) {
        ++i_;
        names.push_back(expect_name("a variable name"));
      }
    }
    if (is_op("=")) {
      ++i_;
      auto n = make<SetNode>(line);
      n->names = std::move(names);
      n->attr = std::move(attr);
      n->value = parse_expr();
      end_tag("set");
      return n;
    }
    if (peek().kind == K::BlockEnd && attr.empty() && names.size() == 1) {
      ++i_;
      auto n = make<SetBlockNode>(line);
      n->name = names[0];
      std::string which;
      n->body = parse_body({"endset"}, &which);
      end_tag("endset");
      return n;
    }
    error(fmt::format("expected '=' in 'set', found {}", describe(peek())));
  }

  // ---- expressions ----

  ExprPtr parse_expr(bool with_cond = true) {
    Nest nest(*this);
    int line = peek().line;
    ExprPtr e = parse_or();
    if (with_cond && is_name("if")) {
      ++i_;
      auto c = make<CondExpr>(line);
      c->then = std::move(e);
      c->cond = parse_or();
      if (is_name("else")) {
        ++i_;
        c->otherwise = parse_expr();
      }
      return c;
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b, int line) {
    auto n = make<Binary>(line);
    n->op = std::move(op);
    n->a = std::move(a);
    n->b = std::move(b);
    return n;
  }

  ExprPtr parse_or() {
    Nest nest(*this, 0);
    ExprPtr a = parse_and();
    while (is_name("or")) {
      int line = next().line;
      nest.deeper();
      a = binary("or", std::move(a), parse_and(), line);
    }
    return a;
  }

  ExprPtr parse_and() {
    Nest nest(*this, 0);
    ExprPtr a = parse_not();
    while (is_name("and")) {
      int line = next().line;
      nest.deeper();
      a = binary("and", std::move(a), parse_not(), line);
    }
    return a;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      auto n = make<Unary>(next().line);
      n->op = "not";
      n->e = parse_not();
      return n;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    Nest nest(*this, 0);
    ExprPtr a = parse_math1();
    while (true) {
      int line = peek().line;
      nest.deeper();
      if (peek().kind == K::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                   peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        std::string op = next().text;
        a = binary(op, std::move(a), parse_math1(), line);
      } else if (is_name("in")) {
        ++i_;
        a = binary("in", std::move(a), parse_math1(), line);
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        a = binary("not in", std::move(a), parse_math1(), line);
      } else {
        return a;
      }
    }
  }

  ExprPtr parse_math1() {
    Nest nest(*this, 0);
    ExprPtr a = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      nest.deeper();
      a = binary(op.text, std::move(a), parse_concat(), op.line);
    }
    return a;
  }

  ExprPtr parse_concat() {
    Nest nest(*this, 0);
    ExprPtr a = parse_math2();
    while (is_op("~")) {
      int line = next().line;
      nest.deeper();
      a = binary("~", std::move(a), parse_math2(), line);
    }
    return a;
  }

  ExprPtr parse_math2() {
    Nest nest(*this, 0);
    ExprPtr a = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      nest.deeper();
      a = binary(op.text, std::move(a), parse_pow(), op.line);
    }
    return a;
  }

  ExprPtr parse_pow() {
    Nest nest(*this, 0);
    ExprPtr a = parse_unary();
    while (is_op("**")) {
      int line = next().line;
      nest.deeper();
      a = binary("**", std::move(a), parse_unary(), line);
    }
    return a;
  }

  ExprPtr parse_unary(bool with_filter = true) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      Nest nest(*this);
      auto u = make<Unary>(peek().line);
      u->op = next().text;
      u->e = parse_unary(false);
      node = std::move(u);
    } else {
      node = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filters(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary() {
    const Token& tk = peek();
    int line = tk.line;
    switch (tk.kind) {
      case K::Name: {
        ++i_;
        auto lit = [&](Value v) {
          auto l = make<Literal>(line);
          l->v = std::move(v);
          return l;
        };
        if (tk.text == "true" || tk.text == "True") return lit(true);
        if (tk.text == "false" || tk.text == "False") return lit(false);
        if (tk.text == "none" || tk.text == "None") return lit(Value::none());
        auto n = make<NameRef>(line);
        n->name = tk.text;
        return n;
      }
      case K::String: {
        std::string s;
        while (peek().kind == K::String) s += next().text;  // adjacent literals concatenate
        auto l = make<Literal>(line);
        l->v = Value(std::move(s));
        return l;
      }
      case K::Int: {
        ++i_;
        auto l = make<Literal>(line);
        l->v = Value(tk.ival);
        return l;
      }
      case K::Float: {
        ++i_;
        auto l = make<Literal>(line);
        l->v = Value(tk.fval);
        return l;
      }
      case K::Op:
        if (tk.text == "(") {
          ++i_;
          if (is_op(")")) {  // empty tuple
            ++i_;
            return make<ListLit>(line);
          }
          ExprPtr e = parse_expr();
          if (!is_op(",")) {
            expect_op(")");
            return e;
          }
          auto l = make<ListLit>(line);  // a tuple behaves as a list here
          l->items.push_back(std::move(e));
          while (is_op(",")) {
            ++i_;
            if (is_op(")")) break;
            l->items.push_back(parse_expr());
          }
          expect_op(")");
          return l;
        }
        if (tk.text == "[") {
          ++i_;
          auto l = make<ListLit>(line);
          while (!is_op("]")) {
            l->items.push_back(parse_expr());
            if (!is_op(",")) break;
            ++i_;
          }
          expect_op("]");
          return l;
        }
        if (tk.text == "{") {
          ++i_;
          auto d = make<DictLit>(line);
          while (!is_op("}")) {
            ExprPtr k = parse_expr();
            expect_op(":");
            ExprPtr v = parse_expr();
            d->items.emplace_back(std::move(k), std::move(v));
            if (!is_op(",")) break;
            ++i_;
          }
          expect_op("}");
          return d;
        }
        break;
      default:
        break;
    }
    error("unexpected " + describe(tk) + " in expression");
  }

  std::vector<Arg> parse_args() {  // after '('
    std::vector<Arg> args;
    while (!is_op(")")) {
      Arg a;
      if (peek().kind == K::Name && is_op("=", 1)) {
        a.name = next().text;
        ++i_;
      } else if (!args.empty() && !args.back().name.empty()) {
        error("positional argument after a keyword argument");
      }
      a.value = parse_expr();
      args.push_back(std::move(a));
      if (!is_op(",")) break;
      ++i_;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    Nest nest(*this, 0);
    while (true) {
      int line = peek().line;
      if (is_op(".") || is_op("[") || is_op("(")) nest.deeper();
      if (is_op(".")) {
        ++i_;
        if (peek().kind == K::Int) {  // x.0 is x[0]
          auto it = make<Item>(line);
          auto k = make<Literal>(line);
          k->v = Value(next().ival);
          it->obj = std::move(node);
          it->key = std::move(k);
          node = std::move(it);
          continue;
        }
        auto a = make<Attr>(line);
        a->obj = std::move(node);
        a->name = expect_name("an attribute name after '.'");
        node = std::move(a);
      } else if (is_op("[")) {
        ++i_;
        ExprPtr start;
        if (!is_op(":")) start = parse_expr();
        if (is_op(":")) {
          ++i_;
          auto s = make<SliceExpr>(line);
          s->obj = std::move(node);
          s->start = std::move(start);
          if (!is_op(":") && !is_op("]")) s->stop = parse_expr();
          if (is_op(":")) {
            ++i_;
            if (!is_op("]")) s->step = parse_expr();
          }
          expect_op("]");
          node = std::move(s);
        } else {
          expect_op("]");
          auto it = make<Item>(line);
          it->obj = std::move(node);
          it->key = std::move(start);
          node = std::move(it);
        }
      } else if (is_op("(")) {
        ++i_;
        auto c = make<CallExpr>(line);
        c->callee = std::move(node);
        c->args = parse_args();
        node = std::move(c);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filters(ExprPtr node) {
    Nest nest(*this, 0);
    while (true) {
      int line = peek().line;
      if (is_op("|") || is_name("is")) nest.deeper();
      if (is_op("|")) {
        ++i_;
        auto f = make<FilterExpr>(line);
        f->name = expect_name("a filter name after '|'");
        f->fn = find_filter(f->name);
        if (!f->fn) fail("chat template line {}: unknown filter '{}'", line, f->name);
        f->obj = std::move(node);
        if (is_op("(")) {
          ++i_;
          f->args = parse_args();
        }
        node = std::move(f);
      } else if (is_name("is")) {
        ++i_;
        auto t = make<TestExpr>(line);
        if (is_name("not")) {
          ++i_;
          t->negate = true;
        }
        // Tests named by keywords or operators: "is none", "is true", "is ==" are names here.
        if (peek().kind == K::Name) t->name = next().text;
        else if (peek().kind == K::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                          peek().text == "<=" || peek().text == ">" || peek().text == ">="))
          t->name = next().text;
        else error(fmt::format("expected a test name after 'is', found {}", describe(peek())));
        t->fn = find_test(t->name);
        if (!t->fn) fail("chat template line {}: unknown test '{}'", line, t->name);
        t->obj = std::move(node);
        if (is_op("(")) {
          ++i_;
          for (Arg& a : parse_args()) {
            if (!a.name.empty()) error("tests take positional arguments only");
            t->args.push_back(std::move(a.value));
          }
        } else if (starts_bare_test_arg()) {
          t->args.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(t);
      } else {
        return node;
      }
    }
  }

  // Jinja lets a test take one argument without parentheses: `x is divisibleby 3`.
  bool starts_bare_test_arg() const {
    const Token& tk = peek();
    if (tk.kind == K::String || tk.kind == K::Int || tk.kind == K::Float) return true;
    if (tk.kind == K::Op) return tk.text == "[" || tk.text == "{";
    if (tk.kind == K::Name) {
      static const std::set<std::string> stop = {"else", "or", "and", "if", "is", "in", "not"};
      return !stop.count(tk.text);
    }
    return false;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  int depth_ = 0;  // current tree depth, see Nest
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(lex(source)).parse_all(); }

}  // namespace ninfer::jinja
