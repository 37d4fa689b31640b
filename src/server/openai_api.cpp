#include "server/openai_api.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "server/json_schema.h"
#include "text/jinja_json.h"

namespace ninfer::server {
namespace {

// NOTE: OpenAI allows 4 stop sequences; we allow more (holding back text costs little), but
// bound them so a request cannot make every token's check arbitrarily slow.
constexpr size_t kMaxStops = 16;
constexpr size_t kMaxStopBytes = 256;

[[noreturn]] void bad(const std::string& param, const std::string& msg, const std::string& code = "invalid_value") {
  throw ApiError{400, msg, "invalid_request_error", param, code};
}

[[noreturn]] void unsupported(const std::string& param, const std::string& msg) {
  throw ApiError{400, msg, "invalid_request_error", param, "unsupported_parameter"};
}

[[noreturn]] void wrong_type(const std::string& param, const char* want, const json& got) {
  bad(param, fmt::format("'{}' must be {}, got {}", param, want, got.type_name()), "invalid_type");
}

// Present and not null.
const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> get_bool(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(key, "a boolean", *v);
  return v->get<bool>();
}

std::optional<double> get_number(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number", *v);
  return v->get<double>();
}

// Integers may come as 16 or 16.0 (some clients serialise every number as a float).
std::optional<int64_t> get_int(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      bad(key, fmt::format("'{}' is too large", key));
    return v->get<int64_t>();
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return int64_t(d);
  }
  wrong_type(key, "an integer", *v);
}

float ranged(const json& obj, const char* key, float dflt, double lo, double hi, const char* range) {
  std::optional<double> v = get_number(obj, key);
  if (!v) return dflt;
  if (!(*v >= lo && *v <= hi)) bad(key, fmt::format("'{}' must be {}, got {}", key, range, *v));
  return float(*v);
}

void parse_stop(const json& body, ApiRequest& r) {
  const json* v = field(body, "stop");
  if (!v) return;
  auto one = [&](const json& s, const std::string& name) {
    if (!s.is_string()) wrong_type(name, "a string", s);
    const std::string& t = s.get_ref<const std::string&>();
    if (t.empty()) bad(name, fmt::format("'{}' must not be an empty string", name));
    if (t.size() > kMaxStopBytes) bad(name, fmt::format("'{}' is longer than {} bytes", name, kMaxStopBytes));
    r.stop.push_back(t);
  };
  if (v->is_string()) {
    one(*v, "stop");
  } else if (v->is_array()) {
    if (v->size() > kMaxStops) bad("stop", fmt::format("'stop' has {} strings; at most {} are supported", v->size(), kMaxStops));
    for (size_t i = 0; i < v->size(); ++i) one((*v)[i], fmt::format("stop[{}]", i));
  } else {
    wrong_type("stop", "a string or an array of strings", *v);
  }
}

// Fields both endpoints share: sampling, limits, stream, stop and the unsupported ones.
void parse_common(const json& body, ApiRequest& r) {
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) wrong_type("model", "a string", *m);
    r.model = m->get<std::string>();
  }
  // max_completion_tokens is the newer name of max_tokens (chat); it wins when both are given.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (std::optional<int64_t> v = get_int(body, key)) {
      if (*v < 0) bad(key, fmt::format("'{}' must be >= 0, got {}", key, *v));
      r.max_tokens = *v;
    }
  }
  SamplingParams& s = r.sampling;
  r.set_temperature = field(body, "temperature") != nullptr;
  r.set_top_p = field(body, "top_p") != nullptr;
  r.set_top_k = field(body, "top_k") != nullptr;
  r.set_min_p = field(body, "min_p") != nullptr;
  r.set_repetition_penalty = field(body, "repetition_penalty") != nullptr;
  // NOTE: OpenAI's defaults: temperature 1, top_p 1 (sampling), not the CLI's greedy.
  s.temperature = ranged(body, "temperature", 1.0f, 0.0, 2.0, "between 0 and 2");
  s.top_p = ranged(body, "top_p", 1.0f, 0.0, 1.0, "in (0, 1]");
  if (s.top_p <= 0.0f) bad("top_p", "'top_p' must be in (0, 1], got 0");
  s.min_p = ranged(body, "min_p", 0.0f, 0.0, 1.0, "between 0 and 1");
  s.presence_penalty = ranged(body, "presence_penalty", 0.0f, -2.0, 2.0, "between -2 and 2");
  s.frequency_penalty = ranged(body, "frequency_penalty", 0.0f, -2.0, 2.0, "between -2 and 2");
  // Extensions (vLLM, llama.cpp): top_k (-1 or 0: off), repetition_penalty, ignore_eos.
  if (std::optional<int64_t> k = get_int(body, "top_k")) {
    if (*k < -1 || *k > std::numeric_limits<int>::max()) bad("top_k", fmt::format("'top_k' must be >= -1 (-1 or 0: off), got {}", *k));
    s.top_k = *k < 0 ? 0 : int(*k);
  }
  s.repetition_penalty = ranged(body, "repetition_penalty", 1.0f, 1e-3, 100.0, "between 0.001 and 100");
  if (std::optional<int64_t> seed = get_int(body, "seed")) {
    s.seed = uint64_t(*seed);
    r.seed_given = true;
  }
  r.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  parse_stop(body, r);

  r.stream = get_bool(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) wrong_type("stream_options", "an object", *so);
    if (const json* iu = field(*so, "include_usage")) {
      if (!iu->is_boolean()) wrong_type("stream_options.include_usage", "a boolean", *iu);
      r.include_usage = iu->get<bool>();
    }
  }

  if (std::optional<int64_t> n = get_int(body, "n")) {
    if (*n < 1 || *n > kMaxChoices) bad("n", fmt::format("'n' must be between 1 and {}, got {}", kMaxChoices, *n));
    r.n = int(*n);
  }
  // logit_bias: {"token id": bias}, the id as a decimal string (JSON keys are strings).
  if (const json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) wrong_type("logit_bias", "an object mapping token ids to biases", *lb);
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string w = fmt::format("logit_bias.{}", it.key());
      const std::string& k = it.key();
      int64_t id = -1;
      if (!k.empty() && k.size() <= 9 && k.find_first_not_of("0123456789") == std::string::npos) id = std::stoll(k);
      if (id < 0) bad(w, fmt::format("'logit_bias' keys must be token ids (decimal integers), got '{}'", k));
      if (!it->is_number()) wrong_type(w, "a number", *it);
      const double b = it->get<double>();
      if (!(b >= -100.0 && b <= 100.0)) bad(w, fmt::format("'{}' must be between -100 and 100, got {}", w, b));
      r.sampling.logit_bias.emplace_back(int32_t(id), float(b));
    }
  }
}

void refuse_nonempty_array(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return;
  if (!v->is_array()) wrong_type(key, "an array", *v);
  if (!v->empty()) unsupported(key, fmt::format("'{}' (function calling) is not supported by this server", key));
}

std::string message_content(const json& m, const std::string& where, bool may_be_null) {
  const json* c = field(m, "content");
  if (!c) {
    if (may_be_null) return "";
    bad(where + ".content", fmt::format("'{}.content' is required", where), "missing_required_parameter");
  }
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) wrong_type(where + ".content", "a string or an array of content parts", *c);
  std::string text;
  for (size_t j = 0; j < c->size(); ++j) {
    const json& part = (*c)[j];
    const std::string pw = fmt::format("{}.content[{}]", where, j);
    if (!part.is_object()) wrong_type(pw, "an object", part);
    const json* type = field(part, "type");
    if (!type || !type->is_string()) bad(pw + ".type", fmt::format("'{}.type' must be a string", pw));
    const std::string t = type->get<std::string>();
    if (t != "text")
      unsupported(pw + ".type", fmt::format("content parts of type '{}' are not supported (only 'text')", t));
    const json* tx = field(part, "text");
    if (!tx || !tx->is_string()) bad(pw + ".text", fmt::format("'{}.text' must be a string", pw));
    text += tx->get<std::string>();
  }
  return text;
}

using ojson = nlohmann::ordered_json;

// messages[i].tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}].
ojson parse_tool_calls(const json& tc, const ojson& otc, const std::string& where) {
  if (!tc.is_array()) wrong_type(where, "an array", tc);
  ojson out = ojson::array();
  for (size_t j = 0; j < tc.size(); ++j) {
    const std::string w = fmt::format("{}[{}]", where, j);
    const json& c = tc[j];
    if (!c.is_object()) wrong_type(w, "an object", c);
    if (const json* id = field(c, "id"); id && !id->is_string()) wrong_type(w + ".id", "a string", *id);
    if (const json* t = field(c, "type"); t && !(t->is_string() && *t == "function"))
      bad(w + ".type", fmt::format("'{}.type' must be 'function'", w));
    const json* f = field(c, "function");
    if (!f) bad(w + ".function", fmt::format("'{}.function' is required", w), "missing_required_parameter");
    if (!f->is_object()) wrong_type(w + ".function", "an object", *f);
    const json* name = field(*f, "name");
    if (!name || !name->is_string()) bad(w + ".function.name", fmt::format("'{}.function.name' must be a string", w));
    ojson oc = otc[j];
    if (const json* a = field(*f, "arguments")) {
      if (a->is_string()) {
        // NOTE: OpenAI sends arguments as JSON text; templates expect the object (vLLM parses it too).
        ojson parsed = ojson::parse(a->get<std::string>(), nullptr, false);
        if (parsed.is_discarded() || !parsed.is_object())
          bad(w + ".function.arguments", fmt::format("'{}.function.arguments' must be a JSON object (as text or as an object)", w));
        oc["function"]["arguments"] = std::move(parsed);
      } else if (!a->is_object()) {
        wrong_type(w + ".function.arguments", "a JSON object or a string holding one", *a);
      }
    } else {
      oc["function"]["arguments"] = ojson::object();
    }
    out.push_back(std::move(oc));
  }
  return out;
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}].
void check_tools(const json& tools) {
  if (!tools.is_array()) wrong_type("tools", "an array", tools);
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string w = fmt::format("tools[{}]", i);
    const json& t = tools[i];
    if (!t.is_object()) wrong_type(w, "an object", t);
    const json* type = field(t, "type");
    if (!type || !(type->is_string() && *type == "function"))
      bad(w + ".type", fmt::format("'{}.type' must be 'function'", w));
    const json* f = field(t, "function");
    if (!f) bad(w + ".function", fmt::format("'{}.function' is required", w), "missing_required_parameter");
    if (!f->is_object()) wrong_type(w + ".function", "an object", *f);
    const json* name = field(*f, "name");
    if (!name || !name->is_string()) bad(w + ".function.name", fmt::format("'{}.function.name' must be a string", w));
    if (const json* d = field(*f, "description"); d && !d->is_string())
      wrong_type(w + ".function.description", "a string", *d);
    if (const json* p = field(*f, "parameters"); p && !p->is_object())
      wrong_type(w + ".function.parameters", "an object (a JSON Schema)", *p);
  }
}

}  // namespace

json error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", err}};
}

json parse_body(const std::string& text) {
  try {
    // The depth is checked while parsing: what reads the body afterwards (the ordered parse's
    // copy, jinja::from_json, dump) recurses through it.
    return json::parse(text, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxJsonDepth)
        throw ApiError{400,
                       fmt::format("the request body nests deeper than {} levels (the JSON depth limit, kMaxJsonDepth)",
                                   kMaxJsonDepth),
                       "invalid_request_error", "", "invalid_json"};
      return true;
    });
  } catch (const json::parse_error& e) {
    throw ApiError{400,
                   fmt::format("the request body is not valid JSON (byte {}): {}", e.byte, e.what()),
                   "invalid_request_error", "", "invalid_json"};
  } catch (const json::exception& e) {  // e.g. a number out of double range
    throw ApiError{400, fmt::format("the request body is not valid JSON: {}", e.what()), "invalid_request_error", "",
                   "invalid_json"};
  }
}

ApiRequest parse_chat_request(const json& body, const nlohmann::ordered_json* ordered) {
  if (!body.is_object()) bad("", fmt::format("the request body must be a JSON object, got {}", body.type_name()));
  ojson sorted_copy;
  if (!ordered) sorted_copy = ojson::parse(body.dump());
  const ojson& ob = ordered ? *ordered : sorted_copy;
  ApiRequest r;
  r.endpoint = Endpoint::kChat;
  const json* msgs = field(body, "messages");
  if (!msgs) bad("messages", "'messages' is required", "missing_required_parameter");
  if (!msgs->is_array()) wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) bad("messages", "'messages' must contain at least one message");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const ojson& om = ob.at("messages").at(i);
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) wrong_type(where, "an object", m);
    const json* role = field(m, "role");
    if (!role) bad(where + ".role", fmt::format("'{}.role' is required", where), "missing_required_parameter");
    if (!role->is_string()) wrong_type(where + ".role", "a string", *role);
    std::string rl = role->get<std::string>();
    if (rl == "developer") rl = "system";  // OpenAI's newer name for the system role
    if (rl == "function")
      unsupported(where + ".role", fmt::format("'{}.role' 'function' (the deprecated function-calling API) is not supported; use 'tool'", where));
    if (rl != "system" && rl != "user" && rl != "assistant" && rl != "tool")
      bad(where + ".role", fmt::format("'{}.role' must be one of system, developer, user, assistant, tool; got '{}'", where, rl));
    ojson fields = ojson::object();
    bool calls = false;
    if (rl == "assistant") {
      if (const json* tc = field(m, "tool_calls"); tc && !(tc->is_array() && tc->empty())) {
        fields["tool_calls"] = parse_tool_calls(*tc, om.at("tool_calls"), where + ".tool_calls");
        calls = true;
      }
      if (const json* rc = field(m, "reasoning_content")) {
        if (!rc->is_string()) wrong_type(where + ".reasoning_content", "a string", *rc);
        fields["reasoning_content"] = rc->get<std::string>();
      }
    }
    if (rl == "tool") {
      if (const json* id = field(m, "tool_call_id")) {
        if (!id->is_string()) wrong_type(where + ".tool_call_id", "a string", *id);
        fields["tool_call_id"] = id->get<std::string>();
      }
    }
    if (const json* nm = field(m, "name")) {
      if (!nm->is_string()) wrong_type(where + ".name", "a string", *nm);
      fields["name"] = nm->get<std::string>();
    }
    // NOTE: content may be null for an assistant turn (it only calls tools); templates get "".
    Message msg{rl, message_content(m, where, rl == "assistant" || calls)};
    if (!fields.empty()) msg.fields = jinja::from_json(fields);
    r.messages.push_back(std::move(msg));
  }
  if (const json* tk = field(body, "chat_template_kwargs")) {
    if (!tk->is_object()) wrong_type("chat_template_kwargs", "an object", *tk);
    for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})
      if (tk->contains(reserved))
        bad(fmt::format("chat_template_kwargs.{}", reserved),
            fmt::format("'chat_template_kwargs.{}' cannot be set: the server sets '{}' itself", reserved, reserved));
    r.chat_template_kwargs = jinja::from_json(ob.at("chat_template_kwargs"));
  }
  parse_common(body, r);
  refuse_nonempty_array(body, "functions");
  // tool_choice: "auto" (the default with tools), "none" (no tools shown), "required" (at least
  // one call) or {"type": "function", "function": {"name": F}} (a call of F). The last two
  // constrain sampling: F's parameters schema (the reply is F's arguments), or a JSON array of
  // {"name", "parameters"} objects, one of the tools each (as vLLM does).
  std::string choice = "auto";
  if (const json* tc = field(body, "tool_choice")) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "auto" && choice != "none" && choice != "required")
        bad("tool_choice", fmt::format("'tool_choice' must be 'auto', 'none', 'required' or an object naming a "
                                       "function, got '{}'", choice));
    } else if (tc->is_object()) {
      const json* type = field(*tc, "type");
      if (!type || !(type->is_string() && *type == "function"))
        bad("tool_choice.type", "'tool_choice.type' must be 'function'");
      const json* f = field(*tc, "function");
      if (!f || !f->is_object()) bad("tool_choice.function", "'tool_choice.function' must be an object with a 'name'");
      const json* name = field(*f, "name");
      if (!name || !name->is_string()) bad("tool_choice.function.name", "'tool_choice.function.name' must be a string");
      choice = "named";
      r.tool_choice_name = name->get<std::string>();
    } else {
      wrong_type("tool_choice", "a string or an object", *tc);
    }
  }
  const json* tools = field(body, "tools");
  if (tools) check_tools(*tools);
  r.parallel_tool_calls = get_bool(body, "parallel_tool_calls").value_or(true);
  const bool have_tools = tools && !tools->empty();
  if ((choice == "required" || choice == "named") && !have_tools)
    bad("tool_choice", fmt::format("'tool_choice' {} needs a non-empty 'tools' list",
                                   choice == "named" ? "naming a function" : "'required'"));
  // NOTE: tool_choice "none": the model must not call tools, so it is not shown any.
  if (have_tools && choice != "none") r.tools = jinja::from_json(ob.at("tools"));
  if (choice == "required" || choice == "named") {
    const ojson& otools = ob.at("tools");
    ojson alternatives = ojson::array();
    bool found = false;
    for (size_t i = 0; i < otools.size(); ++i) {
      const ojson& f = otools[i].at("function");
      const std::string name = f.at("name").get<std::string>();
      const ojson params = f.contains("parameters") ? f.at("parameters") : ojson{{"type", "object"}};
      // Each tool's schema compiled alone first, so a keyword the grammar lacks is named where it is.
      std::shared_ptr<const JsonGrammar> g = compile_json_schema(params, fmt::format("tools[{}].function.parameters", i));
      if (choice == "named" && name == r.tool_choice_name) {
        r.grammar = g;
        found = true;
      }
      alternatives.push_back({{"type", "object"},
                              {"properties", {{"name", {{"const", name}}}, {"parameters", params}}},
                              {"required", {"name", "parameters"}},
                              {"additionalProperties", false}});
    }
    if (choice == "named" && !found)
      bad("tool_choice.function.name",
          fmt::format("'tool_choice.function.name' '{}' is not one of the 'tools'", r.tool_choice_name));
    if (choice == "required") {
      ojson arr{{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", alternatives}}}};
      if (!r.parallel_tool_calls) arr["maxItems"] = 1;
      r.grammar = compile_json_schema(arr, "tools");
    }
    r.tool_choice = choice == "named" ? ToolChoice::named : ToolChoice::required;
  }
  const bool logprobs = get_bool(body, "logprobs").value_or(false);
  if (std::optional<int64_t> tl = get_int(body, "top_logprobs")) {
    if (*tl < 0 || *tl > kMaxTopLogprobs)
      bad("top_logprobs", fmt::format("'top_logprobs' must be between 0 and {}, got {}", kMaxTopLogprobs, *tl));
    if (!logprobs && *tl > 0) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.logprobs = int(*tl);
  }
  if (logprobs) r.logprobs = std::max(r.logprobs, 0);
  else r.logprobs = -1;
  if (const json* rf = field(body, "response_format")) {
    if (!rf->is_object()) wrong_type("response_format", "an object", *rf);
    if (r.tool_choice != ToolChoice::automatic && !(field(*rf, "type") && *field(*rf, "type") == "text"))
      bad("response_format", "'response_format' cannot be combined with 'tool_choice' 'required' or a named function");
    const json* t = field(*rf, "type");
    if (!t) bad("response_format.type", "'response_format.type' is required", "missing_required_parameter");
    if (!t->is_string()) wrong_type("response_format.type", "a string", *t);
    const std::string type = t->get<std::string>();
    if (type == "json_object") {
      r.grammar = json_object_grammar();
    } else if (type == "json_schema") {
      const json* js = field(*rf, "json_schema");
      if (!js) bad("response_format.json_schema", "'response_format.json_schema' is required for type 'json_schema'",
                   "missing_required_parameter");
      if (!js->is_object()) wrong_type("response_format.json_schema", "an object", *js);
      if (const json* nm = field(*js, "name"); nm && !nm->is_string())
        wrong_type("response_format.json_schema.name", "a string", *nm);
      if (const json* st = field(*js, "strict"); st && !st->is_boolean())
        wrong_type("response_format.json_schema.strict", "a boolean", *st);
      const json* sc = field(*js, "schema");
      if (sc && !sc->is_object() && !sc->is_boolean())
        wrong_type("response_format.json_schema.schema", "an object (a JSON Schema)", *sc);
      // The ordered copy: properties are generated in the order the client wrote them.
      r.grammar = compile_json_schema(sc ? ob.at("response_format").at("json_schema").at("schema") : ojson::object(),
                                      "response_format.json_schema.schema");
    } else if (type != "text") {
      bad("response_format.type",
          fmt::format("'response_format.type' must be 'text', 'json_object' or 'json_schema', got '{}'", type));
    }
  }
  if (field(body, "audio")) unsupported("audio", "'audio' output is not supported by this server");
  if (const json* mod = field(body, "modalities")) {
    if (!mod->is_array()) wrong_type("modalities", "an array", *mod);
    for (const json& x : *mod)
      if (!(x.is_string() && x == "text")) unsupported("modalities", "only the 'text' modality is supported");
  }
  return r;
}

ApiRequest parse_completion_request(const json& body) {
  if (!body.is_object()) bad("", fmt::format("the request body must be a JSON object, got {}", body.type_name()));
  ApiRequest r;
  r.endpoint = Endpoint::kCompletion;
  r.max_tokens = 16;  // OpenAI's default for /v1/completions
  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required", "missing_required_parameter");
  auto ids_from = [](const json& arr, const std::string& where) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < arr.size(); ++i) {
      const json& t = arr[i];
      if (!t.is_number_integer()) wrong_type(fmt::format("{}[{}]", where, i), "an integer token id", t);
      const int64_t v = t.get<int64_t>();
      if (v < 0 || v > std::numeric_limits<int32_t>::max())
        bad(fmt::format("{}[{}]", where, i), fmt::format("token id {} is out of range", v));
      ids.push_back(int32_t(v));
    }
    return ids;
  };
  if (p->is_string()) {
    r.prompts.push_back(PromptInput{p->get<std::string>(), {}});
  } else if (p->is_array()) {
    if (p->empty()) bad("prompt", "'prompt' must not be empty");
    const json& first = (*p)[0];
    if (first.is_number()) {
      r.prompts.push_back(PromptInput{std::nullopt, ids_from(*p, "prompt")});
    } else {
      // A list of prompts: strings or token-id arrays (mixed, as OpenAI allows).
      if (p->size() > kMaxPrompts)
        bad("prompt", fmt::format("'prompt' holds {} prompts; at most {} are supported", p->size(), kMaxPrompts));
      for (size_t i = 0; i < p->size(); ++i) {
        const json& x = (*p)[i];
        const std::string w = fmt::format("prompt[{}]", i);
        if (x.is_string()) {
          r.prompts.push_back(PromptInput{x.get<std::string>(), {}});
        } else if (x.is_array()) {
          if (x.empty()) bad(w, fmt::format("'{}' must not be empty", w));
          r.prompts.push_back(PromptInput{std::nullopt, ids_from(x, w)});
        } else {
          wrong_type(w, "a string or an array of token ids", x);
        }
      }
    }
  } else {
    wrong_type("prompt", "a string, an array of strings or an array of token ids", *p);
  }
  parse_common(body, r);
  if (std::optional<int64_t> lp = get_int(body, "logprobs")) {
    if (*lp < 0 || *lp > kMaxTopLogprobs)
      bad("logprobs", fmt::format("'logprobs' must be between 0 and {}, got {}", kMaxTopLogprobs, *lp));
    r.logprobs = int(*lp);
  }
  r.echo = get_bool(body, "echo").value_or(false);
  if (std::optional<int64_t> bo = get_int(body, "best_of")) {
    if (*bo < r.n || *bo > kMaxChoices)
      bad("best_of", fmt::format("'best_of' must be between 'n' ({}) and {}, got {}", r.n, kMaxChoices, *bo));
    if (*bo > r.n && r.stream) bad("best_of", "'best_of' greater than 'n' cannot be streamed", "invalid_value");
    r.best_of = int(*bo);
  }
  if (const json* sfx = field(body, "suffix")) {
    if (!sfx->is_string()) wrong_type("suffix", "a string", *sfx);
    if (!sfx->get<std::string>().empty()) unsupported("suffix", "'suffix' (insertion) is not supported by this server");
  }
  return r;
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

static json reason_json(const std::string& r) { return r.empty() ? json(nullptr) : json(r); }

static json bytes_json(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json chat_logprobs(const std::vector<LogprobEntry>& entries) {
  json content = json::array();
  for (const LogprobEntry& e : entries) {
    json top = json::array();
    for (const auto& [t, l] : e.top) top.push_back({{"token", t}, {"logprob", l}, {"bytes", bytes_json(t)}});
    content.push_back({{"token", e.token},
                       {"logprob", e.logprob ? json(*e.logprob) : json(nullptr)},
                       {"bytes", bytes_json(e.token)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs(const std::vector<LogprobEntry>& entries, size_t offset0) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  size_t off = offset0;
  for (const LogprobEntry& e : entries) {
    tokens.push_back(e.token);
    lps.push_back(e.logprob ? json(*e.logprob) : json(nullptr));
    if (!e.logprob) {
      tops.push_back(nullptr);
    } else {
      json t = json::object();
      for (const auto& [s, l] : e.top)
        if (!t.contains(s)) t[s] = l;  // NOTE: two ids with the same bytes keep the likelier
      tops.push_back(t);
    }
    offs.push_back(off);
    off += e.token.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json chat_completion(const ResponseMeta& m, const std::vector<Choice>& choices, const Usage& u) {
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    json msg = {{"role", "assistant"}, {"content", c.text}};
    std::string reason = c.finish_reason;
    if (!c.tool_calls.is_null()) {
      if (c.text.empty()) msg["content"] = nullptr;
      msg["tool_calls"] = c.tool_calls;
      if (reason == "stop") reason = "tool_calls";
    }
    cs.push_back({{"index", i}, {"message", msg}, {"logprobs", c.logprobs}, {"finish_reason", reason_json(reason)}});
  }
  return {{"id", m.id},       {"object", "chat.completion"}, {"created", m.created},
          {"model", m.model}, {"choices", cs},               {"usage", usage_json(u)},
          {"system_fingerprint", nullptr}};
}

json text_completion(const ResponseMeta& m, const std::vector<Choice>& choices, const Usage& u) {
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i)
    cs.push_back({{"index", i},
                  {"text", choices[i].text},
                  {"logprobs", choices[i].logprobs},
                  {"finish_reason", reason_json(choices[i].finish_reason)}});
  return {{"id", m.id},       {"object", "text_completion"}, {"created", m.created},
          {"model", m.model}, {"choices", cs},               {"usage", usage_json(u)},
          {"system_fingerprint", nullptr}};
}

json chat_chunk(const ResponseMeta& m, const json& delta, const std::string& finish_reason, bool include_usage,
                int index, const json& logprobs) {
  json choice = {{"index", index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", reason_json(finish_reason)}};
  json j = {{"id", m.id},       {"object", "chat.completion.chunk"}, {"created", m.created},
            {"model", m.model}, {"choices", json::array({choice})},  {"system_fingerprint", nullptr}};
  if (include_usage) j["usage"] = nullptr;
  return j;
}

json text_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason, bool include_usage,
                int index, const json& logprobs) {
  json choice = {{"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", reason_json(finish_reason)}};
  json j = {{"id", m.id},       {"object", "text_completion"},      {"created", m.created},
            {"model", m.model}, {"choices", json::array({choice})}, {"system_fingerprint", nullptr}};
  if (include_usage) j["usage"] = nullptr;
  return j;
}

json usage_chunk(const ResponseMeta& m, bool chat, const Usage& u) {
  return {{"id", m.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", json::array()},
          {"usage", usage_json(u)},
          {"system_fingerprint", nullptr}};
}

std::string sse_event(const json& j) {
  // NOTE: replace, not throw, on invalid UTF-8: generated text is valid by construction
  // (StreamDecoder), but an echo of client strings must never abort a stream.
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace ninfer::server
