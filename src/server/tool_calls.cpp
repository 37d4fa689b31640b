#include "server/tool_calls.h"

#include <nlohmann/json.hpp>

namespace ninfer::server {
namespace {

using json = nlohmann::json;

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// {"name": string, "arguments"|"parameters": object or JSON-in-a-string} -> a call.
bool to_call(const json& j, ParsedToolCall& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  out.name = j["name"].get<std::string>();
  const char* key = j.contains("arguments") ? "arguments" : j.contains("parameters") ? "parameters" : nullptr;
  json args = key ? j[key] : json::object();
  if (args.is_string()) {
    json parsed = json::parse(args.get<std::string>(), nullptr, false);
    if (parsed.is_discarded()) return false;
    args = std::move(parsed);
  }
  if (!args.is_object()) return false;
  out.arguments = args.dump();
  return true;
}

json parse_json(std::string_view s) { return json::parse(s.begin(), s.end(), nullptr, false); }

ToolOutput plain(std::string_view text) { return ToolOutput{std::string(text), {}}; }

// <tool_call>BODY</tool_call> blocks (the last one may be cut off by max_tokens or a stop token
// before its close: its body decides), each body read by `call`; text around them is content.
// Any body that does not parse leaves the whole text as content.
template <typename Call>
ToolOutput parse_tool_call_blocks(std::string_view text, Call&& call) {
  static constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  ToolOutput r;
  std::string content;
  size_t pos = 0;
  while (true) {
    const size_t a = text.find(kOpen, pos);
    if (a == std::string_view::npos) break;
    const size_t body = a + kOpen.size();
    const size_t b = text.find(kClose, body);
    const size_t end = b == std::string_view::npos ? text.size() : b;
    ParsedToolCall c;
    if (!call(text.substr(body, end - body), c)) return plain(text);
    content += text.substr(pos, a - pos);
    r.calls.push_back(std::move(c));
    pos = b == std::string_view::npos ? text.size() : b + kClose.size();
  }
  if (r.calls.empty()) return plain(text);
  content += text.substr(pos);
  r.content = trim(content);
  return r;
}

ToolOutput parse_hermes(std::string_view text) {
  return parse_tool_call_blocks(text, [](std::string_view body, ParsedToolCall& c) { return to_call(parse_json(body), c); });
}

// <function=NAME>\n<parameter=K>\nVALUE\n</parameter>...</function> -> a call; false if malformed.
bool qwen3_coder_call(std::string_view body, ParsedToolCall& out) {
  static constexpr std::string_view kFn = "<function=", kFnEnd = "</function>", kP = "<parameter=", kPEnd = "</parameter>";
  const size_t f = body.find(kFn);
  if (f == std::string_view::npos || trim(body.substr(0, f)) != "") return false;
  const size_t gt = body.find('>', f);
  if (gt == std::string_view::npos) return false;
  out.name = trim(body.substr(f + kFn.size(), gt - f - kFn.size()));
  if (out.name.empty()) return false;
  size_t end = body.find(kFnEnd, gt);
  if (end == std::string_view::npos) end = body.size();  // cut off: what is there decides
  std::string_view rest = body.substr(gt + 1, end - gt - 1);
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  while (true) {
    const size_t p = rest.find(kP);
    if (p == std::string_view::npos) {
      if (trim(rest) != "") return false;
      break;
    }
    if (trim(rest.substr(0, p)) != "") return false;
    const size_t pg = rest.find('>', p);
    if (pg == std::string_view::npos) return false;
    const std::string key = trim(rest.substr(p + kP.size(), pg - p - kP.size()));
    const size_t pe = rest.find(kPEnd, pg);
    if (key.empty() || pe == std::string_view::npos) return false;
    std::string_view v = rest.substr(pg + 1, pe - pg - 1);
    // The template writes "\n" + value + "\n": one newline off each side, no more.
    if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
    if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
    nlohmann::ordered_json val = nlohmann::ordered_json::parse(v.begin(), v.end(), nullptr, false);
    if (val.is_discarded() || val.is_string()) val = std::string(v);
    args[key] = std::move(val);
    rest = rest.substr(pe + kPEnd.size());
  }
  out.arguments = args.dump();
  return true;
}

ToolOutput parse_qwen3_coder(std::string_view text) { return parse_tool_call_blocks(text, qwen3_coder_call); }

ToolOutput parse_llama3(std::string_view text) {
  std::string_view t = text;
  static constexpr std::string_view kTag = "<|python_tag|>";
  const std::string s = trim(t);
  std::string_view body = s;
  if (body.substr(0, kTag.size()) == kTag) body.remove_prefix(kTag.size());
  const std::string b = trim(body);
  if (b.empty() || b.front() != '{') return plain(text);
  ToolOutput r;
  // One object, or several separated by ';' (the 3.2 prompt format allows it).
  json one = parse_json(b);
  if (!one.is_discarded()) {
    ParsedToolCall c;
    if (!to_call(one, c)) return plain(text);
    r.calls.push_back(std::move(c));
    return r;
  }
  size_t pos = 0;
  while (pos < b.size()) {
    size_t semi = b.find(';', pos);
    // NOTE: a ';' inside a string argument splits wrongly; such a part fails to parse and the
    // split moves on to the next ';'.
    size_t end = semi;
    json j;
    while (true) {
      j = parse_json(std::string_view(b).substr(pos, (end == std::string::npos ? b.size() : end) - pos));
      if (!j.is_discarded() || end == std::string::npos) break;
      end = b.find(';', end + 1);
    }
    ParsedToolCall c;
    if (j.is_discarded() || !to_call(j, c)) return plain(text);
    r.calls.push_back(std::move(c));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return r;
}

ToolOutput parse_mistral(std::string_view text) {
  static constexpr std::string_view kCalls = "[TOOL_CALLS]", kArgs = "[ARGS]";
  const size_t first = text.find(kCalls);
  if (first == std::string_view::npos) return plain(text);
  ToolOutput r;
  r.content = trim(text.substr(0, first));
  std::string_view rest = text.substr(first + kCalls.size());
  const std::string head = trim(rest);
  if (!head.empty() && head.front() == '[') {
    // v3: one JSON array of calls.
    json arr = parse_json(head);
    if (!arr.is_array() || arr.empty()) return plain(text);
    for (const json& j : arr) {
      ParsedToolCall c;
      if (!to_call(j, c)) return plain(text);
      r.calls.push_back(std::move(c));
    }
    return r;
  }
  // v11+: name[ARGS]{...}, repeated after further [TOOL_CALLS] markers.
  while (true) {
    const size_t next = rest.find(kCalls);
    const std::string_view part = rest.substr(0, next);
    const size_t a = part.find(kArgs);
    if (a == std::string_view::npos) return plain(text);
    json j = {{"name", trim(part.substr(0, a))}};
    json args = parse_json(trim(part.substr(a + kArgs.size())));
    if (args.is_discarded() || j["name"].get<std::string>().empty()) return plain(text);
    j["arguments"] = std::move(args);
    ParsedToolCall c;
    if (!to_call(j, c)) return plain(text);
    r.calls.push_back(std::move(c));
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + kCalls.size());
  }
  return r;
}

}  // namespace

ToolCallFormat tool_call_format_for(std::string_view tmpl) {
  if (tmpl.find("<tool_call>") != std::string_view::npos)
    return tmpl.find("<function=") != std::string_view::npos ? ToolCallFormat::qwen3_coder : ToolCallFormat::hermes;
  if (tmpl.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::mistral;
  if (tmpl.find("<|python_tag|>") != std::string_view::npos || tmpl.find("ipython") != std::string_view::npos)
    return ToolCallFormat::llama3;
  return ToolCallFormat::none;
}

const char* tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::hermes: return "hermes";
    case ToolCallFormat::qwen3_coder: return "qwen3_coder";
    case ToolCallFormat::llama3: return "llama3";
    case ToolCallFormat::mistral: return "mistral";
    case ToolCallFormat::none: break;
  }
  return "none";
}

ToolOutput parse_tool_output(std::string_view text, ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::hermes: return parse_hermes(text);
    case ToolCallFormat::qwen3_coder: return parse_qwen3_coder(text);
    case ToolCallFormat::llama3: return parse_llama3(text);
    case ToolCallFormat::mistral: return parse_mistral(text);
    case ToolCallFormat::none: break;
  }
  return ToolOutput{std::string(text), {}};
}

size_t tool_text_releasable(std::string_view text, ToolCallFormat f) {
  std::string_view marker;
  switch (f) {
    case ToolCallFormat::none: return text.size();
    case ToolCallFormat::hermes:
    case ToolCallFormat::qwen3_coder: marker = "<tool_call>"; break;
    case ToolCallFormat::mistral: marker = "[TOOL_CALLS]"; break;
    case ToolCallFormat::llama3: {
      static constexpr std::string_view kTag = "<|python_tag|>";
      const size_t b = text.find_first_not_of(" \t\r\n");
      if (b == std::string_view::npos) return 0;  // blank so far: a call may follow
      const std::string_view head = text.substr(b);
      const bool may_be_tag = head.substr(0, kTag.size()) == kTag.substr(0, std::min(head.size(), kTag.size()));
      return head.front() == '{' || may_be_tag ? 0 : text.size();
    }
  }
  const size_t at = text.find(marker);
  if (at != std::string_view::npos) return at;
  for (size_t k = std::min(marker.size() - 1, text.size()); k > 0; --k)
    if (text.substr(text.size() - k) == marker.substr(0, k)) return text.size() - k;
  return text.size();
}

}  // namespace ninfer::server
