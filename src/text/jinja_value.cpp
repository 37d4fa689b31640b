// jinja::Value: Python-like semantics for truth, equality, str(), repr() and json.dumps().
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "text/jinja.h"
#include "text/utf8.h"

namespace ninfer::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(std::string key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(v));
}

Value Value::none() {
  Value v;
  v.v_ = None{};
  return v;
}

Value Value::dict(std::vector<std::pair<std::string, Value>> items) {
  Value v;
  auto d = std::make_shared<Dict>();
  for (auto& [k, x] : items) d->set(std::move(k), std::move(x));
  v.v_ = std::move(d);
  return v;
}

Value Value::function(Function f) {
  Value v;
  v.v_ = std::make_shared<Function>(std::move(f));
  return v;
}

double Value::as_double() const {
  if (type() == Type::Int) return static_cast<double>(as_int());
  if (type() == Type::Bool) return as_bool() ? 1.0 : 0.0;
  return std::get<double>(v_);
}

Value& Value::set(std::string key, Value v) {
  as_dict().set(std::move(key), std::move(v));
  return *this;
}

Value Value::get(std::string_view key) const {
  if (!is_dict()) return Value();
  const Value* p = as_dict().find(key);
  return p ? *p : Value();
}

bool Value::truthy() const {
  switch (type()) {
    case Type::Undefined:
    case Type::None:
      return false;
    case Type::Bool:
      return as_bool();
    case Type::Int:
      return as_int() != 0;
    case Type::Float:
      return as_double() != 0.0;
    case Type::String:
      return !as_string().empty();
    case Type::List:
      return !as_list().empty();
    case Type::Dict:
      return !as_dict().items.empty();
    case Type::Function:
      return true;
  }
  return false;
}

namespace {

// Python's repr(float): the shortest round-trip digits, fixed notation for exponents in
// [-4, 16), scientific otherwise, always with a '.' or an exponent.
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : sci.substr(0, epos))
    if (c != '.') digits.push_back(c);
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp + 1);
      out += '.';
      out += digits.substr(exp + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += e;
  }
  if (!neg) return out;
  std::string r = "-";
  return r += out;
}

std::string string_repr(const std::string& s) {
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) out += std::string("\\") + q;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else out.push_back(static_cast<char>(c));
  }
  out.push_back(q);
  return out;
}

void json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void json_dump(std::string& out, const Value& v, int indent, int level) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out.push_back('\n');
    out.append(static_cast<size_t>(indent) * lvl, ' ');
  };
  // Python: item separator ", " without indent, "," with it.
  const char* sep = indent < 0 ? ", " : ",";
  switch (v.type()) {
    case Value::Type::Undefined:
    case Value::Type::None:
      out += "null";
      break;
    case Value::Type::Bool:
      out += v.as_bool() ? "true" : "false";
      break;
    case Value::Type::Int:
      out += std::to_string(v.as_int());
      break;
    case Value::Type::Float: {
      double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
      break;
    }
    case Value::Type::String:
      json_string(out, v.as_string());
      break;
    case Value::Type::List: {
      const List& l = v.as_list();
      if (l.empty()) {
        out += "[]";
        break;
      }
      out.push_back('[');
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += sep;
        newline(level + 1);
        json_dump(out, l[i], indent, level + 1);
      }
      newline(level);
      out.push_back(']');
      break;
    }
    case Value::Type::Dict: {
      const Dict& d = v.as_dict();
      if (d.items.empty()) {
        out += "{}";
        break;
      }
      out.push_back('{');
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += sep;
        newline(level + 1);
        json_string(out, d.items[i].first);
        out += ": ";
        json_dump(out, d.items[i].second, indent, level + 1);
      }
      newline(level);
      out.push_back('}');
      break;
    }
    case Value::Type::Function:
      fail("tojson: a function cannot be serialised to JSON");
  }
}

}  // namespace

std::string Value::str() const {
  switch (type()) {
    case Type::Undefined:
      return "";
    case Type::None:
      return "None";
    case Type::Bool:
      return as_bool() ? "True" : "False";
    case Type::Int:
      return std::to_string(as_int());
    case Type::Float:
      return float_repr(as_double());
    case Type::String:
      return as_string();
    case Type::List:
    case Type::Dict:
    case Type::Function:
      return repr();
  }
  return "";
}

std::string Value::repr() const {
  switch (type()) {
    case Type::String:
      return string_repr(as_string());
    case Type::List: {
      std::string out = "[";
      const List& l = as_list();
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + l[i].repr();
      return out + "]";
    }
    case Type::Dict: {
      std::string out = "{";
      const Dict& d = as_dict();
      for (size_t i = 0; i < d.items.size(); ++i)
        out += (i ? ", " : "") + string_repr(d.items[i].first) + ": " + d.items[i].second.repr();
      return out + "}";
    }
    case Type::Function:
      return "<function>";
    case Type::Undefined:
      return "Undefined";
    default:
      return str();
  }
}

std::string Value::to_json(int indent) const {
  std::string out;
  json_dump(out, *this, indent, 0);
  return out;
}

std::string Value::type_name() const {
  switch (type()) {
    case Type::Undefined: return "undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::List: return "list";
    case Type::Dict: return as_dict().is_namespace ? "namespace" : "dict";
    case Type::Function: return "function";
  }
  return "?";
}

bool Value::operator==(const Value& o) const {
  auto numeric = [](const Value& v) {
    return v.type() == Type::Bool || v.type() == Type::Int || v.type() == Type::Float;
  };
  if (numeric(*this) && numeric(o)) {
    if (type() != Type::Float && o.type() != Type::Float) {
      auto iv = [](const Value& v) { return v.type() == Type::Bool ? int64_t(v.as_bool()) : v.as_int(); };
      return iv(*this) == iv(o);
    }
    return as_double() == o.as_double();
  }
  if (type() != o.type()) return false;
  switch (type()) {
    case Type::Undefined:
    case Type::None:
      return true;
    case Type::String:
      return as_string() == o.as_string();
    case Type::List: {
      const List &a = as_list(), &b = o.as_list();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (!(a[i] == b[i])) return false;
      return true;
    }
    case Type::Dict: {
      const Dict &a = as_dict(), &b = o.as_dict();
      if (a.items.size() != b.items.size()) return false;
      for (const auto& [k, v] : a.items) {
        const Value* w = b.find(k);
        if (!w || !(v == *w)) return false;
      }
      return true;
    }
    case Type::Function:
      return std::get<std::shared_ptr<Function>>(v_) == std::get<std::shared_ptr<Function>>(o.v_);
    default:
      return false;
  }
}

}  // namespace ninfer::jinja
