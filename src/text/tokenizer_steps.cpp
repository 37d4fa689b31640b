// Tokenizer pipeline stages (see tokenizer_steps.h). Each parse() flattens "Sequence"
// nodes into a list of steps; apply()/decode() run the steps in order.
#include "text/tokenizer_steps.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include <utf8proc.h>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/utf8.h"

namespace ninfer::tok {

int32_t json_token_id(const json& v, std::string_view what, std::string_view field) {
  if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(INT32_MAX)
                                                          : v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX))
    fail("{}: {} must be a token id (an integer from 0 to {}), got {}", what, field, INT32_MAX, v.dump());
  return int32_t(v.get<int64_t>());
}

namespace {

// The GPT-2 pre-tokenizer regex that ByteLevel applies when use_regex is true.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const std::string& type_of(const json& j, std::string_view stage, std::string_view what) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    fail("{}: {} entry has no \"type\" string", what, stage);
  return j["type"].get_ref<const std::string&>();
}

template <typename T>
T get_or(const json& j, const char* key, T dflt) {  // bool / string fields (type errors: tokenizer.cpp)
  if (!j.contains(key) || j[key].is_null()) return dflt;
  return j[key].get<T>();
}

// A count field (absent or null: 0). NOTE: nlohmann converts a float or a negative number to an
// unsigned type with a plain cast, undefined behaviour out of range: only integers in
// [0, INT32_MAX] pass.
size_t get_count(const json& j, const char* key, std::string_view stage, std::string_view what) {
  if (!j.contains(key) || j[key].is_null()) return 0;
  const json& v = j[key];
  if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(INT32_MAX)
                                                          : v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX))
    fail("{}: {} \"{}\" must be an integer from 0 to {}, got {}", what, stage, key, INT32_MAX, v.dump());
  return size_t(v.get<int64_t>());
}

std::string get_string(const json& j, const char* key, std::string_view stage, std::string_view what) {
  if (!j.contains(key) || !j[key].is_string())
    fail("{}: {} needs a string field \"{}\"", what, stage, key);
  return j[key].get<std::string>();
}

// A {"String": s} or {"Regex": r} pattern.
std::shared_ptr<const Regex> parse_pattern(const json& j, bool multiline, std::string_view stage,
                                           std::string_view what) {
  std::string ctx = fmt::format("{} {}", what, stage);
  if (j.is_object() && j.contains("String") && j["String"].is_string())
    return std::make_shared<Regex>(j["String"].get<std::string>(), Regex::Options{true, false}, ctx);
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string())
    return std::make_shared<Regex>(j["Regex"].get<std::string>(), Regex::Options{false, multiline},
                                   ctx);
  fail("{}: {} pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}", what, stage);
}

}  // namespace

std::string unicode_normalize(std::string_view s, Normalizer::Form form) {
  // NOTE: utf8proc implements the Unicode normalization forms as the Rust
  // unicode-normalization crate (which tokenizers uses) does: canonical (or compatibility)
  // decomposition, canonical reordering, then composition for NFC/NFKC. Text that is
  // already in the form comes back byte for byte. The input is valid UTF-8 (encode()
  // checks it first); an explicit length lets NUL bytes through as U+0000.
  if (s.empty()) return {};
  int opts = UTF8PROC_STABLE;
  switch (form) {
    case Normalizer::Form::NFC: opts |= UTF8PROC_COMPOSE; break;
    case Normalizer::Form::NFD: opts |= UTF8PROC_DECOMPOSE; break;
    case Normalizer::Form::NFKC: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case Normalizer::Form::NFKD: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &out,
                                    static_cast<utf8proc_option_t>(opts));
  if (n < 0) fail("tokenizer normalizer: Unicode normalization failed: {}", utf8proc_errmsg(n));
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

// ---- Normalizer -------------------------------------------------------------------------

Normalizer Normalizer::parse(const json& j, std::string_view what) {
  Normalizer n;
  if (!j.is_null()) n.add(j, what);
  return n;
}

void Normalizer::add(const json& j, std::string_view what) {
  const std::string& type = type_of(j, "normalizer", what);
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      fail("{}: normalizer Sequence needs a \"normalizers\" array", what);
    for (const json& s : j["normalizers"]) add(s, what);
  } else if (type == "Replace") {
    // NOTE: Rust tokenizers compiles these with Oniguruma's Ruby syntax, where ^ and $ are
    // line anchors; multiline mode reproduces that (e.g. "^ +| +$" strips every line).
    Step s{Kind::Replace, parse_pattern(j.value("pattern", json()), true, "normalizer Replace", what),
           get_string(j, "content", "normalizer Replace", what)};
    steps_.push_back(std::move(s));
  } else if (type == "Prepend") {
    steps_.push_back(Step{Kind::Prepend, nullptr, get_string(j, "prepend", "normalizer Prepend", what)});
  } else if (type == "Strip") {
    Step s{Kind::Strip, nullptr, ""};
    s.left = get_or<bool>(j, "strip_left", true);
    s.right = get_or<bool>(j, "strip_right", true);
    steps_.push_back(std::move(s));
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    Step s{Kind::Unicode};
    s.form = type == "NFC" ? Form::NFC : type == "NFD" ? Form::NFD : type == "NFKC" ? Form::NFKC : Form::NFKD;
    steps_.push_back(std::move(s));
  } else {
    fail("{}: unsupported normalizer type '{}'", what, type);
  }
}

std::string Normalizer::apply(std::string s) const {
  for (const Step& st : steps_) {
    switch (st.kind) {
      case Kind::Replace:
        s = st.re->replace_all(s, st.content);
        break;
      case Kind::Prepend:
        if (!s.empty()) s = st.content + s;
        break;
      case Kind::Unicode:
        s = unicode_normalize(s, st.form);
        break;
      case Kind::Strip: {
        // Unicode White_Space in the ASCII/Latin-1 range covers what Rust's trim() sees in
        // practice; a regex keeps it exact for the rest.
        static const Regex left(R"(^\s+)", {}, "normalizer Strip");
        static const Regex right(R"(\s+$)", {}, "normalizer Strip");
        if (st.left) s = left.replace_all(s, "");
        if (st.right) s = right.replace_all(s, "");
        break;
      }
    }
  }
  return s;
}

// ---- PreTokenizer -----------------------------------------------------------------------

PreTokenizer PreTokenizer::parse(const json& j, std::string_view what) {
  PreTokenizer p;
  if (!j.is_null()) p.add(j, what);
  return p;
}

void PreTokenizer::add(const json& j, std::string_view what) {
  const std::string& type = type_of(j, "pre_tokenizer", what);
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      fail("{}: pre_tokenizer Sequence needs a \"pretokenizers\" array", what);
    for (const json& s : j["pretokenizers"]) add(s, what);
  } else if (type == "Split") {
    Step s{Kind::Split, parse_pattern(j.value("pattern", json()), false, "pre_tokenizer Split", what)};
    std::string b = get_string(j, "behavior", "pre_tokenizer Split", what);
    if (b == "Removed") s.behavior = Behavior::Removed;
    else if (b == "Isolated") s.behavior = Behavior::Isolated;
    else if (b == "MergedWithPrevious") s.behavior = Behavior::MergedWithPrevious;
    else if (b == "MergedWithNext") s.behavior = Behavior::MergedWithNext;
    else if (b == "Contiguous") s.behavior = Behavior::Contiguous;
    else fail("{}: pre_tokenizer Split has unknown behavior '{}'", what, b);
    s.invert = get_or<bool>(j, "invert", false);
    steps_.push_back(std::move(s));
  } else if (type == "ByteLevel") {
    Step s{Kind::ByteLevel};
    s.add_prefix_space = get_or<bool>(j, "add_prefix_space", true);
    if (get_or<bool>(j, "use_regex", true))
      s.re = std::make_shared<Regex>(kGpt2Regex, Regex::Options{}, std::string(what));
    steps_.push_back(std::move(s));
  } else if (type == "Metaspace") {
    Step s{Kind::Metaspace};
    s.replacement = get_or<std::string>(j, "replacement", "\u2581");
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      std::string p = j["prepend_scheme"].get<std::string>();
      if (p == "always") s.prepend = Step::Prepend::Always;
      else if (p == "first") s.prepend = Step::Prepend::First;
      else if (p == "never") s.prepend = Step::Prepend::Never;
      else fail("{}: pre_tokenizer Metaspace has unknown prepend_scheme '{}'", what, p);
    } else {
      s.prepend = get_or<bool>(j, "add_prefix_space", true) ? Step::Prepend::Always : Step::Prepend::Never;
    }
    s.split = get_or<bool>(j, "split", true);
    if (s.split)
      s.re = std::make_shared<Regex>(s.replacement, Regex::Options{true, false}, std::string(what));
    steps_.push_back(std::move(s));
  } else if (type == "Digits") {
    // Digits is a Split on numeric characters: one piece per digit, or per run of digits.
    bool individual = get_or<bool>(j, "individual_digits", false);
    Step s{Kind::Split, std::make_shared<Regex>(individual ? R"(\p{N})" : R"(\p{N}+)", Regex::Options{},
                                                std::string(what))};
    s.behavior = Behavior::Isolated;
    steps_.push_back(std::move(s));
  } else {
    fail("{}: unsupported pre_tokenizer type '{}'", what, type);
  }
}

void PreTokenizer::split(const Regex& re, Behavior behavior, bool invert, const Piece& in,
                         std::vector<Piece>& out) {
  const std::string& s = in.text;
  // (begin, end, is_match) covering s, as tokenizers' Pattern::find_matches.
  struct Span {
    size_t b, e;
    bool m;
  };
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : re.find_all(s)) {
    if (b != prev) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != s.size()) spans.push_back({prev, s.size(), invert});

  std::vector<Span> parts;
  bool prev_match = false;
  switch (behavior) {
    case Behavior::Isolated:
      parts = spans;
      break;
    case Behavior::Removed:
      for (const Span& sp : spans)
        if (!sp.m) parts.push_back(sp);
      break;
    case Behavior::MergedWithPrevious:
      for (const Span& sp : spans) {
        if (sp.m && !prev_match && !parts.empty()) parts.back().e = sp.e;
        else parts.push_back(sp);
        prev_match = sp.m;
      }
      break;
    case Behavior::MergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->m && !prev_match && !parts.empty()) parts.back().b = it->b;
        else parts.push_back(*it);
        prev_match = it->m;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    case Behavior::Contiguous:
      for (size_t k = 0; k < spans.size(); ++k) {
        if (k > 0 && spans[k].m == prev_match) parts.back().e = spans[k].e;
        else parts.push_back(spans[k]);
        prev_match = spans[k].m;
      }
      break;
  }
  for (const Span& sp : parts) {
    if (sp.e == sp.b) continue;
    out.push_back(Piece{s.substr(sp.b, sp.e - sp.b), in.at_origin && sp.b == 0});
  }
}

void PreTokenizer::apply(std::vector<Piece>& pieces) const {
  for (const Step& st : steps_) {
    std::vector<Piece> next;
    next.reserve(pieces.size());
    for (Piece& p : pieces) {
      switch (st.kind) {
        case Kind::Split:
          split(*st.re, st.behavior, st.invert, p, next);
          break;
        case Kind::ByteLevel: {
          if (st.add_prefix_space && !p.text.starts_with(' ')) p.text = " " + p.text;
          size_t first = next.size();
          if (st.re) split(*st.re, Behavior::Isolated, false, p, next);
          else next.push_back(std::move(p));
          for (size_t k = first; k < next.size(); ++k) next[k].text = byte_level::encode(next[k].text);
          break;
        }
        case Kind::Metaspace: {
          std::string t;
          t.reserve(p.text.size() + 3);
          for (char c : p.text) {
            if (c == ' ') t += st.replacement;
            else t.push_back(c);
          }
          bool prepend = st.prepend == Step::Prepend::Always ||
                         (st.prepend == Step::Prepend::First && p.at_origin);
          if (prepend && !t.starts_with(st.replacement)) t = st.replacement + t;
          Piece q{std::move(t), p.at_origin};
          if (st.split) split(*st.re, Behavior::MergedWithNext, false, q, next);
          else next.push_back(std::move(q));
          break;
        }
      }
    }
    pieces = std::move(next);
  }
}

// ---- Decoder ----------------------------------------------------------------------------

Decoder Decoder::parse(const json& j, std::string_view what) {
  Decoder d;
  if (!j.is_null()) {
    d.none_ = false;
    d.add(j, what);
  }
  // Start-of-text stripping: Metaspace strips its prefix from the first token; Strip strips
  // `start` chars from each token it sees, which is the whole text once Fuse has run.
  bool fused = false;
  for (const Step& st : d.steps_) {
    if (st.kind == Kind::Fuse) fused = true;
    if (st.kind == Kind::Metaspace && st.strip_first) d.leading_strip_ = 1;
    if (st.kind == Kind::Strip && st.content == " " && fused) d.leading_strip_ = st.start;
  }
  return d;
}

void Decoder::add(const json& j, std::string_view what) {
  const std::string& type = type_of(j, "decoder", what);
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array())
      fail("{}: decoder Sequence needs a \"decoders\" array", what);
    for (const json& s : j["decoders"]) add(s, what);
  } else if (type == "ByteLevel") {
    steps_.push_back(Step{Kind::ByteLevel});
  } else if (type == "Replace") {
    steps_.push_back(Step{Kind::Replace,
                          parse_pattern(j.value("pattern", json()), false, "decoder Replace", what),
                          get_string(j, "content", "decoder Replace", what)});
  } else if (type == "ByteFallback") {
    steps_.push_back(Step{Kind::ByteFallback});
  } else if (type == "Fuse") {
    steps_.push_back(Step{Kind::Fuse});
  } else if (type == "Strip") {
    Step s{Kind::Strip, nullptr, get_string(j, "content", "decoder Strip", what)};
    if (utf8::first_invalid(s.content) != s.content.size() || s.content.empty())
      fail("{}: decoder Strip content must be one character", what);
    s.start = get_count(j, "start", "decoder Strip", what);
    s.stop = get_count(j, "stop", "decoder Strip", what);
    steps_.push_back(std::move(s));
  } else if (type == "Metaspace") {
    Step s{Kind::Metaspace, nullptr, get_or<std::string>(j, "replacement", "\u2581")};
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string())
      s.strip_first = j["prepend_scheme"].get<std::string>() != "never";
    else
      s.strip_first = get_or<bool>(j, "add_prefix_space", true);
    steps_.push_back(std::move(s));
  } else {
    fail("{}: unsupported decoder type '{}'", what, type);
  }
}

namespace {

std::optional<uint8_t> byte_token(std::string_view t) {
  // "<0xNN>", as written by Rust's format!("<{:#04X}>") and parsed by ByteFallback.
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

std::string replace_all_literal(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t k = s.find(from, pos);
    if (k == std::string_view::npos || from.empty()) break;
    out.append(s.substr(pos, k - pos));
    out.append(to);
    pos = k + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (none_) {
    std::string out;
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k) out.push_back(' ');
      out += tokens[k];
    }
    return out;
  }
  for (const Step& st : steps_) {
    switch (st.kind) {
      case Kind::ByteLevel: {
        // Hugging Face fuses the whole chain here: all tokens become one byte string.
        std::string all;
        for (const std::string& t : tokens) {
          auto b = byte_level::decode(t);
          all += b ? *b : t;
        }
        tokens.assign(1, std::move(all));
        break;
      }
      case Kind::Replace:
        for (std::string& t : tokens) t = st.re->replace_all(t, st.content);
        break;
      case Kind::ByteFallback: {
        std::vector<std::string> out;
        std::string bytes;
        size_t n_bytes = 0;
        auto flush = [&] {
          if (n_bytes == 0) return;
          if (utf8::first_invalid(bytes) == bytes.size()) {
            out.push_back(bytes);
          } else {
            for (size_t k = 0; k < n_bytes; ++k) out.emplace_back(utf8::kReplacementChar);
          }
          bytes.clear();
          n_bytes = 0;
        };
        for (std::string& t : tokens) {
          if (auto b = byte_token(t)) {
            bytes.push_back(static_cast<char>(*b));
            ++n_bytes;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens = std::move(out);
        break;
      }
      case Kind::Fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case Kind::Strip:
        for (std::string& t : tokens) {
          size_t n = st.content.size();
          for (size_t k = 0; k < st.start && t.starts_with(st.content); ++k) t.erase(0, n);
          for (size_t k = 0; k < st.stop && t.ends_with(st.content); ++k) t.erase(t.size() - n);
        }
        break;
      case Kind::Metaspace:
        // NOTE: in the first token Hugging Face drops every replacement char, not only
        // the leading one.
        for (size_t k = 0; k < tokens.size(); ++k)
          tokens[k] = replace_all_literal(tokens[k], st.content, k == 0 && st.strip_first ? "" : " ");
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::string Decoder::piece(std::string_view token) const {
  if (none_) return std::string(token);
  std::string t(token);
  for (const Step& st : steps_) {
    switch (st.kind) {
      case Kind::ByteLevel: {
        auto b = byte_level::decode(t);
        if (b) t = std::move(*b);
        break;
      }
      case Kind::Replace:
        t = st.re->replace_all(t, st.content);
        break;
      case Kind::ByteFallback:
        if (auto b = byte_token(t)) t.assign(1, static_cast<char>(*b));
        break;
      case Kind::Metaspace:
        t = replace_all_literal(t, st.content, " ");
        break;
      case Kind::Fuse:
      case Kind::Strip:
        break;
    }
  }
  return t;
}

// ---- PostProcessor ----------------------------------------------------------------------

PostProcessor PostProcessor::parse(const json& j, std::string_view what) {
  PostProcessor p;
  if (!j.is_null()) p.add(j, what);
  return p;
}

void PostProcessor::add(const json& j, std::string_view what) {
  const std::string& type = type_of(j, "post_processor", what);
  std::vector<int32_t> before, after;
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array())
      fail("{}: post_processor Sequence needs a \"processors\" array", what);
    for (const json& s : j["processors"]) add(s, what);
    return;
  } else if (type == "ByteLevel") {
    return;  // only adjusts offsets
  } else if (type == "TemplateProcessing") {
    if (!j.contains("single")) fail("{}: post_processor TemplateProcessing needs \"single\"", what);
    const json& specials = j.value("special_tokens", json::object());
    auto ids_of = [&](const std::string& name) {
      if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
        fail("{}: post_processor TemplateProcessing uses '{}', which is not in special_tokens", what, name);
      std::vector<int32_t> ids;
      for (const json& id : specials[name]["ids"])
        ids.push_back(json_token_id(id, what, fmt::format("post_processor special_tokens['{}'].ids", name)));
      return ids;
    };
    // Items: {"SpecialToken": {"id": name}} / {"Sequence": {"id": "A"}}, or the string form
    // "<s> $A" / "$0".
    std::vector<std::pair<bool, std::string>> items;  // (is_sequence, special name)
    const json& single = j["single"];
    if (single.is_string()) {
      std::string s = single.get<std::string>();
      size_t pos = 0;
      while (pos < s.size()) {
        size_t e = s.find(' ', pos);
        if (e == std::string::npos) e = s.size();
        std::string item = s.substr(pos, e - pos);
        pos = e + 1;
        if (item.empty()) continue;
        if (item[0] == '$') items.emplace_back(true, "");
        else items.emplace_back(false, item.substr(0, item.find(':')));
      }
    } else if (single.is_array()) {
      for (const json& it : single) {
        if (it.contains("Sequence")) items.emplace_back(true, "");
        else if (it.contains("SpecialToken") && it["SpecialToken"].contains("id"))
          items.emplace_back(false, it["SpecialToken"]["id"].get<std::string>());
        else fail("{}: post_processor TemplateProcessing has an item that is neither SpecialToken nor Sequence", what);
      }
    } else {
      fail("{}: post_processor TemplateProcessing \"single\" must be a list or a string", what);
    }
    bool seen_seq = false;
    for (auto& [is_seq, name] : items) {
      if (is_seq) {
        seen_seq = true;
        continue;
      }
      auto ids = ids_of(name);
      (seen_seq ? after : before).insert((seen_seq ? after : before).end(), ids.begin(), ids.end());
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    auto id_of = [&](const char* key) {
      if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2)
        fail("{}: post_processor {} needs \"{}\": [token, id]", what, type, key);
      return json_token_id(j[key][1], what, fmt::format("post_processor {}.{}[1]", type, key));
    };
    before.push_back(id_of("cls"));
    after.push_back(id_of("sep"));
  } else {
    fail("{}: unsupported post_processor type '{}'", what, type);
  }
  // A later processor wraps the result of an earlier one.
  before_.insert(before_.begin(), before.begin(), before.end());
  after_.insert(after_.end(), after.begin(), after.end());
}

}  // namespace ninfer::tok
