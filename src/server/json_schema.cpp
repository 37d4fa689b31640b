#include "server/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

#include "server/openai_api.h"

namespace ninfer::server {

using ojson = nlohmann::ordered_json;

namespace {

// NOTE: a schema whose anyOf alternatives stay ambiguous for long would multiply stacks; 64
// covers real schemas (alternatives differ within a few bytes) and bounds the cost per byte.
constexpr size_t kMaxStacks = 64;
// NOTE: 2 exponent digits: 15 digits times 1e99 stays within double range (1e308); 3 would
// let "2E326" through, which parses as infinity.
constexpr int kMaxIntDigits = 15, kMaxFracDigits = 15, kMaxExpDigits = 2;

enum class Kind { kObject, kArray, kString, kNumber, kInteger, kLiteral, kAnyOf };

struct Prop {
  std::string key;  // the key as JSON text, quotes included
  int32_t node = 0;
  bool required = false;
};

struct Node {
  Kind kind = Kind::kAnyOf;
  std::vector<Prop> props;  // kObject
  bool open = false;        // kObject: no properties given: any keys, any values
  int32_t items = -1;       // kArray: the item node
  int64_t min_n = 0, max_n = -1;  // kArray items / kString characters; -1: unbounded
  std::vector<std::string> literals;  // kLiteral: JSON texts
  std::vector<int32_t> alts;          // kAnyOf
};

}  // namespace

class JsonGrammar {
 public:
  std::vector<Node> nodes;
  int32_t root = 0;
  int32_t any_value = 0;  // any JSON value
  int32_t any_string = 0;

  int32_t add(Node n) {
    nodes.push_back(std::move(n));
    return int32_t(nodes.size() - 1);
  }
  // The generic nodes: any value, any object, any array, any string, any number, literals.
  void add_generic() {
    any_value = add(Node{});
    Node obj;
    obj.kind = Kind::kObject;
    obj.open = true;
    const int32_t o = add(obj);
    Node arr;
    arr.kind = Kind::kArray;
    arr.items = any_value;
    const int32_t a = add(arr);
    Node str;
    str.kind = Kind::kString;
    any_string = add(str);
    Node num;
    num.kind = Kind::kNumber;
    const int32_t nu = add(num);
    Node lit;
    lit.kind = Kind::kLiteral;
    lit.literals = {"true", "false", "null"};
    const int32_t l = add(lit);
    nodes[size_t(any_value)].alts = {o, a, any_string, nu, l};
  }
};

namespace {

[[noreturn]] void schema_error(const std::string& where, const std::string& msg) {
  throw ApiError{400, fmt::format("'{}': {}", where, msg), "invalid_request_error", where, "invalid_value"};
}
[[noreturn]] void schema_unsupported(const std::string& where, const std::string& msg) {
  throw ApiError{400, fmt::format("'{}': {}", where, msg), "invalid_request_error", where, "unsupported_parameter"};
}

class Compiler {
 public:
  Compiler(JsonGrammar& g, const ojson& root, std::string where) : g_(g), root_(root), where_(std::move(where)) {}

  int32_t compile(const ojson& s, const std::string& at) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) schema_unsupported(at, "the schema 'false' (nothing is valid) is not supported");
      return g_.any_value;
    }
    if (!s.is_object()) schema_error(at, fmt::format("a schema must be an object, got {}", s.type_name()));
    static const char* kKnown[] = {"type",     "enum",        "const",    "properties", "required",
                                   "additionalProperties",    "items",    "minItems",   "maxItems",
                                   "minLength", "maxLength",  "anyOf",    "$ref",       "$defs",
                                   "definitions", "title",    "description", "default", "examples",
                                   "$schema",  "$id",         "$comment"};
    for (auto it = s.begin(); it != s.end(); ++it)
      if (std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return it.key() == k; }) ==
          std::end(kKnown))
        schema_unsupported(at + "." + it.key(),
                           fmt::format("the JSON Schema keyword '{}' is not supported by structured output", it.key()));
    if (const auto ref = s.find("$ref"); ref != s.end()) {
      if (s.size() > 1)
        for (auto it = s.begin(); it != s.end(); ++it)
          if (it.key() != "$ref" && it.key() != "title" && it.key() != "description" && it.key() != "$defs" &&
              it.key() != "definitions")
            schema_unsupported(at + "." + it.key(), fmt::format("'{}' beside '$ref' is not supported", it.key()));
      if (!ref->is_string()) schema_error(at + ".$ref", "'$ref' must be a string");
      return resolve(ref->get<std::string>(), at + ".$ref");
    }
    if (const auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array() || e->empty()) schema_error(at + ".enum", "'enum' must be a non-empty array");
      Node n;
      n.kind = Kind::kLiteral;
      for (const ojson& v : *e) n.literals.push_back(v.dump());
      return g_.add(std::move(n));
    }
    if (const auto c = s.find("const"); c != s.end()) {
      Node n;
      n.kind = Kind::kLiteral;
      n.literals = {c->dump()};
      return g_.add(std::move(n));
    }
    if (const auto any = s.find("anyOf"); any != s.end()) {
      if (s.contains("type")) schema_unsupported(at + ".type", "'type' beside 'anyOf' is not supported");
      if (!any->is_array() || any->empty()) schema_error(at + ".anyOf", "'anyOf' must be a non-empty array");
      Node n;
      for (size_t i = 0; i < any->size(); ++i) n.alts.push_back(compile((*any)[i], fmt::format("{}.anyOf[{}]", at, i)));
      return g_.add(std::move(n));
    }
    const auto t = s.find("type");
    if (t == s.end()) {
      if (s.contains("properties") || s.contains("required")) return object(s, at);
      if (s.contains("items")) return array(s, at);
      return g_.any_value;
    }
    if (t->is_array()) {
      if (t->empty()) schema_error(at + ".type", "'type' must not be an empty list");
      Node n;
      for (size_t i = 0; i < t->size(); ++i) {
        if (!(*t)[i].is_string()) schema_error(fmt::format("{}.type[{}]", at, i), "a type name must be a string");
        n.alts.push_back(typed(s, (*t)[i].get<std::string>(), fmt::format("{}.type[{}]", at, i), at));
      }
      return g_.add(std::move(n));
    }
    if (!t->is_string()) schema_error(at + ".type", "'type' must be a string or a list of strings");
    return typed(s, t->get<std::string>(), at + ".type", at);
  }

  // Every $ref / anyOf chain must consume input before it comes back to a node: a cycle of
  // them (left recursion) would expand forever.
  void check_cycles() {
    std::vector<int> mark(g_.nodes.size(), 0);  // 0 new, 1 on the path, 2 done
    std::function<void(int32_t)> visit = [&](int32_t v) {
      if (mark[size_t(v)] == 2) return;
      if (mark[size_t(v)] == 1) {
        std::string name = "a schema";
        for (const auto& [ref, node] : refs_)
          if (node == v) name = "'" + ref + "'";
        schema_unsupported(where_, fmt::format("{} refers to itself without consuming any input (left recursion "
                                               "through $ref / anyOf)", name));
      }
      mark[size_t(v)] = 1;
      if (g_.nodes[size_t(v)].kind == Kind::kAnyOf)
        for (int32_t a : g_.nodes[size_t(v)].alts) visit(a);
      mark[size_t(v)] = 2;
    };
    for (size_t v = 0; v < g_.nodes.size(); ++v) visit(int32_t(v));
  }

 private:
  int64_t bound(const ojson& s, const char* key, const std::string& at) {
    const auto it = s.find(key);
    if (it == s.end()) return -1;
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      schema_error(at + "." + key, fmt::format("'{}' must be a non-negative integer", key));
    return it->get<int64_t>();
  }

  int32_t typed(const ojson& s, const std::string& type, const std::string& type_at, const std::string& at) {
    if (type == "object") return object(s, at);
    if (type == "array") return array(s, at);
    Node n;
    if (type == "string") {
      n.kind = Kind::kString;
      n.min_n = std::max<int64_t>(0, bound(s, "minLength", at));
      n.max_n = bound(s, "maxLength", at);
      if (n.max_n >= 0 && n.max_n < n.min_n) schema_error(at + ".maxLength", "'maxLength' is below 'minLength'");
    } else if (type == "number") {
      n.kind = Kind::kNumber;
    } else if (type == "integer") {
      n.kind = Kind::kInteger;
    } else if (type == "boolean") {
      n.kind = Kind::kLiteral;
      n.literals = {"true", "false"};
    } else if (type == "null") {
      n.kind = Kind::kLiteral;
      n.literals = {"null"};
    } else {
      schema_error(type_at, fmt::format("unknown type '{}'", type));
    }
    return g_.add(std::move(n));
  }

  int32_t object(const ojson& s, const std::string& at) {
    Node n;
    n.kind = Kind::kObject;
    const auto props = s.find("properties");
    if (props != s.end() && !props->is_object()) schema_error(at + ".properties", "'properties' must be an object");
    std::vector<std::string> required;
    if (const auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) schema_error(at + ".required", "'required' must be an array of property names");
      for (size_t i = 0; i < r->size(); ++i) {
        const ojson& x = (*r)[i];
        if (!x.is_string()) schema_error(fmt::format("{}.required[{}]", at, i), "a property name must be a string");
        if (props == s.end() || !props->contains(x.get<std::string>()))
          schema_unsupported(fmt::format("{}.required[{}]", at, i),
                             fmt::format("required property '{}' is not in 'properties'", x.get<std::string>()));
        required.push_back(x.get<std::string>());
      }
    }
    if (const auto ap = s.find("additionalProperties"); ap != s.end()) {
      if (!ap->is_boolean())
        schema_unsupported(at + ".additionalProperties", "'additionalProperties' other than true or false is not supported");
    }
    if (props == s.end() || props->empty()) {
      const auto ap = s.find("additionalProperties");
      n.open = ap == s.end() || ap->get<bool>();
      return g_.add(std::move(n));
    }
    // The schema is ordered_json: properties keep the order the client wrote them in.
    const int32_t self = g_.add(Node{});  // reserved so properties compile after it
    for (auto it = props->begin(); it != props->end(); ++it) {
      Prop p;
      p.key = ojson(it.key()).dump();
      p.node = compile(it.value(), at + ".properties." + it.key());
      p.required = std::find(required.begin(), required.end(), it.key()) != required.end();
      n.props.push_back(std::move(p));
    }
    g_.nodes[size_t(self)] = std::move(n);
    return self;
  }

  int32_t array(const ojson& s, const std::string& at) {
    Node n;
    n.kind = Kind::kArray;
    const auto items = s.find("items");
    if (items != s.end() && items->is_array())
      schema_unsupported(at + ".items", "'items' as a list (tuple validation) is not supported");
    n.items = items == s.end() ? g_.any_value : compile(*items, at + ".items");
    n.min_n = std::max<int64_t>(0, bound(s, "minItems", at));
    n.max_n = bound(s, "maxItems", at);
    if (n.max_n >= 0 && n.max_n < n.min_n) schema_error(at + ".maxItems", "'maxItems' is below 'minItems'");
    return g_.add(std::move(n));
  }

  int32_t resolve(const std::string& ref, const std::string& at) {
    std::string name, section;
    for (const char* prefix : {"#/$defs/", "#/definitions/"})
      if (ref.rfind(prefix, 0) == 0) {
        section = std::string(prefix).substr(2, std::string(prefix).size() - 3);
        name = ref.substr(std::string(prefix).size());
      }
    if (ref == "#") {
      section.clear();
      name.clear();
    } else if (name.empty() || name.find('/') != std::string::npos) {
      schema_unsupported(at, fmt::format("'$ref' '{}' is not supported: only '#', '#/$defs/NAME' and "
                                         "'#/definitions/NAME'", ref));
    }
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    const ojson* target = &root_;
    if (!section.empty()) {
      const auto sec = root_.find(section);
      if (sec == root_.end() || !sec->is_object() || !sec->contains(name))
        schema_error(at, fmt::format("'$ref' '{}' names no definition", ref));
      target = &(*sec)[name];
    }
    // A one-alternative anyOf stands for the reference, so a recursive one can point at it
    // before its body is compiled.
    const int32_t slot = g_.add(Node{});
    refs_[ref] = slot;
    const int32_t body = compile(*target, section.empty() ? where_ : where_ + "." + section + "." + name);
    g_.nodes[size_t(slot)].alts = {body};
    return slot;
  }

  JsonGrammar& g_;
  const ojson& root_;
  std::string where_;
  std::map<std::string, int32_t> refs_;
};

// What a frame does with a byte.
enum class Act { kConsume, kConsumePop, kPopRefeed, kPushRefeed, kReject };

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Number phases: 0 start, 1 after '-', 2 a leading 0, 3 integer digits, 4 after '.',
// 5 fraction digits, 6 after 'e', 7 after the exponent's sign, 8 exponent digits.
bool number_complete(int32_t phase) { return phase == 2 || phase == 3 || phase == 5 || phase == 8; }

// Object phases.
enum : int32_t { kObjOpen = 0, kObjFirst, kObjKey, kObjColon, kObjValue, kObjAfter, kObjNext };
// String phases.
// String phases. kStrLowEsc / kStrLowU: the '\\' and 'u' that must follow a high surrogate.
enum : int32_t { kStrOpen = 0, kStrIn, kStrEsc, kStrHex, kStrLowEsc, kStrLowU };
// Frame::aux in kStrIn: continuation bytes the current UTF-8 character still needs (bits 0-2)
// and which range its first continuation byte must lie in (kUtf8*, bits 3-5: the
// overlong, surrogate and past-U+10FFFF encodings are not UTF-8). In kStrHex: hex digits seen
// (bits 0-2) and the kHex* flags.
enum : int32_t { kUtf8E0 = 1 << 3, kUtf8ED = 2 << 3, kUtf8F0 = 3 << 3, kUtf8F4 = 4 << 3 };
enum : int32_t { kHexD = 1 << 3, kHexHigh = 1 << 4, kHexLow = 1 << 5 };

bool frame_complete(const JsonGrammar& g, const JsonMatcher::Frame& f) {
  const Node& n = g.nodes[size_t(f.node)];
  if (n.kind == Kind::kNumber || n.kind == Kind::kInteger) return number_complete(f.phase);
  if (n.kind == Kind::kLiteral) return std::find(n.literals.begin(), n.literals.end(), f.buf) != n.literals.end();
  return false;  // strings, objects, arrays pop the moment they close
}

// Property indices the object may take next (from f.n: optional ones may be skipped, the
// first required one may not).
bool may_take(const Node& n, int32_t from, size_t k) {
  if (k < size_t(from)) return false;
  for (size_t i = size_t(from); i < k; ++i)
    if (n.props[i].required) return false;
  return true;
}
bool required_left(const Node& n, int32_t from) {
  for (size_t i = size_t(std::max(0, from)); i < n.props.size(); ++i)
    if (n.props[i].required) return true;
  return false;
}

Act frame_step(const JsonGrammar& g, JsonMatcher::Frame& f, uint8_t c, int32_t* push) {
  const Node& n = g.nodes[size_t(f.node)];
  switch (n.kind) {
    case Kind::kString:
      switch (f.phase) {
        case kStrOpen:
          if (c != '"') return Act::kReject;
          f.phase = kStrIn;
          return Act::kConsume;
        case kStrIn:
          // f.aux: continuation bytes the current UTF-8 character still needs; the string
          // closes, and a new character starts, only once it is complete.
          if (f.aux > 0) {
            if ((c & 0xC0) != 0x80) return Act::kReject;
            const int32_t range = f.aux & ~7;
            if ((range == kUtf8E0 && c < 0xA0) || (range == kUtf8ED && c > 0x9F) || (range == kUtf8F0 && c < 0x90) ||
                (range == kUtf8F4 && c > 0x8F))
              return Act::kReject;
            f.aux = (f.aux & 7) - 1;
            return Act::kConsume;
          }
          if (c == '"') return f.n >= n.min_n ? Act::kConsumePop : Act::kReject;
          if (c < 0x20 || (c >= 0x80 && c < 0xC2) || c > 0xF4) return Act::kReject;
          if (n.max_n >= 0 && f.n >= n.max_n) return Act::kReject;
          ++f.n;
          f.aux = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
          f.aux |= c == 0xE0 ? kUtf8E0 : c == 0xED ? kUtf8ED : c == 0xF0 ? kUtf8F0 : c == 0xF4 ? kUtf8F4 : 0;
          if (c == '\\') f.phase = kStrEsc;
          return Act::kConsume;
        case kStrEsc:
          if (c == 'u') {
            f.phase = kStrHex;
            f.aux = 0;
            return Act::kConsume;
          }
          if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
            f.phase = kStrIn;
            return Act::kConsume;
          }
          return Act::kReject;
        case kStrLowEsc:
          if (c != '\\') return Act::kReject;
          f.phase = kStrLowU;
          return Act::kConsume;
        case kStrLowU:
          if (c != 'u') return Act::kReject;
          f.phase = kStrHex;
          f.aux = kHexLow;
          return Act::kConsume;
        default: {  // kStrHex
          // NOTE: \uD800-\uDBFF must be followed by \uDC00-\uDFFF and a low surrogate may not
          // stand alone: JSON parsers (nlohmann's among them) refuse unpaired surrogates.
          // Checked digit by digit, so the matcher never enters an escape it cannot finish.
          if (!is_hex(c)) return Act::kReject;
          const int32_t k = f.aux & 7;
          const bool d = c == 'd' || c == 'D';
          const bool c_to_f = (c >= 'c' && c <= 'f') || (c >= 'C' && c <= 'F');
          const bool eight_to_b = (c >= '8' && c <= '9') || (c >= 'a' && c <= 'b') || (c >= 'A' && c <= 'B');
          if (f.aux & kHexLow) {
            if ((k == 0 && !d) || (k == 1 && !c_to_f)) return Act::kReject;
          } else if (k == 0 && d) {
            f.aux |= kHexD;
          } else if (k == 1 && (f.aux & kHexD)) {
            if (c_to_f) return Act::kReject;
            if (eight_to_b) f.aux |= kHexHigh;
          }
          f.aux = (f.aux & ~7) | (k + 1);
          if (k + 1 == 4) {
            f.phase = (f.aux & kHexHigh) && !(f.aux & kHexLow) ? kStrLowEsc : kStrIn;
            f.aux = 0;
          }
          return Act::kConsume;
        }
      }
    case Kind::kNumber:
    case Kind::kInteger: {
      const bool integer = n.kind == Kind::kInteger;
      auto digits_ok = [&](int32_t limit) { return f.n < limit; };
      switch (f.phase) {
        case 0:
          if (c == '-') { f.phase = 1; return Act::kConsume; }
          [[fallthrough]];
        case 1:
          if (c == '0') { f.phase = 2; f.n = 1; return Act::kConsume; }
          if (c >= '1' && c <= '9') { f.phase = 3; f.n = 1; return Act::kConsume; }
          return Act::kReject;
        case 2:
        case 3:
          if (f.phase == 3 && is_digit(c)) {
            if (!digits_ok(kMaxIntDigits)) return Act::kReject;
            ++f.n;
            return Act::kConsume;
          }
          if (!integer && c == '.') { f.phase = 4; f.n = 0; return Act::kConsume; }
          if (!integer && (c == 'e' || c == 'E')) { f.phase = 6; f.n = 0; return Act::kConsume; }
          return Act::kPopRefeed;
        case 4:
        case 5:
          if (is_digit(c)) {
            if (!digits_ok(kMaxFracDigits)) return Act::kReject;
            ++f.n;
            f.phase = 5;
            return Act::kConsume;
          }
          if (f.phase == 5 && (c == 'e' || c == 'E')) { f.phase = 6; f.n = 0; return Act::kConsume; }
          return f.phase == 5 ? Act::kPopRefeed : Act::kReject;
        case 6:
          if (c == '+' || c == '-') { f.phase = 7; return Act::kConsume; }
          [[fallthrough]];
        default:  // 7, 8
          if (is_digit(c)) {
            if (!digits_ok(kMaxExpDigits)) return Act::kReject;
            ++f.n;
            f.phase = 8;
            return Act::kConsume;
          }
          return f.phase == 8 ? Act::kPopRefeed : Act::kReject;
      }
    }
    case Kind::kLiteral: {
      const std::string next = f.buf + char(c);
      bool prefix = false, longer = false;
      for (const std::string& l : n.literals)
        if (l.compare(0, next.size(), next) == 0) {
          prefix = true;
          if (l.size() > next.size()) longer = true;
        }
      if (prefix) {
        f.buf = next;
        const bool whole = std::find(n.literals.begin(), n.literals.end(), next) != n.literals.end();
        return whole && !longer ? Act::kConsumePop : Act::kConsume;
      }
      return frame_complete(g, f) ? Act::kPopRefeed : Act::kReject;
    }
    case Kind::kArray:
      switch (f.phase) {
        case 0:
          if (c != '[') return Act::kReject;
          f.phase = 1;
          return Act::kConsume;
        case 1:  // after '['
          if (c == ']') return n.min_n == 0 ? Act::kConsumePop : Act::kReject;
          if (n.max_n == 0) return Act::kReject;
          f.phase = 2;
          ++f.n;
          *push = n.items;
          return Act::kPushRefeed;
        case 2:  // after an item
          if (c == ']') return f.n >= n.min_n ? Act::kConsumePop : Act::kReject;
          if (c == ',' && (n.max_n < 0 || f.n < n.max_n)) {
            f.phase = 3;
            return Act::kConsume;
          }
          return Act::kReject;
        default:  // after ','
          f.phase = 2;
          ++f.n;
          *push = n.items;
          return Act::kPushRefeed;
      }
    case Kind::kObject:
      switch (f.phase) {
        case kObjOpen:
          if (c != '{') return Act::kReject;
          f.phase = kObjFirst;
          return Act::kConsume;
        case kObjFirst:
        case kObjNext:
          if (c == '}' && f.phase == kObjFirst) return required_left(n, f.n) ? Act::kReject : Act::kConsumePop;
          if (c != '"') return Act::kReject;
          if (n.open) {
            f.phase = kObjColon;
            *push = g.any_string;
            return Act::kPushRefeed;
          }
          if (size_t(f.n) >= n.props.size()) return Act::kReject;
          f.phase = kObjKey;
          f.buf = "\"";
          return Act::kConsume;
        case kObjKey: {
          f.buf += char(c);
          bool prefix = false;
          for (size_t k = 0; k < n.props.size(); ++k) {
            if (!may_take(n, f.n, k) || n.props[k].key.compare(0, f.buf.size(), f.buf) != 0) continue;
            prefix = true;
            if (n.props[k].key.size() == f.buf.size()) {
              f.aux = int32_t(k);
              f.phase = kObjColon;
              f.buf.clear();
              return Act::kConsume;
            }
          }
          return prefix ? Act::kConsume : Act::kReject;
        }
        case kObjColon:
          if (c != ':') return Act::kReject;
          f.phase = kObjValue;
          return Act::kConsume;
        case kObjValue:
          f.phase = kObjAfter;
          if (n.open) {
            *push = g.any_value;
          } else {
            *push = n.props[size_t(f.aux)].node;
            f.n = f.aux + 1;
          }
          return Act::kPushRefeed;
        default:  // kObjAfter
          if (c == '}') return !n.open && required_left(n, f.n) ? Act::kReject : Act::kConsumePop;
          if (c == ',' && (n.open || size_t(f.n) < n.props.size())) {
            f.phase = kObjNext;
            return Act::kConsume;
          }
          return Act::kReject;
      }
    case Kind::kAnyOf:
      break;
  }
  return Act::kReject;
}

// Pushes `node` on a copy of `s` for every non-anyOf node it expands to.
void expand(const JsonGrammar& g, const JsonMatcher::Stack& s, int32_t node, std::vector<JsonMatcher::Stack>& out) {
  const Node& n = g.nodes[size_t(node)];
  if (n.kind == Kind::kAnyOf) {
    for (int32_t a : n.alts) expand(g, s, a, out);
    return;
  }
  JsonMatcher::Stack t = s;
  t.push_back(JsonMatcher::Frame{node, 0, 0, 0, {}});
  out.push_back(std::move(t));
}

void step(const JsonGrammar& g, JsonMatcher::Stack s, uint8_t c, JsonMatcher::State& out) {
  while (!s.empty()) {
    int32_t push = -1;
    switch (frame_step(g, s.back(), c, &push)) {
      case Act::kConsume:
        out.push_back(std::move(s));
        return;
      case Act::kConsumePop:
        s.pop_back();
        out.push_back(std::move(s));
        return;
      case Act::kPopRefeed:
        s.pop_back();
        continue;
      case Act::kPushRefeed: {
        std::vector<JsonMatcher::Stack> forks;
        expand(g, s, push, forks);
        for (auto& f : forks) step(g, std::move(f), c, out);
        return;
      }
      case Act::kReject:
        return;
    }
  }
  // The root value is complete: nothing may follow it.
}

}  // namespace

std::shared_ptr<const JsonGrammar> compile_json_schema(const ojson& schema, const std::string& where) {
  auto g = std::make_shared<JsonGrammar>();
  g->add_generic();
  Compiler c(*g, schema, where);
  g->root = c.compile(schema, where);
  c.check_cycles();
  return g;
}

std::shared_ptr<const JsonGrammar> json_object_grammar() {
  auto g = std::make_shared<JsonGrammar>();
  g->add_generic();
  Node obj;
  obj.kind = Kind::kObject;
  obj.open = true;
  g->root = g->add(obj);
  return g;
}

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonGrammar> g) : g_(std::move(g)) {
  std::vector<Stack> start;
  expand(*g_, Stack{}, g_->root, start);
  state_ = std::move(start);
}

JsonMatcher::State JsonMatcher::advance(const State& s, uint8_t c) const {
  State out;
  for (const Stack& st : s) {
    step(*g_, st, c, out);
    if (out.size() > 4 * kMaxStacks) break;
  }
  // Merge equal stacks (alternatives that agree so far), keep at most kMaxStacks.
  std::sort(out.begin(), out.end(), [](const Stack& a, const Stack& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](const Frame& x, const Frame& y) {
      return std::tie(x.node, x.phase, x.n, x.aux, x.buf) < std::tie(y.node, y.phase, y.n, y.aux, y.buf);
    });
  });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.size() > kMaxStacks) out.resize(kMaxStacks);
  return out;
}

bool JsonMatcher::feed(std::string_view bytes) {
  State s = state_;
  for (char c : bytes) {
    s = advance(s, uint8_t(c));
    if (s.empty()) return false;
  }
  state_ = std::move(s);
  return true;
}

bool JsonMatcher::accepting(const State& s) const {
  for (const Stack& st : s)
    if (st.empty() || (st.size() == 1 && frame_complete(*g_, st[0]))) return true;
  return false;
}

bool JsonMatcher::done() const {
  for (const Stack& st : state_)
    if (!st.empty()) return false;
  return !state_.empty();
}

}  // namespace ninfer::server
