// Chat templates in the styles of ChatML/Qwen2.5, Llama 3, Mistral and Zephyr (written for
// these tests, in tests/data/chat_templates/), the reference models' own ChatML template,
// and template errors. Expected strings come from Jinja2 with transformers' settings.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "test_paths.h"
#include "text/chat_template.h"
#include "text/jinja_json.h"
#include "text/tokenizer.h"

namespace ninfer {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream f(test::test_data_dir() / "chat_templates" / (name + ".jinja"), std::ios::binary);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::vector<ChatMessage> kChat = {{"system", "You are terse."},
                                        {"user", "Hi there"},
                                        {"assistant", "Hello."},
                                        {"user", "  Name a prime.  "}};

struct StyleCase {
  const char* file;
  bool add_generation_prompt;
  const char* expected;
};

const StyleCase kStyles[] = {
    {"qwen25_style", true,
     R"J(<|im_start|>system
You are terse.<|im_end|>
<|im_start|>user
Hi there<|im_end|>
<|im_start|>assistant
Hello.<|im_end|>
<|im_start|>user
  Name a prime.  <|im_end|>
<|im_start|>assistant
)J"},
    {"qwen25_style", false,
     R"J(<|im_start|>system
You are terse.<|im_end|>
<|im_start|>user
Hi there<|im_end|>
<|im_start|>assistant
Hello.<|im_end|>
<|im_start|>user
  Name a prime.  <|im_end|>
)J"},
    {"llama3_style", true,
     R"J(<s><|start_header_id|>system<|end_header_id|>

You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hello.<|eot_id|><|start_header_id|>user<|end_header_id|>

Name a prime.<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J"},
    {"llama3_style", false,
     R"J(<s><|start_header_id|>system<|end_header_id|>

You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hello.<|eot_id|><|start_header_id|>user<|end_header_id|>

Name a prime.<|eot_id|>)J"},
    {"mistral_style", true,
     R"J(<s> [INST] You are terse.

Hi there [/INST] Hello.</s> [INST]   Name a prime.   [/INST])J"},
    {"mistral_style", false,
     R"J(<s> [INST] You are terse.

Hi there [/INST] Hello.</s> [INST]   Name a prime.   [/INST])J"},
    {"zephyr_style", true,
     R"J(<|system|>
You are terse.</s>
<|user|>
Hi there</s>
<|assistant|>
Hello.</s>
<|user|>
  Name a prime.  </s>
<|assistant|>
)J"},
    {"zephyr_style", false,
     R"J(<|system|>
You are terse.</s>
<|user|>
Hi there</s>
<|assistant|>
Hello.</s>
<|user|>
  Name a prime.  </s>
)J"},
};

class ChatTemplateStyles : public ::testing::TestWithParam<StyleCase> {};

TEST_P(ChatTemplateStyles, RendersExactly) {
  const StyleCase& c = GetParam();
  EXPECT_EQ(render_chat_template(read_template(c.file), kChat, c.add_generation_prompt, "<s>", "</s>"), c.expected);
}

INSTANTIATE_TEST_SUITE_P(Styles, ChatTemplateStyles, ::testing::ValuesIn(kStyles), [](const auto& info) {
  return std::string(info.param.file) + (info.param.add_generation_prompt ? "_gen" : "_nogen");
});

TEST(ChatTemplate, ToolCallsWithGenericContext) {
  const char* ctx = R"J({"messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "°C"}}}]}, {"role": "tool", "content": "{\"temp\": 21}"}, {"role": "tool", "content": "{\"wind\": 3.5}"}, {"role": "assistant", "content": "21 °C and calm."}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}], "add_generation_prompt": true, "bos_token": "", "eos_token": "<|im_end|>"})J";
  const char* expected = R"J(<|im_start|>system
You are a helpful assistant.

# Tools

You may call one or more functions to assist with the user query.

Function signatures are inside <tools></tools>:
<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
</tools>

For each call, return a JSON object inside <tool_call></tool_call>.<|im_end|>
<|im_start|>user
Weather in Paris?<|im_end|>
<|im_start|>assistant
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "°C"}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
{"temp": 21}
</tool_response>
<tool_response>
{"wind": 3.5}
</tool_response><|im_end|>
<|im_start|>assistant
21 °C and calm.<|im_end|>
<|im_start|>assistant
)J";
  jinja::Value v = jinja::from_json(nlohmann::ordered_json::parse(ctx));
  EXPECT_EQ(jinja::Template::parse(read_template("qwen25_style")).render(v), expected);
}

TEST(ChatTemplate, ReferenceChatMLTwoMessages) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  Tokenizer tok = Tokenizer::load(test::model_dir("ref-qwen3-d256"));
  ASSERT_FALSE(tok.chat_template().empty());
  std::vector<ChatMessage> msgs = {{"system", "You answer questions."}, {"user", "What is 2+2?"}};
  EXPECT_EQ(render_chat_template(tok.chat_template(), msgs, true, tok.bos_token(), tok.eos_token()),
            "<|im_start|>system\nYou answer questions.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render_chat_template(tok.chat_template(), msgs, false, tok.bos_token(), tok.eos_token()),
            "<|im_start|>system\nYou answer questions.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n");
}

TEST(ChatTemplate, GoldenPrompt3IsTheRenderedChatAndEncodesToItsIds) {
  for (const char* model : {"ref-qwen3-d256", "ref-llama-d128"}) {
    NINFER_REQUIRE_MODEL(model);
    Tokenizer tok = Tokenizer::load(test::model_dir(model));
    std::ifstream f(test::model_dir(model) / "golden.json");
    auto g = nlohmann::json::parse(f);
    const auto& p = g["prompts"][2];
    std::string text = p["text"].get<std::string>();
    const std::string head = "<|im_start|>user\n", tail = "<|im_end|>\n<|im_start|>assistant\n";
    ASSERT_TRUE(text.starts_with(head) && text.ends_with(tail)) << text;
    std::string question = text.substr(head.size(), text.size() - head.size() - tail.size());
    std::string rendered =
        render_chat_template(tok.chat_template(), {{"user", question}}, true, tok.bos_token(), tok.eos_token());
    EXPECT_EQ(rendered, text);
    EXPECT_EQ(tok.encode(rendered), p["ids"].get<std::vector<int32_t>>()) << model;
  }
}

TEST(ChatTemplate, RaiseExceptionCarriesTheTemplatesMessage) {
  std::vector<ChatMessage> bad = {{"user", "a"}, {"user", "b"}};
  try {
    render_chat_template(read_template("mistral_style"), bad, true, "<s>", "</s>");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conversation roles must alternate user/assistant"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ninfer
