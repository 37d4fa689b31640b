// `ninfer serve` with the prefix cache (on by default) and with --no-prefix-cache, end to end:
// a long prompt sent again reports its cached tokens in usage.prompt_tokens_details (plain and
// streamed), answers exactly as the first time and as the uncached server, /metrics counts
// the lookups and hits, and no page stays in use afterwards.
#include <gtest/gtest.h>

#include "server_harness.h"
#include "test_paths.h"

namespace ninfer::test {
namespace {

using namespace std::chrono_literals;

std::string long_text(const std::string& name) {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "The weather was calm and the fields were quiet that year. ";
  return text + "The secret number for " + name + " is 4242. What is the secret number for " + name + "?";
}

json chat_body(const std::string& text, bool stream = false) {
  json b = {{"model", "ref-qwen3-d256"},
            {"messages", {{{"role", "user"}, {"content", text}}}},
            {"temperature", 0},
            {"max_tokens", 24}};
  if (stream) {
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
  }
  return b;
}

int cached_tokens(const json& usage) { return usage.at("prompt_tokens_details").at("cached_tokens").get<int>(); }

bool idle(const Client& c) {
  return wait_until([&] { return c.metric("ninfer_kv_pages_used") == 0 && c.metric("ninfer_requests_running") == 0; },
                    5s);
}

TEST(ServePrefix, RepeatedPromptIsServedFromTheCacheAndAnswersTheSame) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  std::string err;
  auto on = ServerProcess::start({"--max-context", "1024"}, &err);
  ASSERT_TRUE(on) << err;
  auto off = ServerProcess::start({"--max-context", "1024", "--no-prefix-cache"}, &err);
  ASSERT_TRUE(off) << err;
  const Client c(on->port()), c_off(off->port());
  EXPECT_EQ(c.metric("ninfer_prefix_cache_enabled"), 1);
  EXPECT_EQ(c_off.metric("ninfer_prefix_cache_enabled"), 0);

  const std::string text = long_text("Alice");
  Reply first = c.post("/v1/chat/completions", chat_body(text));
  ASSERT_EQ(first.status, 200) << first.body;
  const int n_prompt = first.j["usage"]["prompt_tokens"];
  ASSERT_GT(n_prompt, 5 * 64) << "the prompt should span several pages";
  EXPECT_EQ(cached_tokens(first.j["usage"]), 0);
  ASSERT_TRUE(idle(c));

  Reply again = c.post("/v1/chat/completions", chat_body(text));
  ASSERT_EQ(again.status, 200) << again.body;
  const int cached = cached_tokens(again.j["usage"]);
  EXPECT_EQ(cached, (n_prompt - 1) / 64 * 64) << "every full page but a last one ending the prompt";
  EXPECT_EQ(again.j["choices"][0]["message"]["content"], first.j["choices"][0]["message"]["content"]);

  // Streamed, with the usage chunk; another name: the shared preamble's pages only.
  StreamReply s = c.post_stream("/v1/chat/completions", chat_body(long_text("Bob"), true));
  ASSERT_EQ(s.status, 200) << s.raw;
  ASSERT_GE(s.events.size(), 3u);
  const json usage = json::parse(s.events[s.events.size() - 2])["usage"];
  EXPECT_GE(cached_tokens(usage), 4 * 64);
  EXPECT_LT(cached_tokens(usage), usage["prompt_tokens"].get<int>());
  EXPECT_EQ(cached_tokens(usage) % 64, 0);

  // The uncached server: the same answer, nothing cached.
  Reply plain = c_off.post("/v1/chat/completions", chat_body(text));
  ASSERT_EQ(plain.status, 200) << plain.body;
  Reply plain2 = c_off.post("/v1/chat/completions", chat_body(text));
  ASSERT_EQ(plain2.status, 200) << plain2.body;
  EXPECT_EQ(cached_tokens(plain2.j["usage"]), 0);
  EXPECT_EQ(plain.j["choices"][0]["message"]["content"], first.j["choices"][0]["message"]["content"]);

  ASSERT_TRUE(idle(c));
  EXPECT_EQ(c.metric("ninfer_prefix_cache_hits_total"), double(cached + cached_tokens(usage)));
  EXPECT_EQ(c.metric("ninfer_prefix_cache_queries_total"), double(2 * n_prompt + usage["prompt_tokens"].get<int>()));
  EXPECT_GT(c.metric("ninfer_kv_pages_cached"), 0);
  EXPECT_EQ(c.metric("ninfer_kv_pages_used") + c.metric("ninfer_kv_pages_free"), c.metric("ninfer_kv_pages_total"));
  EXPECT_EQ(c_off.metric("ninfer_prefix_cache_hits_total"), 0);
  EXPECT_EQ(c_off.metric("ninfer_kv_pages_cached"), 0);
  EXPECT_EQ(on->stop(), 0);
  EXPECT_EQ(off->stop(), 0);
}

}  // namespace
}  // namespace ninfer::test
