// The OpenAI request parser and response builders, without a model or a server: every field
// check names its field, unsupported fields are refused only at non-default values, unknown
// fields are ignored.
#include <gtest/gtest.h>

#include "server/metrics.h"
#include "server/json_schema.h"
#include "server/openai_api.h"

namespace ninfer::server {
namespace {

json chat(json extra = json::object()) {
  json j = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

// The ApiError a parse throws (fails the test if none).
ApiError chat_error(const json& body) {
  try {
    parse_chat_request(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return {};
}

ApiError completion_error(const json& body) {
  try {
    parse_completion_request(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return {};
}

TEST(OpenAiApi, ChatDefaultsFollowOpenAi) {
  ApiRequest r = parse_chat_request(chat());
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "hi");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.seed_given);
}

TEST(OpenAiApi, ChatFieldsAreRead) {
  ApiRequest r = parse_chat_request(chat({{"temperature", 0},
                                          {"top_p", 0.5},
                                          {"top_k", 40},
                                          {"min_p", 0.1},
                                          {"presence_penalty", 0.5},
                                          {"frequency_penalty", -0.5},
                                          {"seed", 7},
                                          {"max_tokens", 9},
                                          {"max_completion_tokens", 5},
                                          {"stop", {"a", "bc"}},
                                          {"stream", true},
                                          {"stream_options", {{"include_usage", true}}},
                                          {"n", 1},
                                          {"logprobs", false},
                                          {"tools", json::array()},
                                          {"response_format", {{"type", "text"}}},
                                          {"user", "someone"},
                                          {"some_vendor_extension", {{"x", 1}}}}));
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(r.sampling.seed, 7u);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.max_tokens, 5) << "max_completion_tokens wins over max_tokens";
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(OpenAiApi, ContentPartsAndRoles) {
  json body = {{"messages",
                {{{"role", "developer"}, {"content", "be brief"}},
                 {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
                 {{"role", "assistant"}, {"content", nullptr}}}}};
  ApiRequest r = parse_chat_request(body);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.messages[2].content, "");
}

TEST(OpenAiApi, MessagesErrorsNameTheField) {
  ApiError e = chat_error(json{{"model", "m"}});
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages");
  EXPECT_EQ(e.code, "missing_required_parameter");
  EXPECT_EQ(chat_error(json{{"messages", "hi"}}).param, "messages");
  EXPECT_EQ(chat_error(json{{"messages", json::array()}}).param, "messages");
  EXPECT_EQ(chat_error(json{{"messages", {1}}}).param, "messages[0]");
  EXPECT_EQ(chat_error(json{{"messages", {{{"content", "x"}}}}}).param, "messages[0].role");
  EXPECT_EQ(chat_error(json{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}).param, "messages[0].role");
  EXPECT_EQ(chat_error(json{{"messages", {{{"role", "user"}}}}}).param, "messages[0].content");
  EXPECT_EQ(chat_error(json{{"messages", {{{"role", "user"}, {"content", 5}}}}}).param, "messages[0].content");
  ApiError img = chat_error(json{
      {"messages",
       {{{"role", "user"},
         {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}});
  EXPECT_EQ(img.param, "messages[0].content[1].type");
  EXPECT_EQ(img.code, "unsupported_parameter");
  EXPECT_EQ(chat_error(json{{"messages", {{{"role", "function"}, {"content", "x"}}}}}).code, "unsupported_parameter");
  EXPECT_EQ(chat_error(json::array()).status, 400);
}

TEST(OpenAiApi, WrongTypesAndRanges) {
  struct Case {
    json extra;
    const char* param;
  } cases[] = {
      {{{"temperature", "hot"}}, "temperature"},
      {{{"temperature", 2.5}}, "temperature"},
      {{{"temperature", true}}, "temperature"},
      {{{"top_p", 0}}, "top_p"},
      {{{"top_p", 1.5}}, "top_p"},
      {{{"top_k", -2}}, "top_k"},
      {{{"top_k", 1.5}}, "top_k"},
      {{{"min_p", -0.1}}, "min_p"},
      {{{"presence_penalty", 3}}, "presence_penalty"},
      {{{"frequency_penalty", "x"}}, "frequency_penalty"},
      {{{"max_tokens", -1}}, "max_tokens"},
      {{{"max_tokens", "10"}}, "max_tokens"},
      {{{"max_completion_tokens", 2.5}}, "max_completion_tokens"},
      {{{"seed", "x"}}, "seed"},
      {{{"stream", "yes"}}, "stream"},
      {{{"stream_options", 1}}, "stream_options"},
      {{{"stream_options", {{"include_usage", "y"}}}}, "stream_options.include_usage"},
      {{{"stop", 5}}, "stop"},
      {{{"stop", {"a", ""}}}, "stop[1]"},
      {{{"stop", {"a", 3}}}, "stop[1]"},
      {{{"model", 3}}, "model"},
      {{{"n", 0}}, "n"},
      {{{"n", 17}}, "n"},
      {{{"logprobs", 1}}, "logprobs"},
      {{{"top_logprobs", 3}}, "top_logprobs"},  // without logprobs: true
      {{{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
      {{{"logprobs", true}, {"top_logprobs", -1}}, "top_logprobs"},
      {{{"logit_bias", {{"x1", 10}}}}, "logit_bias.x1"},
      {{{"logit_bias", {{"-3", 10}}}}, "logit_bias.-3"},
      {{{"logit_bias", {{"5", 101}}}}, "logit_bias.5"},
      {{{"logit_bias", {{"5", "up"}}}}, "logit_bias.5"},
      {{{"logit_bias", {1, 2}}}, "logit_bias"},
  };
  for (const Case& c : cases) {
    ApiError e = chat_error(chat(c.extra));
    EXPECT_EQ(e.status, 400) << c.extra.dump();
    EXPECT_EQ(e.param, c.param) << c.extra.dump() << ": " << e.message;
    EXPECT_NE(e.message.find(std::string(c.param).substr(0, 4)), std::string::npos) << e.message;
  }
  // Integers written as floats are integers.
  EXPECT_EQ(parse_chat_request(chat({{"max_tokens", 16.0}})).max_tokens, 16);
}

TEST(OpenAiApi, UnsupportedOnlyAtNonDefaultValues) {
  struct Case {
    json extra;
    const char* param;
  } cases[] = {
      {{{"functions", {{{"name", "f"}}}}}, "functions"},
  };
  for (const Case& c : cases) {
    ApiError e = chat_error(chat(c.extra));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param) << e.message;
    EXPECT_EQ(e.code, "unsupported_parameter") << c.param;
  }
  EXPECT_NO_THROW(parse_chat_request(chat({{"n", 1},
                                           {"logprobs", false},
                                           {"top_logprobs", 0},
                                           {"tools", json::array()},
                                           {"tool_choice", "none"},
                                           {"logit_bias", json::object()},
                                           {"parallel_tool_calls", true},
                                           {"store", false},
                                           {"metadata", {{"k", "v"}}}})));
}

TEST(OpenAiApi, CompletionPrompts) {
  ApiRequest r = parse_completion_request({{"prompt", "hello"}});
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text.value(), "hello");
  EXPECT_EQ(r.max_tokens, 16) << "OpenAI's default for /v1/completions";
  EXPECT_EQ(parse_completion_request({{"prompt", {"one"}}}).prompts.at(0).text.value(), "one");
  EXPECT_EQ(parse_completion_request({{"prompt", {1, 2, 3}}}).prompts.at(0).ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_completion_request({{"prompt", {{4, 5}}}}).prompts.at(0).ids, (std::vector<int32_t>{4, 5}));
  // A list of prompts, strings and token arrays mixed.
  ApiRequest many = parse_completion_request({{"prompt", json::array({"a", json::array({7, 8}), "c"})}});
  ASSERT_EQ(many.prompts.size(), 3u);
  EXPECT_EQ(many.prompts[0].text.value(), "a");
  EXPECT_FALSE(many.prompts[1].text.has_value());
  EXPECT_EQ(many.prompts[1].ids, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(many.prompts[2].text.value(), "c");
  EXPECT_EQ(completion_error({{"max_tokens", 3}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", 3}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", {"a", 3}}}).param, "prompt[1]");
  EXPECT_EQ(completion_error({{"prompt", json::array({"a", json::array()})}}).param, "prompt[1]");
  EXPECT_EQ(completion_error({{"prompt", json::array({"a", json::array({1, "x"})})}}).param, "prompt[1][1]");
  EXPECT_EQ(completion_error({{"prompt", json(std::vector<std::string>(kMaxPrompts + 1, "p"))}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", {1, "b"}}}).param, "prompt[1]");
  EXPECT_EQ(completion_error({{"prompt", {1, -5}}}).param, "prompt[1]");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"echo", "yes"}}).param, "echo");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logprobs", 21}}).param, "logprobs");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logprobs", true}}).param, "logprobs");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"n", 3}, {"best_of", 2}}).param, "best_of");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"best_of", 3}, {"stream", true}}).param, "best_of");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"suffix", "y"}}).param, "suffix");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"n", 0}}).param, "n");
  ApiRequest f = parse_completion_request(
      {{"prompt", "x"}, {"n", 2}, {"best_of", 3}, {"logprobs", 4}, {"echo", true}, {"logit_bias", {{"17", -100}}}});
  EXPECT_EQ(f.n, 2);
  EXPECT_EQ(f.best_of, 3);
  EXPECT_EQ(f.logprobs, 4);
  EXPECT_TRUE(f.echo);
  ASSERT_EQ(f.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(f.sampling.logit_bias[0], (std::pair<int32_t, float>{17, -100.0f}));
}

TEST(OpenAiApi, ChatLogprobsAndChoices) {
  EXPECT_EQ(parse_chat_request(chat()).logprobs, -1);
  EXPECT_EQ(parse_chat_request(chat({{"logprobs", true}})).logprobs, 0);
  EXPECT_EQ(parse_chat_request(chat({{"logprobs", true}, {"top_logprobs", 5}})).logprobs, 5);
  EXPECT_EQ(parse_chat_request(chat({{"logprobs", false}, {"top_logprobs", 0}})).logprobs, -1);
  EXPECT_EQ(parse_chat_request(chat({{"n", 3}})).n, 3);
}

TEST(OpenAiApi, LogprobsShapes) {
  const std::vector<LogprobEntry> es = {{"He", std::nullopt, {}}, {"llo", -0.5f, {{"llo", -0.5f}, {"y", -1.5f}}}};
  json c = chat_logprobs(es);
  ASSERT_EQ(c["content"].size(), 2u);
  EXPECT_TRUE(c["content"][0]["logprob"].is_null());
  EXPECT_EQ(c["content"][1]["token"], "llo");
  EXPECT_EQ(c["content"][1]["bytes"], json::array({108, 108, 111}));
  EXPECT_EQ(c["content"][1]["top_logprobs"][1]["token"], "y");
  EXPECT_FLOAT_EQ(c["content"][1]["top_logprobs"][1]["logprob"].get<float>(), -1.5f);
  json t = completion_logprobs(es, 10);
  EXPECT_EQ(t["tokens"], json::array({"He", "llo"}));
  EXPECT_TRUE(t["token_logprobs"][0].is_null());
  EXPECT_TRUE(t["top_logprobs"][0].is_null());
  EXPECT_FLOAT_EQ(t["top_logprobs"][1]["y"].get<float>(), -1.5f);
  EXPECT_EQ(t["text_offset"], json::array({10, 12}));
}

TEST(OpenAiApi, MalformedJsonIsA400) {
  try {
    parse_body("{\"messages\": [");
    FAIL() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "invalid_json");
    EXPECT_NE(e.message.find("not valid JSON"), std::string::npos);
  }
  try {
    parse_body(R"({"max_tokens": 1e400})");
    FAIL() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "invalid_json");
  }
  // Deep nesting is a 400 naming the limit, not a crash: a body of 100,000 nested brackets in
  // chat_template_kwargs or a tool's parameters overflowed the stack in jinja::from_json
  // (found while writing fuzz_openai_request; its inputs are too short to reach that depth).
  for (const std::string& deep : {std::string(100000, '[') + std::string(100000, ']'),
                                  R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"a": )" +
                                      std::string(100000, '[') + std::string(100000, ']') + "}}"}) {
    try {
      parse_body(deep);
      FAIL() << "no error";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_NE(e.message.find("kMaxJsonDepth"), std::string::npos) << e.message;
    }
  }
  std::string ok = std::string(kMaxJsonDepth - 1, '[') + std::string(kMaxJsonDepth - 1, ']');
  EXPECT_NO_THROW(parse_body(ok));
}

TEST(OpenAiApi, ResponseShapes) {
  ResponseMeta m{"chatcmpl-1", 123, "ref"};
  json c = chat_completion(m, {Choice{"hello", "stop", nullptr}}, {3, 2});
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["usage"]["total_tokens"], 5);
  // A reply that was a tool call: content null, the calls, finish_reason "tool_calls".
  const json calls = json::parse(R"([{"id": "call_1", "type": "function",
                                        "function": {"name": "f", "arguments": "{\"a\":1}"}}])");
  json tc = chat_completion(m, {Choice{"", "stop", nullptr, calls}, Choice{"Sure.", "length", nullptr, calls}}, {3, 2});
  EXPECT_TRUE(tc["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(tc["choices"][0]["message"]["tool_calls"], calls);
  EXPECT_EQ(tc["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(tc["choices"][1]["message"]["content"], "Sure.");
  EXPECT_EQ(tc["choices"][1]["finish_reason"], "length") << "a call cut off by max_tokens keeps its reason";
  EXPECT_FALSE(c["choices"][0]["message"].contains("tool_calls"));
  json k = chat_chunk(m, {{"content", "x"}}, "", true);
  EXPECT_TRUE(k["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(k.contains("usage") && k["usage"].is_null());
  EXPECT_FALSE(chat_chunk(m, json::object(), "length", false).contains("usage"));
  json u = usage_chunk(m, true, {3, 2});
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["completion_tokens"], 2);
  json t = text_completion(m, {Choice{"x", "length", nullptr}, Choice{"y", "stop", nullptr}}, {1, 1});
  EXPECT_EQ(t["object"], "text_completion");
  ASSERT_EQ(t["choices"].size(), 2u);
  EXPECT_EQ(t["choices"][1]["index"], 1);
  EXPECT_EQ(t["choices"][1]["text"], "y");
  EXPECT_EQ(text_chunk(m, "z", "", false, 3)["choices"][0]["index"], 3);
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  json e = error_body(ApiError{400, "bad", "invalid_request_error", "", ""});
  EXPECT_TRUE(e["error"]["param"].is_null());
  EXPECT_TRUE(e["error"]["code"].is_null());
  EXPECT_EQ(e["error"]["message"], "bad");
}

TEST(OpenAiApi, ToolsToolCallsAndTemplateKwargs) {
  const char* text = R"J({"messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "reasoning_content": "Call the tool.",
       "tool_calls": [{"id": "call12345", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"unit\": \"c\", \"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "21"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}],
    "chat_template_kwargs": {"enable_thinking": false}, "top_k": 5})J";
  json body = json::parse(text);
  nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  ApiRequest r = parse_chat_request(body, &ordered);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].content, "");  // null content of a tool-calling turn
  // The arguments text became an object, its key order kept.
  EXPECT_EQ(r.messages[1].fields.get("tool_calls").to_json(),
            R"([{"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": {"unit": "c", "city": "Paris"}}}])");
  EXPECT_EQ(r.messages[1].fields.get("reasoning_content").str(), "Call the tool.");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].fields.get("tool_call_id").str(), "call12345");
  EXPECT_EQ(r.messages[2].fields.get("name").str(), "get_weather");
  EXPECT_EQ(r.tools.to_json(), R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}])");
  EXPECT_EQ(r.chat_template_kwargs.get("enable_thinking").str(), "False");
  EXPECT_TRUE(r.set_top_k);
  EXPECT_FALSE(r.set_temperature);
  // tool_choice "none": no tools reach the template; an empty list is no tools.
  body["tool_choice"] = "none";
  EXPECT_TRUE(parse_chat_request(body).tools.is_undefined());
  EXPECT_TRUE(parse_chat_request(chat({{"tools", json::array()}})).tools.is_undefined());
}

// tool_choice required / named compile a grammar: named matches the function's arguments
// only; required an array of {"name": one of the tools, "parameters": its arguments}.
TEST(OpenAiApi, ForcedToolChoiceConstrainsTheReply) {
  const json user = {{"role", "user"}, {"content", "x"}};
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "get_time"}}])");
  json body = {{"messages", {user}}, {"tools", tools},
               {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}};
  ApiRequest named = parse_chat_request(body);
  EXPECT_EQ(named.tool_choice, ToolChoice::named);
  EXPECT_EQ(named.tool_choice_name, "get_weather");
  EXPECT_FALSE(named.tools.is_undefined()) << "the template still sees the tools";
  ASSERT_TRUE(named.grammar);
  auto matches = [](const std::shared_ptr<const JsonGrammar>& g, std::string_view text) {
    JsonMatcher m(g);
    return m.feed(text) && m.accepting();
  };
  EXPECT_TRUE(matches(named.grammar, R"({"city":"Oslo"})"));
  EXPECT_FALSE(matches(named.grammar, R"({"town":"Oslo"})"));
  EXPECT_FALSE(matches(named.grammar, R"([{"name":"get_weather","parameters":{"city":"Oslo"}}])"));
  body["tool_choice"] = "required";
  ApiRequest req = parse_chat_request(body);
  EXPECT_EQ(req.tool_choice, ToolChoice::required);
  ASSERT_TRUE(req.grammar);
  EXPECT_TRUE(matches(req.grammar, R"([{"name":"get_weather","parameters":{"city":"Oslo"}}])"));
  EXPECT_TRUE(matches(req.grammar, R"([{"name":"get_time","parameters":{}},{"name":"get_weather","parameters":{"city":"a"}}])"));
  EXPECT_FALSE(matches(req.grammar, "[]")) << "at least one call";
  EXPECT_FALSE(matches(req.grammar, R"([{"name":"get_date","parameters":{}}])")) << "not a tool";
  EXPECT_FALSE(matches(req.grammar, R"([{"name":"get_weather","parameters":{}}])")) << "city is required";
  // parallel_tool_calls false: an array of exactly one call.
  body["parallel_tool_calls"] = false;
  ApiRequest one = parse_chat_request(body);
  EXPECT_FALSE(one.parallel_tool_calls);
  EXPECT_TRUE(matches(one.grammar, R"([{"name":"get_time","parameters":{}}])"));
  EXPECT_FALSE(matches(one.grammar, R"([{"name":"get_time","parameters":{}},{"name":"get_time","parameters":{}}])"));
  body["parallel_tool_calls"] = "no";
  EXPECT_EQ(chat_error(body).param, "parallel_tool_calls");
  body.erase("parallel_tool_calls");
  body["tool_choice"] = "auto";
  EXPECT_FALSE(parse_chat_request(body).grammar);
  EXPECT_EQ(parse_chat_request(body).tool_choice, ToolChoice::automatic);
}

TEST(OpenAiApi, ToolFieldErrorsNameTheField) {
  json call = {{"role", "assistant"}, {"content", nullptr},
               {"tool_calls", {{{"id", "a"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{not json"}}}}}}};
  json user = {{"role", "user"}, {"content", "x"}};
  struct Case {
    json body;
    const char* param;
  } cases[] = {
      {{{"messages", {user, call}}}, "messages[1].tool_calls[0].function.arguments"},
      {{{"messages", {user, {{"role", "assistant"}, {"tool_calls", {{{"function", {{"arguments", "{}"}}}}}}}}}},
       "messages[1].tool_calls[0].function.name"},
      {{{"messages", {user, {{"role", "assistant"}, {"tool_calls", "f"}}}}}, "messages[1].tool_calls"},
      {{{"messages", {user, {{"role", "tool"}, {"tool_call_id", 7}, {"content", "x"}}}}}, "messages[1].tool_call_id"},
      {{{"messages", {user, {{"role", "tool"}}}}}, "messages[1].content"},
      {{{"messages", {user}}, {"tools", {{{"type", "retrieval"}}}}}, "tools[0].type"},
      {{{"messages", {user}}, {"tools", {{{"type", "function"}, {"function", {{"description", "d"}}}}}}}, "tools[0].function.name"},
      {{{"messages", {user}}, {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}}}},
       "tools[0].function.parameters"},
      {{{"messages", {user}}, {"tools", "f"}}, "tools"},
      {{{"messages", {user}}, {"chat_template_kwargs", "x"}}, "chat_template_kwargs"},
      {{{"messages", {user}}, {"chat_template_kwargs", {{"messages", json::array()}}}}, "chat_template_kwargs.messages"},
      {{{"messages", {user}}, {"tool_choice", "required"}}, "tool_choice"},  // no tools
      {{{"messages", {user}}, {"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"messages", {user}}, {"tool_choice", 3}}, "tool_choice"},
      {{{"messages", {user}}, {"tool_choice", {{"type", "function"}}}}, "tool_choice.function"},
      {{{"messages", {user}}, {"tool_choice", {{"type", "x"}, {"function", {{"name", "f"}}}}}}, "tool_choice.type"},
      {{{"messages", {user}},
        {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}},
       "tool_choice.function.name"},
      {{{"messages", {user}},
        {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}, {"properties", {{"a", {{"type", "string"}, {"format", "email"}}}}}}}}}}}},
        {"tool_choice", "required"}},
       "tools[0].function.parameters.properties.a.format"},
      {{{"messages", {user}},
        {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
        {"tool_choice", "required"},
        {"response_format", {{"type", "json_object"}}}},
       "response_format"},
  };
  for (const Case& c : cases) {
    ApiError e = chat_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body.dump();
    EXPECT_EQ(e.param, c.param) << c.body.dump() << ": " << e.message;
    EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
  }
}

}  // namespace
}  // namespace ninfer::server

namespace ninfer::server {
namespace {

// Buckets are cumulative and inclusive of their upper bound (Prometheus' `le`); +Inf holds all.
TEST(Histogram, BucketsAreCumulativeAndInclusive) {
  Histogram h({0.125, 1, 10});  // binary fractions: the sum is exact
  for (double v : {0.0625, 0.125, 0.5, 1.0, 5.0, 50.0}) h.observe(v);
  const std::string r = h.render("x_seconds", "help");
  EXPECT_NE(r.find("# TYPE x_seconds histogram\n"), std::string::npos);
  EXPECT_NE(r.find("x_seconds_bucket{le=\"0.125\"} 2\n"), std::string::npos) << r;
  EXPECT_NE(r.find("x_seconds_bucket{le=\"1\"} 4\n"), std::string::npos) << r;
  EXPECT_NE(r.find("x_seconds_bucket{le=\"10\"} 5\n"), std::string::npos) << r;
  EXPECT_NE(r.find("x_seconds_bucket{le=\"+Inf\"} 6\n"), std::string::npos) << r;
  EXPECT_NE(r.find("x_seconds_sum 56.6875\n"), std::string::npos) << r;
  EXPECT_NE(r.find("x_seconds_count 6\n"), std::string::npos) << r;
}

}  // namespace
}  // namespace ninfer::server
