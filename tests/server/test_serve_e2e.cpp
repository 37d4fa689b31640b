// `ninfer serve` end to end: a real server process on 127.0.0.1 with the reference model on
// the CPU backend, driven over HTTP (our client, the official OpenAI Node SDK and a load
// generator). Checks the wire format, greedy outputs against the CLI and against
// single-request runs, disconnects freeing pages, clear errors, and a bounded load run.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "server_harness.h"
#include "test_paths.h"

namespace ninfer::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kKey = "test-key-123";

std::string needle_text(const std::string& name, int number) {
  return "The secret number for " + name + " is " + std::to_string(number) + ". What is the secret number for " +
         name + "?";
}

json chat_body(const std::string& text, int max_tokens, bool stream = false) {
  json b = {{"model", "ref-qwen3-d256"},
            {"messages", {{{"role", "user"}, {"content", text}}}},
            {"temperature", 0},
            {"max_tokens", max_tokens}};
  if (stream) b["stream"] = true;
  return b;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class Serve : public ::testing::Test {
 protected:
  static inline std::unique_ptr<ServerProcess> server;
  static inline std::string start_error;

  static void SetUpTestSuite() {
    if (!std::filesystem::exists(model_dir("ref-qwen3-d256") / "config.json")) return;
    server = ServerProcess::start({"--max-context", "512", "--max-concurrency", "16", "--max-queue", "32",
                                   "--api-key", kKey, "--max-body-bytes", "64KiB", "--step-tokens", "256"},
                                  &start_error);
  }
  static void TearDownTestSuite() { stop_server(server); }
  void SetUp() override {
    NINFER_REQUIRE_MODEL("ref-qwen3-d256");
    ASSERT_TRUE(server) << start_error;
  }
  void TearDown() override { print_log_if_failed(server.get()); }
  static Client client() { return Client(server->port(), kKey); }
  // The scheduler publishes its gauges after the step that finished a request, a moment
  // after the response went out: poll for the idle state.
  static bool idle_within(std::chrono::milliseconds t) {
    return wait_until(
        [] {
          Client c = client();
          return c.metric("ninfer_kv_pages_used") == 0 && c.metric("ninfer_requests_running") == 0 &&
                 c.metric("ninfer_requests_waiting") == 0;
        },
        t);
  }
};

TEST_F(Serve, ChatMatchesTheCli) {
  const std::string text = needle_text("Alice", 4821);
  Reply r = client().post("/v1/chat/completions", chat_body(text, 40));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j["object"], "chat.completion");
  EXPECT_EQ(r.j["model"], "ref-qwen3-d256");
  EXPECT_EQ(r.j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const json& ch = r.j["choices"][0];
  EXPECT_EQ(ch["message"]["role"], "assistant");
  EXPECT_EQ(ch["finish_reason"], "stop");
  const std::string content = ch["message"]["content"];
  EXPECT_EQ(content.rfind("The secret number for ", 0), 0u) << content;
  const json& u = r.j["usage"];
  EXPECT_GT(u["prompt_tokens"].get<int>(), 10);
  EXPECT_GT(u["completion_tokens"].get<int>(), 3);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());

  // The CLI runs the same request through Engine::generate, alone.
  std::string cli;
  const std::string cmd = shell_quote(ninfer_binary().string()) + " run -m " +
                          shell_quote(model_dir("ref-qwen3-d256").string()) +
                          " --device cpu --threads 1 --max-context 512 --temp 0 -n 40 --chat -p " + shell_quote(text) +
                          " 2>/dev/null";
  ASSERT_EQ(run_command(cmd, &cli), 0) << cmd;
  EXPECT_EQ(content, cli);
}

TEST_F(Serve, ChatStreamingMatchesNonStreaming) {
  const std::string text = needle_text("Bob", 1234);
  Reply plain = client().post("/v1/chat/completions", chat_body(text, 40));
  ASSERT_EQ(plain.status, 200) << plain.body;
  json body = chat_body(text, 40, true);
  body["stream_options"] = {{"include_usage", true}};
  StreamReply s = client().post_stream("/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200) << s.raw;
  ASSERT_GE(s.events.size(), 4u) << s.raw;
  EXPECT_EQ(s.events.back(), "[DONE]");
  json first = json::parse(s.events.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  json usage = json::parse(s.events[s.events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], plain.j["usage"]);
  json fin = json::parse(s.events[s.events.size() - 3]);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "stop");
  for (size_t i = 0; i + 1 < s.events.size(); ++i) {
    json e = json::parse(s.events[i]);
    EXPECT_EQ(e["id"], first["id"]);
    if (i + 2 < s.events.size()) {
      EXPECT_TRUE(e["usage"].is_null()) << "usage is null on every chunk but the last";
    }
  }
  EXPECT_EQ(stream_text(s), plain.j["choices"][0]["message"]["content"].get<std::string>());
}

TEST_F(Serve, CompletionsBothWays) {
  json body = {{"prompt", "The secret number"}, {"max_tokens", 12}, {"temperature", 0}};
  Reply plain = client().post("/v1/completions", body);
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(plain.j["object"], "text_completion");
  EXPECT_EQ(plain.j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(plain.j["usage"]["completion_tokens"], 12);
  body["stream"] = true;
  StreamReply s = client().post_stream("/v1/completions", body);
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(s.events.back(), "[DONE]");
  EXPECT_EQ(stream_text(s), plain.j["choices"][0]["text"].get<std::string>());
  for (size_t i = 0; i + 1 < s.events.size(); ++i)
    EXPECT_FALSE(json::parse(s.events[i]).contains("usage")) << "no usage without stream_options.include_usage";
  // Token-id prompts work too and give the same answer as the text they spell.
  Reply ids = client().post("/v1/completions", json{{"prompt", {7545, 6139, 4577}}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(ids.status, 200) << ids.body;
}

TEST_F(Serve, SixteenConcurrentStreamsEachGetTheirOwnAnswer) {
  constexpr int kN = 16;
  std::vector<std::string> texts, alone(kN), together(kN);
  for (int i = 0; i < kN; ++i) texts.push_back(needle_text("Person" + std::to_string(i), 100 + 611 * i));
  // Single-request outputs, one at a time.
  for (int i = 0; i < kN; ++i) {
    Reply r = client().post("/v1/chat/completions", chat_body(texts[size_t(i)], 24));
    ASSERT_EQ(r.status, 200) << r.body;
    alone[size_t(i)] = r.j["choices"][0]["message"]["content"];
  }
  const double steps0 = client().metric("ninfer_steps_total");
  const double tokens0 = client().metric("ninfer_generation_tokens_total");
  std::vector<std::thread> th;
  std::vector<int> status(kN);
  for (int i = 0; i < kN; ++i)
    th.emplace_back([&, i] {
      StreamReply s = client().post_stream("/v1/chat/completions", chat_body(texts[size_t(i)], 24, true));
      status[size_t(i)] = s.status;
      together[size_t(i)] = stream_text(s);
    });
  for (auto& t : th) t.join();
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(status[size_t(i)], 200);
    EXPECT_EQ(together[size_t(i)], alone[size_t(i)]) << "stream " << i;
  }
  const double steps = client().metric("ninfer_steps_total") - steps0;
  const double tokens = client().metric("ninfer_generation_tokens_total") - tokens0;
  EXPECT_LT(steps, tokens / 2) << "the streams were not decoded in shared steps";
  EXPECT_TRUE(idle_within(5s));
}

// A raw HTTP/1.1 GET /health over a fresh connection, with `pause_before` between connect()
// and the first byte and `pause_mid` between the request line and the headers; returns the
// reply's first line ("" when the server closed the connection without one).
std::string slow_health_request(int port, std::chrono::milliseconds pause_before, std::chrono::milliseconds pause_mid) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "socket() failed";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string line;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    std::this_thread::sleep_for(pause_before);
    const std::string head = "GET /health HTTP/1.1\r\n", rest = "Host: 127.0.0.1\r\nConnection: close\r\n\r\n";
    bool sent = ::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == ssize_t(head.size());
    std::this_thread::sleep_for(pause_mid);
    sent = sent && ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL) == ssize_t(rest.size());
    char buf[256];
    const ssize_t n = sent ? ::recv(fd, buf, sizeof(buf), 0) : -1;
    if (n > 0) line.assign(buf, size_t(n));
    line = line.substr(0, line.find("\r\n"));
  } else {
    line = "connect() failed";
  }
  ::close(fd);
  return line;
}

// A client that stalls (descheduled on a busy machine, or its first segment retransmitted)
// must still be answered: cpp-httplib 0.11's default 5 s keep-alive timeout, which also bounds
// the wait for the first request of a connection, closed such connections without a reply,
// and its 5 s read timeout answered a request stalled midway with a bare 400 (server.cpp).
TEST_F(Serve, ClientsThatPauseSixSecondsAreStillAnswered) {
  EXPECT_EQ(slow_health_request(server->port(), 6s, 0s), "HTTP/1.1 200 OK") << "pause before the request";
  EXPECT_EQ(slow_health_request(server->port(), 0s, 6s), "HTTP/1.1 200 OK") << "pause inside the request";
}

TEST_F(Serve, DisconnectMidStreamFreesPages) {
  const double cancelled0 = client().metric("ninfer_requests_finished_total{reason=\"cancelled\"}");
  json body = chat_body(needle_text("Carol", 55), 2000, true);
  body["ignore_eos"] = true;
  double pages_during = 0;
  int seen = 0;
  StreamReply s = client().post_stream("/v1/chat/completions", body, [&](const std::string&) {
    if (++seen == 6) {
      pages_during = client().metric("ninfer_kv_pages_used");
      return false;  // hang up
    }
    return true;
  });
  EXPECT_TRUE(s.aborted);
  EXPECT_GT(pages_during, 0);
  EXPECT_TRUE(wait_until(
      [&] {
        return client().metric("ninfer_kv_pages_used") == 0 &&
               client().metric("ninfer_requests_finished_total{reason=\"cancelled\"}") == cancelled0 + 1;
      },
      10s))
      << "pages used " << client().metric("ninfer_kv_pages_used");
  EXPECT_EQ(client().metric("ninfer_requests_running"), 0);
}

TEST_F(Serve, BadRequestsGetClearErrorsAndTheServerKeepsServing) {
  struct Case {
    const char* name;
    std::string path, body;
    int status;
    const char* param;  // "" : null
    const char* code;
  };
  std::string long_text;
  for (int i = 0; i < 400; ++i) long_text += "many words here ";
  const std::vector<Case> cases = {
      {"malformed JSON", "/v1/chat/completions", "{\"messages\": [", 400, "", "invalid_json"},
      {"not an object", "/v1/chat/completions", "[1,2]", 400, "", "invalid_value"},
      {"missing messages", "/v1/chat/completions", R"({"model":"x"})", 400, "messages", "missing_required_parameter"},
      {"messages wrong type", "/v1/chat/completions", R"({"messages":"hi"})", 400, "messages", "invalid_type"},
      {"content wrong type", "/v1/chat/completions", R"({"messages":[{"role":"user","content":7}]})", 400,
       "messages[0].content", "invalid_type"},
      {"temperature wrong type", "/v1/chat/completions",
       R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", 400, "temperature", "invalid_type"},
      {"max_tokens negative", "/v1/chat/completions",
       R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-3})", 400, "max_tokens", "invalid_value"},
      {"n too large", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"n":300})", 400, "n",
       "invalid_value"},
      {"top_logprobs too large", "/v1/chat/completions",
       R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":30})", 400, "top_logprobs",
       "invalid_value"},
      {"tools", "/v1/chat/completions",
       R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]})", 400,
       "tools", "unsupported_parameter"},
      {"prompt longer than the context", "/v1/chat/completions", chat_body(long_text, 5).dump(), 400, "messages",
       "context_length_exceeded"},
      {"completion token out of vocabulary", "/v1/completions", R"({"prompt":[1,99999]})", 400, "prompt[1]",
       "invalid_value"},
      {"body over the limit", "/v1/chat/completions", std::string(100 * 1024, ' '), 413, "", "request_too_large"},
  };
  for (const Case& c : cases) {
    Reply r = client().post(c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.name << ": " << r.body;
    ASSERT_TRUE(r.j.is_object() && r.j.contains("error")) << c.name << ": " << r.body;
    const json& e = r.j["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << c.name;
    EXPECT_TRUE(e["type"].is_string()) << c.name;
    if (*c.param) EXPECT_EQ(e["param"], c.param) << c.name << ": " << r.body;
    else EXPECT_TRUE(e["param"].is_null()) << c.name << ": " << r.body;
    EXPECT_EQ(e["code"], c.code) << c.name << ": " << r.body;
  }
  // Unknown fields are ignored, as clients send them.
  json extra = chat_body("Hi", 3);
  extra["some_vendor_field"] = {{"nested", true}};
  extra["user"] = "u-1";
  EXPECT_EQ(client().post("/v1/chat/completions", extra).status, 200);
  // Authentication.
  Reply nokey = Client(server->port()).post("/v1/chat/completions", chat_body("Hi", 3));
  EXPECT_EQ(nokey.status, 401);
  EXPECT_EQ(nokey.j["error"]["code"], "invalid_api_key");
  Reply badkey = Client(server->port(), "wrong").get("/v1/models");
  EXPECT_EQ(badkey.status, 401);
  EXPECT_EQ(Client(server->port()).get("/health").status, 200) << "health needs no key";
  // Routes.
  Reply nf = client().get("/v1/nothing-here");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(nf.j["error"]["code"], "not_found");
  EXPECT_EQ(client().get("/v1/chat/completions").status, 405);
  Reply models = client().get("/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.j["data"][0]["id"], "ref-qwen3-d256");
  EXPECT_EQ(client().get("/v1/models/ref-qwen3-d256").status, 200);
  EXPECT_EQ(client().get("/v1/models/gpt-4").j["error"]["code"], "model_not_found");
  // Still serving.
  EXPECT_EQ(client().get("/health").j["status"], "ok");
  EXPECT_EQ(client().post("/v1/chat/completions", chat_body(needle_text("Dave", 9), 20)).status, 200);
  EXPECT_TRUE(idle_within(5s));
}

TEST_F(Serve, MetricsArePrometheusText) {
  Reply m = client().get("/metrics");
  ASSERT_EQ(m.status, 200);
  for (const char* name : {"ninfer_requests_running", "ninfer_requests_waiting", "ninfer_kv_pages_used",
                           "ninfer_kv_pages_free", "ninfer_kv_pages_total", "ninfer_prompt_tokens_total",
                           "ninfer_generation_tokens_total", "ninfer_prefill_tokens_per_second",
                           "ninfer_decode_tokens_per_second", "ninfer_requests_rejected_total"}) {
    EXPECT_NE(m.body.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
    EXPECT_FALSE(std::isnan(client().metric(name))) << name;
  }
  EXPECT_EQ(client().metric("ninfer_kv_pages_used") + client().metric("ninfer_kv_pages_free"),
            client().metric("ninfer_kv_pages_total"));
}

// The request-timing histograms, under our names and vLLM's, count what one request did: one
// end-to-end time, one queue time, one first token, a gap per later token; the KV usage ratio
// is pages used over the pool.
TEST_F(Serve, TimingHistogramsCountEachRequestUnderBothNames) {
  auto count = [&](const std::string& name) { return client().metric(name + "_count"); };
  const double e2e0 = count("ninfer_e2e_request_latency_seconds"), q0 = count("ninfer_request_queue_time_seconds"),
               t0 = count("ninfer_time_to_first_token_seconds"), i0 = count("ninfer_inter_token_latency_seconds"),
               p0 = count("ninfer_request_prefill_time_seconds");
  const double p_sum0 = client().metric("ninfer_request_prefill_time_seconds_sum"),
               t_sum0 = client().metric("ninfer_time_to_first_token_seconds_sum");
  json body = chat_body("Count the gaps", 9, true);
  body["ignore_eos"] = true;
  StreamReply s = client().post_stream("/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200);
  ASSERT_TRUE(idle_within(5s));
  // NOTE: the end-to-end and queue histograms are observed by the HTTP handler after the stream's
  // last write, which may come after the scheduler is idle (seen under load): wait for them.
  for (auto until = std::chrono::steady_clock::now() + 5s;
       count("ninfer_e2e_request_latency_seconds") < e2e0 + 1 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(count("ninfer_e2e_request_latency_seconds"), e2e0 + 1);
  EXPECT_EQ(count("ninfer_request_queue_time_seconds"), q0 + 1);
  EXPECT_EQ(count("ninfer_time_to_first_token_seconds"), t0 + 1);
  EXPECT_EQ(count("ninfer_inter_token_latency_seconds"), i0 + 8) << "9 tokens, 8 gaps";
  EXPECT_EQ(count("ninfer_request_prefill_time_seconds"), p0 + 1);
  // The prefill is part of the time to first token (which adds the queue and the HTTP parse).
  const double prefill = client().metric("ninfer_request_prefill_time_seconds_sum") - p_sum0;
  EXPECT_GT(prefill, 0.0);
  EXPECT_LE(prefill, client().metric("ninfer_time_to_first_token_seconds_sum") - t_sum0);
  Reply m = client().get("/metrics");
  for (const char* pair : {"e2e_request_latency_seconds", "request_queue_time_seconds", "time_to_first_token_seconds",
                           "request_prefill_time_seconds", "inter_token_latency_seconds"}) {
    SCOPED_TRACE(pair);
    const std::string ours = std::string("ninfer_") + pair, vllm = std::string("vllm:") + pair;
    EXPECT_NE(m.body.find("# TYPE " + ours + " histogram"), std::string::npos);
    EXPECT_EQ(client().metric(vllm + "_count"), client().metric(ours + "_count"));
    EXPECT_EQ(client().metric(vllm + "_bucket{le=\"+Inf\"}"), client().metric(ours + "_count"));
    EXPECT_GT(client().metric(ours + "_sum"), 0.0);
  }
  // First token before the end, and the gaps sum to less than the whole request.
  EXPECT_LT(client().metric("ninfer_time_to_first_token_seconds_sum"),
            client().metric("ninfer_e2e_request_latency_seconds_sum"));
  EXPECT_DOUBLE_EQ(client().metric("vllm:kv_cache_usage_perc"),
                   client().metric("ninfer_kv_pages_used") / client().metric("ninfer_kv_pages_total"));
}

TEST_F(Serve, OfficialOpenAiNodeSdk) {
  const std::filesystem::path dir = NINFER_SERVER_TEST_DIR;
  if (!std::filesystem::exists(dir / "node_modules" / "openai" / "package.json"))
    GTEST_SKIP() << "the openai npm package is not installed: run `npm install` in " << dir
                 << " (scripts/test.sh does)";
  if (run_command("node --version", nullptr) != 0) GTEST_SKIP() << "node is not installed";
  std::string out;
  const std::string cmd = "node " + shell_quote((dir / "openai_sdk_client.mjs").string()) + " http://127.0.0.1:" +
                          std::to_string(server->port()) + "/v1 " + kKey + " 2>&1";
  ASSERT_EQ(run_command(cmd, &out), 0) << out;
  json j = json::parse(out.substr(out.rfind("\n{") == std::string::npos ? 0 : out.rfind("\n{") + 1), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  // The SDK sees exactly what our own client sees.
  Reply ref = client().post("/v1/chat/completions", chat_body(needle_text("Alice", 4821), 40));
  const std::string want = ref.j["choices"][0]["message"]["content"];
  EXPECT_EQ(j["chat"], want);
  EXPECT_EQ(j["chat_stream"], want);
  EXPECT_EQ(j["chat_finish"], "stop");
  EXPECT_EQ(j["chat_stream_finish"], "stop");
  EXPECT_EQ(j["chat_usage"], ref.j["usage"]);
  EXPECT_EQ(j["chat_stream_usage"], ref.j["usage"]);
  EXPECT_EQ(j["completion"], j["completion_stream"]);
  EXPECT_EQ(j["completion_finish"], "length");
  EXPECT_EQ(j["models"], json::array({"ref-qwen3-d256"}));
  EXPECT_EQ(j["n2_choices"], 2);
  EXPECT_EQ(j["n2_indices"], json::array({0, 1}));
  EXPECT_EQ(j["chat_logprobs_tokens"], j["chat_usage"]["completion_tokens"]);
  EXPECT_EQ(j["chat_logprobs_joined"], want);
  EXPECT_EQ(j["chat_top_logprobs"], 2);
  EXPECT_EQ(j["completion_list_choices"], 2);
  EXPECT_EQ(j["completion_list_first"], j["completion"]);
  EXPECT_EQ(j["n99_error"]["status"], 400);
  EXPECT_EQ(j["n99_error"]["param"], "n");
  EXPECT_EQ(j["context_error"]["status"], 400);
  EXPECT_EQ(j["context_error"]["code"], "context_length_exceeded");
  EXPECT_EQ(j["bad_key_status"], 401);
}

TEST_F(Serve, BoundedLoadRunHasNoErrorsAndLeaksNoPages) {
  std::string out;
  const std::string cmd = shell_quote(NINFER_LOADGEN_BIN) + " --port " + std::to_string(server->port()) +
                          " --api-key " + kKey + " --requests 200 --concurrency 16 --max-tokens 8 2>&1";
  ASSERT_EQ(run_command(cmd, &out), 0) << out;
  json j = json::parse(out.substr(out.rfind("\n{") == std::string::npos ? 0 : out.rfind("\n{") + 1), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["ok"], 200) << out;
  EXPECT_EQ(j["errors"], 0) << out;
  EXPECT_GT(j["completion_tokens"].get<int>(), 200);
  EXPECT_TRUE(idle_within(5s));
  std::cout << out;
}

// A server of its own: one slot, one queue place.
TEST(ServeLimits, FullQueueGets429AndTheServerRecovers) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  std::string err;
  auto sp = ServerProcess::start({"--max-context", "256", "--max-concurrency", "1", "--max-queue", "1"}, &err);
  ASSERT_TRUE(sp) << err;
  Client c(sp->port());
  json body = chat_body(needle_text("Erin", 3), 200, true);
  body["ignore_eos"] = true;
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  auto hold = [&](const std::string&) {
    ++started;
    while (!release) std::this_thread::sleep_for(10ms);
    return false;  // then hang up
  };
  std::thread a([&] { c.post_stream("/v1/chat/completions", body, hold); });
  ASSERT_TRUE(wait_until([&] { return c.metric("ninfer_requests_running") == 1; }, 20s));
  std::thread b([&] { c.post_stream("/v1/chat/completions", body, hold); });
  ASSERT_TRUE(wait_until([&] { return c.metric("ninfer_requests_waiting") == 1; }, 20s));
  Reply r = c.post("/v1/chat/completions", chat_body("Hi", 3));
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.j["error"]["code"], "queue_full") << r.body;
  EXPECT_EQ(c.metric("ninfer_requests_rejected_total"), 1);
  release = true;
  a.join();
  b.join();
  EXPECT_TRUE(wait_until([&] { return c.metric("ninfer_kv_pages_used") == 0 && c.metric("ninfer_requests_running") == 0 &&
                                      c.metric("ninfer_requests_waiting") == 0; },
                         20s));
  EXPECT_EQ(c.post("/v1/chat/completions", chat_body("Hi", 3)).status, 200);
  EXPECT_EQ(sp->stop(), 0) << sp->log();
}

}  // namespace
}  // namespace ninfer::test
