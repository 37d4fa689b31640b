// Jinja built-ins: filters, tests, string/dict methods and globals, with the behaviour of
// their Jinja2 / Python counterparts (transformers' tojson: json.dumps with
// ensure_ascii=False). upper/lower/title/capitalize change ASCII letters only.
#include <algorithm>
#include <cctype>
#include <ctime>

#include "core/error.h"
#include "text/jinja_ast.h"
#include "text/utf8.h"

namespace ninfer::jinja {
namespace {

// An argument given by keyword `name` or at position `index`, else `dflt`.
Value arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t index, const char* name,
          Value dflt = Value()) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return v;
  return index < args.size() ? args[index] : dflt;
}

const std::string& need_string(const Value& v, const char* what, int line) {
  if (!v.is_string()) fail("chat template line {}: {} needs a string, got '{}'", line, what, v.type_name());
  return v.as_string();
}

bool is_py_space(char32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Python str.strip / lstrip / rstrip; chars = undefined/None means whitespace.
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<std::pair<size_t, char32_t>> cps;  // (byte offset, code point)
  for (size_t i = 0; i < s.size();) {
    size_t at = i;
    cps.emplace_back(at, utf8::next_codepoint(s, i));
  }
  std::vector<char32_t> set;
  bool ws = chars.is_undefined() || chars.is_none();
  if (!ws) {
    const std::string& c = chars.as_string();
    for (size_t i = 0; i < c.size();) set.push_back(utf8::next_codepoint(c, i));
  }
  auto strip_it = [&](char32_t c) { return ws ? is_py_space(c) : std::find(set.begin(), set.end(), c) != set.end(); };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b].second)) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1].second)) --e;
  size_t bb = b < cps.size() ? cps[b].first : s.size();
  size_t ee = e < cps.size() ? cps[e].first : s.size();
  return s.substr(bb, ee - bb);
}

std::string ascii_map(std::string s, int (*f)(int)) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(c));
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_map(s, [](int c) { return std::tolower(c); });
  if (!out.empty() && static_cast<unsigned char>(out[0]) < 0x80) out[0] = static_cast<char>(std::toupper(out[0]));
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool prev_letter = false;
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    bool letter = u >= 0x80 || std::isalpha(u);
    if (u < 0x80 && std::isalpha(u)) c = static_cast<char>(prev_letter ? std::tolower(u) : std::toupper(u));
    prev_letter = letter;
  }
  return out;
}

List py_split(const std::string& s, const Value& sep, int64_t maxsplit) {
  List out;
  if (sep.is_undefined() || sep.is_none()) {
    size_t i = 0;
    int64_t n = 0;
    auto skip_ws = [&] {
      while (i < s.size()) {
        size_t j = i;
        if (!is_py_space(utf8::next_codepoint(s, j))) break;
        i = j;
      }
    };
    skip_ws();
    while (i < s.size()) {
      if (maxsplit >= 0 && n == maxsplit) {
        std::string rest = py_strip(s.substr(i), Value(), false, true);
        out.emplace_back(rest);
        return out;
      }
      size_t b = i;
      while (i < s.size()) {
        size_t j = i;
        if (is_py_space(utf8::next_codepoint(s, j))) break;
        i = j;
      }
      out.emplace_back(s.substr(b, i - b));
      ++n;
      skip_ws();
    }
    return out;
  }
  const std::string& d = sep.as_string();
  if (d.empty()) fail("chat template: split() separator is empty");
  size_t pos = 0;
  int64_t n = 0;
  while (true) {
    size_t k = s.find(d, pos);
    if (k == std::string::npos || (maxsplit >= 0 && n == maxsplit)) break;
    out.emplace_back(s.substr(pos, k - pos));
    pos = k + d.size();
    ++n;
  }
  out.emplace_back(s.substr(pos));
  return out;
}

// Python str.rsplit: as split, but at most `maxsplit` splits counted from the right.
List py_rsplit(const std::string& s, const Value& sep, int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, -1);
  List out;
  if (sep.is_undefined() || sep.is_none()) {
    std::vector<std::pair<size_t, char32_t>> cps;  // (byte offset, code point)
    for (size_t i = 0; i < s.size();) {
      size_t at = i;
      cps.emplace_back(at, utf8::next_codepoint(s, i));
    }
    size_t e = cps.size();
    int64_t n = 0;
    auto off = [&](size_t k) { return k < cps.size() ? cps[k].first : s.size(); };
    while (e > 0 && is_py_space(cps[e - 1].second)) --e;
    while (e > 0) {
      if (n == maxsplit) {  // the rest, leading whitespace kept (as Python does)
        out.emplace_back(s.substr(0, off(e)));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_py_space(cps[b - 1].second)) --b;
      out.emplace_back(s.substr(off(b), off(e) - off(b)));
      ++n;
      e = b;
      while (e > 0 && is_py_space(cps[e - 1].second)) --e;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  const std::string& d = sep.as_string();
  if (d.empty()) fail("chat template: rsplit() separator is empty");
  size_t end = s.size();
  int64_t n = 0;
  while (n < maxsplit && end >= d.size()) {
    size_t k = s.rfind(d, end - d.size());
    if (k == std::string::npos) break;
    out.emplace_back(s.substr(k + d.size(), end - k - d.size()));
    end = k;
    ++n;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

// Python str.splitlines() (no keepends): \n, \r\n, \r and the other line boundaries.
List py_splitlines(const std::string& s) {
  List out;
  std::string cur;
  for (size_t i = 0; i < s.size();) {
    size_t at = i;
    char32_t c = utf8::next_codepoint(s, i);
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      cur.append(s, at, i - at);
      continue;
    }
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    out.emplace_back(std::move(cur));
    cur.clear();
  }
  if (!cur.empty()) out.emplace_back(std::move(cur));
  return out;
}

// Python str.isdigit / isalpha / ... on ASCII (non-ASCII code points count as letters for
// isalpha/isalnum, which is right for the letters chat templates meet); false if empty.
bool ascii_all(const std::string& s, int (*pred)(int), bool non_ascii_ok) {
  if (s.empty()) return false;
  for (char ch : s) {
    auto u = static_cast<unsigned char>(ch);
    if (u >= 0x80) {
      if (!non_ascii_ok) return false;
    } else if (!pred(u)) {
      return false;
    }
  }
  return true;
}

std::string replace_str(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t k = s.find(from, pos);
    if (k == std::string::npos) break;
    out += s.substr(pos, k - pos) + to;
    pos = k + from.size();
    ++n;
  }
  return out + s.substr(pos);
}

int64_t length_of(const Value& v, int line) {
  switch (v.type()) {
    case Value::Type::Undefined: return 0;
    case Value::Type::String: {
      int64_t n = 0;
      for (size_t i = 0; i < v.as_string().size(); ++n) utf8::next_codepoint(v.as_string(), i);
      return n;
    }
    case Value::Type::List: return static_cast<int64_t>(v.as_list().size());
    case Value::Type::Dict: return static_cast<int64_t>(v.as_dict().items.size());
    default: fail("chat template line {}: object of type '{}' has no length", line, v.type_name());
  }
}

// Looks up a dotted attribute path ("a.b") on a value, for map/selectattr/sort/join.
Value attr_path(const Value& v, const std::string& path, int line) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t e = path.find('.', pos);
    if (e == std::string::npos) e = path.size();
    std::string part = path.substr(pos, e - pos);
    if (cur.is_undefined()) return cur;
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    cur = digits ? get_item(cur, Value(static_cast<int64_t>(std::stoll(part))), line) : get_attr(cur, part, line);
    pos = e + 1;
  }
  return cur;
}

// ---- filters ----------------------------------------------------------------------------

#define FILTER(name) Value name(Context& ctx, const Value& in, const std::vector<Value>& args, const Kwargs& kw, int line)
#define UNUSED (void)ctx, (void)args, (void)kw, (void)line

FILTER(f_trim) {
  UNUSED;
  return Value(py_strip(need_string(in.is_undefined() ? Value("") : in, "filter 'trim'", line), arg(args, kw, 0, "chars"), true, true));
}
FILTER(f_length) {
  UNUSED;
  return Value(length_of(in, line));
}
FILTER(f_tojson) {
  UNUSED;
  Value indent = arg(args, kw, 0, "indent");
  return Value(in.to_json(indent.type() == Value::Type::Int ? static_cast<int>(indent.as_int()) : -1));
}
FILTER(f_string) {
  UNUSED;
  return Value(in.str());
}
FILTER(f_upper) {
  UNUSED;
  return Value(ascii_map(in.str(), [](int c) { return std::toupper(c); }));
}
FILTER(f_lower) {
  UNUSED;
  return Value(ascii_map(in.str(), [](int c) { return std::tolower(c); }));
}
FILTER(f_capitalize) {
  UNUSED;
  return Value(capitalize(in.str()));
}
FILTER(f_title) {
  UNUSED;
  return Value(title(in.str()));
}
FILTER(f_default) {
  UNUSED;
  bool boolean = arg(args, kw, 1, "boolean", Value(false)).truthy();
  if (in.is_undefined() || (boolean && !in.truthy())) return arg(args, kw, 0, "default_value", Value(""));
  return in;
}
FILTER(f_join) {
  UNUSED;
  std::string sep = arg(args, kw, 0, "d", Value("")).str();
  Value attribute = arg(args, kw, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& v : iterate(in, line)) {
    if (!first) out += sep;
    first = false;
    out += (attribute.is_undefined() ? v : attr_path(v, attribute.str(), line)).str();
  }
  return Value(std::move(out));
}
FILTER(f_first) {
  UNUSED;
  List l = iterate(in, line);
  return l.empty() ? Value() : l.front();
}
FILTER(f_last) {
  UNUSED;
  List l = iterate(in, line);
  return l.empty() ? Value() : l.back();
}
FILTER(f_list) {
  UNUSED;
  return Value(iterate(in, line));
}
FILTER(f_items) {
  UNUSED;
  if (in.is_undefined()) return Value(List{});
  if (!in.is_dict()) fail("chat template line {}: filter 'items' needs a dict, got '{}'", line, in.type_name());
  List out;
  for (const auto& [k, v] : in.as_dict().items) out.emplace_back(List{Value(k), v});
  return Value(std::move(out));
}
FILTER(f_replace) {
  UNUSED;
  Value count = arg(args, kw, 2, "count");
  return Value(replace_str(in.str(), arg(args, kw, 0, "old").str(), arg(args, kw, 1, "new").str(),
                           count.type() == Value::Type::Int ? count.as_int() : -1));
}
FILTER(f_int) {
  UNUSED;
  Value dflt = arg(args, kw, 0, "default", Value(0));
  if (in.type() == Value::Type::Int) return in;
  if (in.type() == Value::Type::Bool) return Value(static_cast<int64_t>(in.as_bool()));
  if (in.type() == Value::Type::Float) return Value(static_cast<int64_t>(in.as_double()));
  if (in.is_string()) {
    std::string s = py_strip(in.as_string(), Value(), true, true);
    try {
      size_t used = 0;
      int64_t v = std::stoll(s, &used);
      if (used == s.size()) return Value(v);
      double d = std::stod(s, &used);
      if (used == s.size()) return Value(static_cast<int64_t>(d));
    } catch (const std::exception&) {
    }
  }
  return dflt;
}
FILTER(f_float) {
  UNUSED;
  Value dflt = arg(args, kw, 0, "default", Value(0.0));
  if (in.is_number() || in.type() == Value::Type::Bool) return Value(in.as_double());
  if (in.is_string()) {
    try {
      size_t used = 0;
      std::string s = py_strip(in.as_string(), Value(), true, true);
      double d = std::stod(s, &used);
      if (used == s.size()) return Value(d);
    } catch (const std::exception&) {
    }
  }
  return dflt;
}
FILTER(f_abs) {
  UNUSED;
  if (in.type() == Value::Type::Int) return Value(in.as_int() < 0 ? -in.as_int() : in.as_int());
  if (in.type() == Value::Type::Float) return Value(std::abs(in.as_double()));
  fail("chat template line {}: filter 'abs' needs a number, got '{}'", line, in.type_name());
}
FILTER(f_reverse) {
  UNUSED;
  List l = iterate(in, line);
  std::reverse(l.begin(), l.end());
  if (!in.is_string()) return Value(std::move(l));
  std::string s;
  for (const Value& c : l) s += c.as_string();
  return Value(std::move(s));
}
FILTER(f_safe) {
  UNUSED;
  return in;
}
FILTER(f_escape) {
  UNUSED;
  std::string out;
  for (char c : in.str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value(std::move(out));
}
FILTER(f_indent) {
  UNUSED;
  Value w = arg(args, kw, 0, "width", Value(4));
  std::string pad = w.is_string() ? w.as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, w.as_int())), ' ');
  bool first = arg(args, kw, 1, "first", Value(false)).truthy();
  bool blank = arg(args, kw, 2, "blank", Value(false)).truthy();
  List lines = py_split(in.str(), Value("\n"), -1);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i].as_string();
    if (i) out += "\n";
    if ((i > 0 || first) && (blank || !l.empty())) out += pad;
    out += l;
  }
  return Value(std::move(out));
}
FILTER(f_sort) {
  UNUSED;
  List l = iterate(in, line);
  bool reverse = arg(args, kw, 0, "reverse", Value(false)).truthy();
  Value attribute = arg(args, kw, 2, "attribute");
  auto key = [&](const Value& v) { return attribute.is_undefined() ? v : attr_path(v, attribute.str(), line); };
  std::stable_sort(l.begin(), l.end(), [&](const Value& a, const Value& b) {
    return reverse ? less_than(key(b), key(a), line) : less_than(key(a), key(b), line);
  });
  return Value(std::move(l));
}
FILTER(f_unique) {
  UNUSED;
  List out;
  for (const Value& v : iterate(in, line))
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return Value(std::move(out));
}

Value apply_filter_by_name(Context& ctx, const Value& in, const Value& name, const std::vector<Value>& rest, int line) {
  FilterFn f = find_filter(need_string(name, "map()", line));
  if (!f) fail("chat template line {}: unknown filter '{}'", line, name.as_string());
  return f(ctx, in, rest, {}, line);
}

FILTER(f_map) {
  List out;
  Value attribute = arg({}, kw, 0, "attribute");
  for (const Value& v : iterate(in, line)) {
    if (!attribute.is_undefined()) {
      Value r = attr_path(v, attribute.str(), line);
      out.push_back(r.is_undefined() ? arg({}, kw, 0, "default") : r);
    } else {
      if (args.empty()) fail("chat template line {}: map() needs a filter name or attribute=", line);
      out.push_back(apply_filter_by_name(ctx, v, args[0], std::vector<Value>(args.begin() + 1, args.end()), line));
    }
  }
  return Value(std::move(out));
}

bool run_test(Context& ctx, const Value& v, const Value& name, const std::vector<Value>& rest, int line) {
  TestFn t = find_test(need_string(name, "select()", line));
  if (!t) fail("chat template line {}: unknown test '{}'", line, name.as_string());
  return t(ctx, v, rest, line);
}

Value select_impl(Context& ctx, const Value& in, const std::vector<Value>& args, bool by_attr, bool keep, int line) {
  List out;
  size_t test_at = by_attr ? 1 : 0;
  if (by_attr && args.empty()) fail("chat template line {}: selectattr/rejectattr need an attribute name", line);
  for (const Value& v : iterate(in, line)) {
    Value subject = by_attr ? attr_path(v, args[0].str(), line) : v;
    bool ok = args.size() > test_at
                  ? run_test(ctx, subject, args[test_at], std::vector<Value>(args.begin() + test_at + 1, args.end()), line)
                  : subject.truthy();
    if (ok == keep) out.push_back(v);
  }
  return Value(std::move(out));
}
FILTER(f_select) {
  UNUSED;
  return select_impl(ctx, in, args, false, true, line);
}
FILTER(f_reject) {
  UNUSED;
  return select_impl(ctx, in, args, false, false, line);
}
FILTER(f_selectattr) {
  UNUSED;
  return select_impl(ctx, in, args, true, true, line);
}
FILTER(f_rejectattr) {
  UNUSED;
  return select_impl(ctx, in, args, true, false, line);
}

#undef FILTER
#undef UNUSED

// ---- tests ------------------------------------------------------------------------------

using T = Value::Type;
#define TEST_FN(name) bool name(Context& ctx, const Value& v, const std::vector<Value>& a, int line)
#define UNUSED (void)ctx, (void)a, (void)line
Value need_arg(const std::vector<Value>& a, const char* test, int line) {
  if (a.empty()) fail("chat template line {}: test '{}' needs an argument", line, test);
  return a[0];
}

TEST_FN(t_defined) { UNUSED; return !v.is_undefined(); }
TEST_FN(t_undefined) { UNUSED; return v.is_undefined(); }
TEST_FN(t_none) { UNUSED; return v.is_none(); }
TEST_FN(t_boolean) { UNUSED; return v.type() == T::Bool; }
TEST_FN(t_true) { UNUSED; return v.type() == T::Bool && v.as_bool(); }
TEST_FN(t_false) { UNUSED; return v.type() == T::Bool && !v.as_bool(); }
TEST_FN(t_integer) { UNUSED; return v.type() == T::Int; }
TEST_FN(t_float) { UNUSED; return v.type() == T::Float; }
TEST_FN(t_number) { UNUSED; return v.type() == T::Int || v.type() == T::Float || v.type() == T::Bool; }
TEST_FN(t_string) { UNUSED; return v.is_string(); }
TEST_FN(t_mapping) { UNUSED; return v.is_dict(); }
TEST_FN(t_iterable) { UNUSED; return v.is_list() || v.is_dict() || v.is_string(); }
TEST_FN(t_sequence) { UNUSED; return v.is_list() || v.is_dict() || v.is_string(); }
TEST_FN(t_callable) { UNUSED; return v.type() == T::Function; }
TEST_FN(t_eq) { UNUSED; return v == need_arg(a, "eq", line); }
TEST_FN(t_ne) { UNUSED; return !(v == need_arg(a, "ne", line)); }
TEST_FN(t_lt) { UNUSED; return less_than(v, need_arg(a, "lt", line), line); }
TEST_FN(t_le) { UNUSED; return !less_than(need_arg(a, "le", line), v, line); }
TEST_FN(t_gt) { UNUSED; return less_than(need_arg(a, "gt", line), v, line); }
TEST_FN(t_ge) { UNUSED; return !less_than(v, need_arg(a, "ge", line), line); }
TEST_FN(t_in) { UNUSED; return contains(need_arg(a, "in", line), v, line); }
TEST_FN(t_sameas) { UNUSED; return v == need_arg(a, "sameas", line) && v.type() == a[0].type(); }
TEST_FN(t_lower) { UNUSED; return v.is_string() && ascii_map(v.as_string(), [](int c) { return std::tolower(c); }) == v.as_string(); }
TEST_FN(t_upper) { UNUSED; return v.is_string() && ascii_map(v.as_string(), [](int c) { return std::toupper(c); }) == v.as_string(); }
int64_t int_of(const Value& v, const char* test, int line) {
  if (v.type() != T::Int) fail("chat template line {}: test '{}' needs an integer, got '{}'", line, test, v.type_name());
  return v.as_int();
}
TEST_FN(t_even) { UNUSED; return int_of(v, "even", line) % 2 == 0; }
TEST_FN(t_odd) { UNUSED; return int_of(v, "odd", line) % 2 != 0; }
TEST_FN(t_divisibleby) {
  UNUSED;
  int64_t d = int_of(need_arg(a, "divisibleby", line), "divisibleby", line);
  if (d == 0) fail("chat template line {}: divisibleby 0", line);
  return int_of(v, "divisibleby", line) % d == 0;
}
#undef TEST_FN
#undef UNUSED

}  // namespace

FilterFn find_filter(const std::string& name) {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"trim", f_trim},         {"length", f_length},   {"count", f_length},       {"tojson", f_tojson},
      {"string", f_string},     {"upper", f_upper},     {"lower", f_lower},        {"capitalize", f_capitalize},
      {"title", f_title},       {"default", f_default}, {"d", f_default},          {"join", f_join},
      {"first", f_first},       {"last", f_last},       {"list", f_list},          {"items", f_items},
      {"replace", f_replace},   {"int", f_int},         {"float", f_float},        {"abs", f_abs},
      {"reverse", f_reverse},   {"safe", f_safe},       {"escape", f_escape},      {"e", f_escape},
      {"indent", f_indent},     {"sort", f_sort},       {"unique", f_unique},      {"map", f_map},
      {"select", f_select},     {"reject", f_reject},   {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr}};
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

TestFn find_test(const std::string& name) {
  static const std::unordered_map<std::string, TestFn> table = {
      {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},         {"boolean", t_boolean},
      {"true", t_true},         {"false", t_false},         {"integer", t_integer},   {"float", t_float},
      {"number", t_number},     {"string", t_string},       {"mapping", t_mapping},   {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable},   {"eq", t_eq},             {"equalto", t_eq},
      {"==", t_eq},             {"ne", t_ne},               {"!=", t_ne},             {"lt", t_lt},
      {"lessthan", t_lt},       {"<", t_lt},                {"le", t_le},             {"<=", t_le},
      {"gt", t_gt},             {"greaterthan", t_gt},      {">", t_gt},              {"ge", t_ge},
      {">=", t_ge},             {"in", t_in},               {"sameas", t_sameas},     {"lower", t_lower},
      {"upper", t_upper},       {"even", t_even},           {"odd", t_odd},           {"divisibleby", t_divisibleby}};
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

Value call_method(const Value& obj, const std::string& name, const std::vector<Value>& args, const Kwargs& kw,
                  int line) {
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    if (name == "strip") return Value(py_strip(s, arg(args, kw, 0, "chars"), true, true));
    if (name == "lstrip") return Value(py_strip(s, arg(args, kw, 0, "chars"), true, false));
    if (name == "rstrip") return Value(py_strip(s, arg(args, kw, 0, "chars"), false, true));
    if (name == "upper") return Value(ascii_map(s, [](int c) { return std::toupper(c); }));
    if (name == "lower") return Value(ascii_map(s, [](int c) { return std::tolower(c); }));
    if (name == "title") return Value(title(s));
    if (name == "capitalize") return Value(capitalize(s));
    if (name == "startswith" || name == "endswith") {
      Value p = arg(args, kw, 0, "prefix");
      List options = p.is_list() ? p.as_list() : List{p};
      for (const Value& o : options) {
        const std::string& x = need_string(o, name.c_str(), line);
        if (name == "startswith" ? s.starts_with(x) : s.ends_with(x)) return Value(true);
      }
      return Value(false);
    }
    if (name == "split" || name == "rsplit") {
      Value maxsplit = arg(args, kw, 1, "maxsplit", Value(-1));
      if (maxsplit.type() != Value::Type::Int)
        fail("chat template line {}: {}() maxsplit must be an integer, got '{}'", line, name, maxsplit.type_name());
      Value sep = arg(args, kw, 0, "sep");
      if (!sep.is_undefined() && !sep.is_none()) need_string(sep, name.c_str(), line);
      return Value(name == "split" ? py_split(s, sep, maxsplit.as_int()) : py_rsplit(s, sep, maxsplit.as_int()));
    }
    if (name == "splitlines") return Value(py_splitlines(s));
    if (name == "removeprefix" || name == "removesuffix") {
      // NOTE: the argument is held in a variable: need_string returns a reference into it.
      const Value xv = arg(args, kw, 0, name == "removeprefix" ? "prefix" : "suffix");
      const std::string& x = need_string(xv, name.c_str(), line);
      if (name == "removeprefix") return Value(s.starts_with(x) ? s.substr(x.size()) : s);
      return Value(s.ends_with(x) ? s.substr(0, s.size() - x.size()) : s);
    }
    if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") return Value(ascii_all(s, ::isdigit, false));
    if (name == "isalpha") return Value(ascii_all(s, ::isalpha, true));
    if (name == "isalnum") return Value(ascii_all(s, ::isalnum, true));
    if (name == "isspace") {
      bool all = !s.empty();
      for (size_t i = 0; i < s.size() && all;) all = is_py_space(utf8::next_codepoint(s, i));
      return Value(all);
    }
    if (name == "islower" || name == "isupper") {
      bool cased = false, ok = true;
      for (char ch : s) {
        auto u = static_cast<unsigned char>(ch);
        if (std::isupper(u)) cased = true, ok = ok && name == "isupper";
        if (std::islower(u)) cased = true, ok = ok && name == "islower";
      }
      return Value(cased && ok);
    }
    if (name == "rfind") {
      size_t k = s.rfind(need_string(arg(args, kw, 0, "sub"), "rfind()", line));
      return Value(k == std::string::npos ? int64_t(-1) : static_cast<int64_t>(k));
    }
    if (name == "replace") {
      Value count = arg(args, kw, 2, "count", Value(-1));
      return Value(replace_str(s, need_string(arg(args, kw, 0, "old"), "replace()", line),
                               need_string(arg(args, kw, 1, "new"), "replace()", line), count.as_int()));
    }
    if (name == "join") {
      std::string out;
      bool first = true;
      for (const Value& v : iterate(arg(args, kw, 0, "iterable"), line)) {
        out += (first ? "" : s) + v.str();
        first = false;
      }
      return Value(std::move(out));
    }
    if (name == "find") {
      size_t k = s.find(need_string(arg(args, kw, 0, "sub"), "find()", line));
      return Value(k == std::string::npos ? int64_t(-1) : static_cast<int64_t>(k));
    }
    if (name == "count") {
      const Value subv = arg(args, kw, 0, "sub");  // held: need_string returns a reference into it
      const std::string& sub = need_string(subv, "count()", line);
      int64_t n = 0;
      for (size_t k = s.find(sub); !sub.empty() && k != std::string::npos; k = s.find(sub, k + sub.size())) ++n;
      return Value(n);
    }
  } else if (obj.is_list()) {
    // NOTE: no append/extend/pop: transformers renders in Jinja2's ImmutableSandboxedEnvironment,
    // which refuses methods that modify a list, so a template that calls them fails there too.
    const List& l = obj.as_list();
    if (name == "index" || name == "count") {
      Value x = arg(args, kw, 0, "value");
      int64_t n = 0;
      for (size_t k = 0; k < l.size(); ++k) {
        if (!(l[k] == x)) continue;
        if (name == "index") return Value(static_cast<int64_t>(k));
        ++n;
      }
      if (name == "index") fail("chat template line {}: {} is not in list", line, x.repr());
      return Value(n);
    }
  } else if (obj.is_dict()) {
    const Dict& d = obj.as_dict();
    if (name == "items") {
      List out;
      for (const auto& [k, v] : d.items) out.emplace_back(List{Value(k), v});
      return Value(std::move(out));
    }
    if (name == "keys") {
      List out;
      for (const auto& [k, v] : d.items) out.emplace_back(k);
      return Value(std::move(out));
    }
    if (name == "values") {
      List out;
      for (const auto& [k, v] : d.items) out.push_back(v);
      return Value(std::move(out));
    }
    if (name == "get") {
      Value key = arg(args, kw, 0, "key");
      const Value* v = key.is_string() ? d.find(key.as_string()) : nullptr;
      return v ? *v : arg(args, kw, 1, "default", Value::none());
    }
  }
  fail("chat template line {}: unsupported method '{}' on a '{}'", line, name, obj.type_name());
}

const std::unordered_map<std::string, Value>& builtin_globals() {
  static const std::unordered_map<std::string, Value> g = [] {
    std::unordered_map<std::string, Value> m;
    m["range"] = Value::function([](const std::vector<Value>& a, const Kwargs&) {
      if (a.empty() || a.size() > 3) fail("chat template: range() takes 1 to 3 arguments");
      for (const Value& x : a)
        if (x.type() != Value::Type::Int) fail("chat template: range() arguments must be integers");
      int64_t start = a.size() > 1 ? a[0].as_int() : 0, stop = a.size() > 1 ? a[1].as_int() : a[0].as_int();
      int64_t step = a.size() > 2 ? a[2].as_int() : 1;
      if (step == 0) fail("chat template: range() step must not be zero");
      // The count first (in unsigned arithmetic: stop - start may not fit an int64).
      uint64_t count = 0;
      if (step > 0 && start < stop) count = (uint64_t(stop) - uint64_t(start) - 1) / uint64_t(step) + 1;
      if (step < 0 && start > stop) count = (uint64_t(start) - uint64_t(stop) - 1) / (0 - uint64_t(step)) + 1;
      check_list_size(count, 0);
      List out;
      out.reserve(count);
      for (uint64_t k = 0; k < count; ++k) out.emplace_back(int64_t(uint64_t(start) + k * uint64_t(step)));
      return Value(std::move(out));
    });
    auto make_dict = [](bool ns) {
      return [ns](const std::vector<Value>& a, const Kwargs& kw) {
        Value d = Value::dict();
        d.as_dict().is_namespace = ns;
        for (const Value& x : a) {
          if (!x.is_dict()) fail("chat template: {}() takes keyword arguments or a dict", ns ? "namespace" : "dict");
          for (const auto& [k, v] : x.as_dict().items) d.set(k, v);
        }
        for (const auto& [k, v] : kw) d.set(k, v);
        return d;
      };
    };
    m["namespace"] = Value::function(make_dict(true));
    m["dict"] = Value::function(make_dict(false));
    m["raise_exception"] = Value::function([](const std::vector<Value>& a, const Kwargs&) -> Value {
      fail("chat template raised an exception: {}", a.empty() ? std::string("(no message)") : a[0].str());
    });
    m["strftime_now"] = Value::function([](const std::vector<Value>& a, const Kwargs&) {
      if (a.empty() || !a[0].is_string()) fail("chat template: strftime_now() needs a format string");
      std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      char buf[256];
      size_t n = std::strftime(buf, sizeof buf, a[0].as_string().c_str(), &tm);
      return Value(std::string(buf, n));
    });
    return m;
  }();
  return g;
}

}  // namespace ninfer::jinja
