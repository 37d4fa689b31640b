// Real chat templates of the model families in issue 24, rendered on a conversation each
// (system, user, assistant, and a tool call with its result where the template supports
// tools), compared byte for byte with the text transformers' apply_chat_template gives.
// Data: tests/data/chat_templates/real/
//   *.jinja         the templates. From llama.cpp's models/templates/ (ggml-org/llama.cpp at
//                   1eeb523c, as mirrored in ye-NX/llama.cpp): meta-llama-Llama-3.1-8B-Instruct,
//                   Qwen-Qwen3-0.6B, google-gemma-2-2b-it, ibm-granite-granite-3.3-2B-Instruct,
//                   microsoft-Phi-3.5-mini-instruct, mistralai-Mistral-Nemo-Instruct-2407.
//                   mistral-7b-instruct-v0.3: mistralai/Mistral-7B-Instruct-v0.3's template (the
//                   Nemo one with the spaces v0.3 puts after [INST], [TOOL_CALLS], ...; as quoted
//                   in public llama-cpp-python presets). gemma-3-it: google/gemma-3-*-it's template
//                   as quoted in public code. phi-4 (microsoft/phi-4), phi-4-mini-instruct
//                   (microsoft/Phi-4-mini-instruct, tools in the system message) and olmo-2-instruct
//                   (allenai/OLMo-2-1124-*-Instruct): the one-line templates of those repos.
//                   qwen3-coder: vllm-project/vllm examples/tool_chat_template_qwen3coder.jinja at
//                   7a3bde4c (Qwen3-Coder's template; {% macro %}, |items, loop.previtem).
//   cases.json      the conversations, tools and kwargs (make_cases.py writes it)
//   expected/*.txt  the rendered text: render.py --jinja2 (Jinja2 3.1 in transformers' sandbox)
//                   wrote it and render.py --transformers (transformers 5 apply_chat_template, on
//                   the GPU machine) gave the same bytes; "ERROR: msg" where the template raises.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "test_paths.h"
#include "text/chat_template.h"
#include "text/jinja_json.h"

namespace ninfer {
namespace {

using ojson = nlohmann::ordered_json;

std::filesystem::path real_dir() { return test::test_data_dir() / "chat_templates" / "real"; }

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<ojson> cases() {
  ojson j = ojson::parse(read(real_dir() / "cases.json"));
  return std::vector<ojson>(j.begin(), j.end());
}

// A message of cases.json as the server builds it: role and content, every other field in
// `fields` (tool_calls, tool_call_id, name, reasoning_content, tools).
ChatMessage message(const ojson& m) {
  ChatMessage out{m["role"].get<std::string>(), m["content"].get<std::string>()};
  ojson rest = ojson::object();
  for (const auto& [k, v] : m.items())
    if (k != "role" && k != "content") rest[k] = v;
  if (!rest.empty()) out.fields = jinja::from_json(rest);
  return out;
}

class RealTemplate : public ::testing::TestWithParam<ojson> {};

TEST_P(RealTemplate, RendersAsTransformers) {
  const ojson& c = GetParam();
  std::string tmpl = read(real_dir() / c["template"].get<std::string>());
  std::vector<ChatMessage> msgs;
  for (const ojson& m : c["messages"]) msgs.push_back(message(m));
  ChatOptions opts;
  opts.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  if (c.contains("tools")) opts.tools = jinja::from_json(c["tools"]);
  if (c.contains("kwargs")) opts.kwargs = jinja::from_json(c["kwargs"]);
  std::string expected = read(real_dir() / "expected" / (c["name"].get<std::string>() + ".txt"));
  ASSERT_FALSE(expected.empty());
  if (expected.starts_with("ERROR: ")) {
    try {
      render_chat_template(tmpl, msgs, opts, c["bos_token"], c["eos_token"]);
      ADD_FAILURE() << "expected the template to raise: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected.substr(7)), std::string::npos) << e.what();
    }
    return;
  }
  EXPECT_EQ(render_chat_template(tmpl, msgs, opts, c["bos_token"], c["eos_token"]), expected);
}

INSTANTIATE_TEST_SUITE_P(Models, RealTemplate, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string n = info.param["name"].template get<std::string>();
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

TEST(RealTemplateErrors, GemmaRefusesASystemTurnAndBrokenAlternation) {
  std::string tmpl = read(real_dir() / "gemma-2-it.jinja");
  try {
    render_chat_template(tmpl, {{"system", "s"}, {"user", "u"}}, true, "<bos>", "<eos>");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("System role not supported"), std::string::npos) << e.what();
  }
  try {
    render_chat_template(tmpl, {{"user", "u"}, {"user", "v"}}, true, "<bos>", "<eos>");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Conversation roles must alternate"), std::string::npos) << e.what();
  }
}

TEST(RealTemplateErrors, MistralChecksToolCallIds) {
  std::string tmpl = read(real_dir() / "mistral-7b-instruct-v0.3.jinja");
  ChatMessage call{"assistant", ""};
  call.fields = jinja::from_json(ojson::parse(
      R"({"tool_calls": [{"id": "short", "type": "function", "function": {"name": "f", "arguments": {}}}]})"));
  try {
    render_chat_template(tmpl, {{"user", "u"}, call}, true, "<s>", "</s>");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Tool call IDs should be alphanumeric strings with length 9"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChatTemplateKwargs, ReservedNamesAreRefused) {
  ChatOptions opts;
  opts.kwargs = jinja::Value::dict({{"messages", jinja::Value(jinja::List{})}});
  try {
    render_chat_template("{{ messages }}", {{"user", "u"}}, opts, "", "");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'messages' cannot be set"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplateKwargs, ToolsAreNoneWithoutTools) {
  // As transformers passes tools=None: defined, and none.
  EXPECT_EQ(render_chat_template("{{ tools is defined }} {{ tools is none }}", {{"user", "u"}}, true, "", ""),
            "True True");
  EXPECT_TRUE(chat_template_mentions("{% if enable_thinking %}", "enable_thinking"));
  EXPECT_FALSE(chat_template_mentions("{% if enable_thinking_x %}", "enable_thinking"));
}

}  // namespace
}  // namespace ninfer
