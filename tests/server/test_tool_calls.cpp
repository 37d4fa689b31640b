// Tool calls read back out of generated text, per family format, on outputs written the way
// each family's documentation shows them (the reference models are too small to choose tools
// themselves); the format chosen from the recorded real chat templates.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/tool_calls.h"
#include "test_paths.h"

namespace ninfer::server {
namespace {

using json = nlohmann::json;

std::string read_template(const std::string& name) {
  std::ifstream f(test::test_data_dir() / "chat_templates" / "real" / name);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ToolCalls, FormatIsChosenFromTheRealTemplates) {
  EXPECT_EQ(tool_call_format_for(read_template("qwen3.jinja")), ToolCallFormat::hermes);
  EXPECT_EQ(tool_call_format_for(read_template("llama-3.1-8b-instruct.jinja")), ToolCallFormat::llama3);
  EXPECT_EQ(tool_call_format_for(read_template("mistral-7b-instruct-v0.3.jinja")), ToolCallFormat::mistral);
  EXPECT_EQ(tool_call_format_for(read_template("mistral-nemo-instruct-2407.jinja")), ToolCallFormat::mistral);
  EXPECT_EQ(tool_call_format_for(read_template("gemma-2-it.jinja")), ToolCallFormat::none);
  EXPECT_EQ(tool_call_format_for(read_template("qwen3-coder.jinja")), ToolCallFormat::qwen3_coder);
}

TEST(ToolCalls, HermesBlocksWithTextAround) {
  const std::string out =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  ToolOutput r = parse_tool_output(out, ToolCallFormat::hermes);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.content, "Let me check.");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Paris", "days": 2})"));
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, "{}");
}

TEST(ToolCalls, HermesUnclosedLastBlockAndArgumentsAsAString) {
  ToolOutput r = parse_tool_output("<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}\n",
                                   ToolCallFormat::hermes);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(r.content, "");
}

TEST(ToolCalls, WhatOnlyLooksLikeACallStaysText) {
  for (const char* bad : {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}\n</tool_call>",  // bad JSON
                          "<tool_call>{\"arguments\": {}}</tool_call>",                             // no name
                          "<tool_call>{\"name\": 3}</tool_call>",                                   // name not a string
                          "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>"}) {        // not an object
    SCOPED_TRACE(bad);
    ToolOutput r = parse_tool_output(bad, ToolCallFormat::hermes);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, bad);
  }
  ToolOutput plain = parse_tool_output("  The answer is 4.\n", ToolCallFormat::hermes);
  EXPECT_TRUE(plain.calls.empty());
  EXPECT_EQ(plain.content, "  The answer is 4.\n") << "a plain answer is returned as written";
}

TEST(ToolCalls, Llama3JsonWithAndWithoutPythonTag) {
  ToolOutput a = parse_tool_output("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
                                   ToolCallFormat::llama3);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Oslo"})");
  ToolOutput b = parse_tool_output(
      "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"x;y\"}}; {\"name\": \"b\", \"parameters\": {}}",
      ToolCallFormat::llama3);
  ASSERT_EQ(b.calls.size(), 2u);
  EXPECT_EQ(b.calls[0].arguments, R"({"s":"x;y"})") << "a ';' inside a string does not split";
  EXPECT_EQ(b.calls[1].name, "b");
  ToolOutput prose = parse_tool_output("It is sunny in Oslo.", ToolCallFormat::llama3);
  EXPECT_TRUE(prose.calls.empty());
  EXPECT_EQ(prose.content, "It is sunny in Oslo.");
}

TEST(ToolCalls, MistralArrayAndArgsForms) {
  ToolOutput v3 = parse_tool_output(
      "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {\"b\": [2]}}]",
      ToolCallFormat::mistral);
  ASSERT_EQ(v3.calls.size(), 2u);
  EXPECT_EQ(v3.calls[1].name, "g");
  EXPECT_EQ(v3.calls[1].arguments, R"({"b":[2]})");
  ToolOutput v11 = parse_tool_output("[TOOL_CALLS]f[ARGS]{\"a\": 1}[TOOL_CALLS]g[ARGS]{}", ToolCallFormat::mistral);
  ASSERT_EQ(v11.calls.size(), 2u);
  EXPECT_EQ(v11.calls[0].name, "f");
  EXPECT_EQ(v11.calls[0].arguments, R"({"a":1})");
  EXPECT_EQ(v11.calls[1].name, "g");
  ToolOutput broken = parse_tool_output("[TOOL_CALLS] [{\"name\": \"f\"", ToolCallFormat::mistral);
  EXPECT_TRUE(broken.calls.empty());
}

// Streaming releases content up to where a call may begin; the rest waits for the end.
TEST(ToolCalls, StreamingReleasesTextBeforeAMarker) {
  using F = ToolCallFormat;
  EXPECT_EQ(tool_text_releasable("The answer is 4.", F::hermes), 16u);
  EXPECT_EQ(tool_text_releasable("Let me check.\n<tool_call>\n{\"na", F::hermes), 14u);
  EXPECT_EQ(tool_text_releasable("Let me check.\n<tool_", F::hermes), 14u) << "a tail that may open a call";
  EXPECT_EQ(tool_text_releasable("a < b", F::hermes), 5u);
  EXPECT_EQ(tool_text_releasable("a <", F::hermes), 2u);
  EXPECT_EQ(tool_text_releasable("x [TOOL_CALLS][{", F::mistral), 2u);
  EXPECT_EQ(tool_text_releasable("x [TOOL", F::mistral), 2u);
  EXPECT_EQ(tool_text_releasable("  {\"name\"", F::llama3), 0u);
  EXPECT_EQ(tool_text_releasable("<|python", F::llama3), 0u);
  EXPECT_EQ(tool_text_releasable("   ", F::llama3), 0u);
  EXPECT_EQ(tool_text_releasable("It is sunny.", F::llama3), 12u);
  EXPECT_EQ(tool_text_releasable("<b>bold</b>", F::llama3), 11u);
  EXPECT_EQ(tool_text_releasable("<tool_call>", F::none), 11u);
  // What is released plus the parse of what is held gives the whole reply's parse.
  const std::string reply = "Checking.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  const size_t n = tool_text_releasable(reply, F::hermes);
  ToolOutput held = parse_tool_output(std::string_view(reply).substr(n), F::hermes);
  ASSERT_EQ(held.calls.size(), 1u);
  EXPECT_EQ(reply.substr(0, n), "Checking.\n");
  EXPECT_EQ(held.content, "");
}

// Qwen3-Coder's XML calls, as its template writes an assistant message's tool_calls back.
TEST(ToolCalls, Qwen3CoderXmlParameters) {
  const char* out =
      "I will look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"unit\": \"c\"}\n</parameter>\n"
      "<parameter=note>\nline one\nline two\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=get_time>\n</function>\n</tool_call>";
  ToolOutput r = parse_tool_output(out, ToolCallFormat::qwen3_coder);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments,
            R"({"city":"New York","days":3,"opts":{"unit":"c"},"note":"line one\nline two"})");
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.content, "I will look.");
  // Malformed: stays text.
  for (const char* bad : {"<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>",  // unclosed parameter
                          "<tool_call>\nf(x=1)\n</tool_call>",                                        // not XML
                          "<tool_call>\n<function=>\n</function>\n</tool_call>"}) {                  // no name
    SCOPED_TRACE(bad);
    ToolOutput b = parse_tool_output(bad, ToolCallFormat::qwen3_coder);
    EXPECT_TRUE(b.calls.empty());
    EXPECT_EQ(b.content, bad);
  }
  EXPECT_EQ(tool_text_releasable("ok <tool_call>\n<function=", ToolCallFormat::qwen3_coder), 3u);
}

}  // namespace
}  // namespace ninfer::server
