// server_loadgen: a bounded load run against `ninfer serve`. C client threads send N
// requests in all (a fixed, seeded mix: chat and completions, streaming and not, greedy and
// sampled, short and longer prompts), then the tool reads /metrics and prints one JSON
// object: counts by outcome, throughput, latency percentiles, and the server's KV pages in
// use after the run (0 when nothing leaked). Exit status 1 when any request failed or pages
// stayed in use.
//
//   server_loadgen --port P [--host 127.0.0.1] [--api-key K] [--requests 300]
//                  [--concurrency 16] [--max-tokens 32] [--seed 1] [--ignore-eos]
//                  [--stream-only] [--idle N] [--health-ms MS] [--max-filler N]
// --idle N holds N connections open through the run (half never send a byte, half made one
// keep-alive /health request first); --health-ms MS probes /health on a fresh connection every
// MS during the run and reports its latency percentiles; --stream-only streams every request.
// --max-filler N (default 7): prompts of 0..N filler sentences (~19 tokens each: N = 400 gives
// prompts up to ~8K tokens); past 7 each prompt starts with its own request number, so no two
// share a first KV page (long prompts measured without the prefix cache's help).
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string api_key;
  int requests = 300;
  int concurrency = 16;
  int max_tokens = 32;
  uint64_t seed = 1;
  bool ignore_eos = false;  // every request generates max_tokens (a decode-heavy run)
  bool stream_only = false;
  int idle = 0;
  int health_ms = 0;
  int max_filler = 7;
};

struct Result {
  int status = 0;
  std::string error;
  double seconds = 0, first_text = -1;
  int prompt_tokens = 0, completion_tokens = 0;
};

const char* kNames[] = {"Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy"};
const char* kFiller = "The harvest that autumn was plentiful, and the river ran high past the old mill. ";

// Request i of the run: deterministic from (seed, i).
json make_request(const Options& o, int i, bool* chat, bool* stream) {
  std::mt19937_64 rng(o.seed * 1000003u + uint64_t(i));
  *chat = rng() % 4 != 0;      // 3/4 chat, 1/4 completions
  *stream = rng() % 2 == 0 || o.stream_only;  // half streamed
  const bool sampled = rng() % 3 == 0;
  const int filler = int(rng() % uint64_t(o.max_filler + 1));  // default 0..7 sentences: ~30..150 tokens
  std::string text;
  if (o.max_filler > 7) text = "Request " + std::to_string(i) + " of the run. ";
  for (int k = 0; k < filler; ++k) text += kFiller;
  const char* name = kNames[rng() % 10];
  text += "The secret number for " + std::string(name) + " is " + std::to_string(rng() % 100000) +
          ". What is the secret number for " + name + "?";
  json b = {{"model", "default"}, {"max_tokens", o.max_tokens}, {"temperature", sampled ? 0.8 : 0.0}};
  if (sampled) b["seed"] = i;
  if (o.ignore_eos) b["ignore_eos"] = true;
  if (*chat) b["messages"] = {{{"role", "user"}, {"content", text}}};
  else b["prompt"] = text;
  if (*stream) {
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
  }
  return b;
}

Result run_one(const Options& o, int i) {
  bool chat = false, stream = false;
  const json body = make_request(o, i, &chat, &stream);
  const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
  httplib::Client cli(o.host, o.port);
  cli.set_read_timeout(600, 0);
  httplib::Headers h;
  if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
  Result r;
  const auto t0 = Clock::now();
  if (!stream) {
    auto res = cli.Post(path.c_str(), h, body.dump(), "application/json");
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!res) {
      r.error = "connection failed: " + httplib::to_string(res.error());
      return r;
    }
    r.status = res->status;
    json j = json::parse(res->body, nullptr, false);
    if (r.status != 200 || j.is_discarded() || !j.contains("usage")) {
      r.error = res->body.substr(0, 300);
      if (r.status == 200) r.status = -1;
      return r;
    }
    r.prompt_tokens = j["usage"]["prompt_tokens"];
    r.completion_tokens = j["usage"]["completion_tokens"];
    return r;
  }
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = h;
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  std::string buf;
  bool done = false;
  req.response_handler = [&](const httplib::Response& resp) {
    r.status = resp.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    size_t pos;
    while ((pos = buf.find("\n\n")) != std::string::npos) {
      std::string ev = buf.substr(0, pos);
      buf.erase(0, pos + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      ev.erase(0, 6);
      if (ev == "[DONE]") {
        done = true;
        continue;
      }
      json j = json::parse(ev, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) r.error = j["error"].dump();
      if (r.first_text < 0 && j.contains("choices") && !j["choices"].empty()) {
        const json& c = j["choices"][0];
        const bool has_text = (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) ||
                              (c.contains("delta") && c["delta"].contains("content") &&
                               c["delta"]["content"].is_string() && !c["delta"]["content"].get<std::string>().empty());
        if (has_text) r.first_text = std::chrono::duration<double>(Clock::now() - t0).count();
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        r.prompt_tokens = j["usage"]["prompt_tokens"];
        r.completion_tokens = j["usage"]["completion_tokens"];
      }
    }
    return true;
  };
  httplib::Response resp;
  httplib::Error err = httplib::Error::Success;
  const bool ok = cli.send(req, resp, err);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!ok && r.status == 0) r.error = "connection failed: " + httplib::to_string(err);
  else if (r.status != 200 && r.error.empty()) r.error = buf.substr(0, 300);  // a JSON error, not events
  else if (r.status == 200 && (!done || !r.error.empty())) {
    if (r.error.empty()) r.error = "stream ended without [DONE]";
    r.status = -1;
  }
  return r;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[size_t(std::min<double>(double(v.size() - 1), std::floor(p * double(v.size() - 1) + 0.5)))];
}

// A TCP connection to the server, or -1.
int connect_raw(const Options& o) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(o.port));
  if (::inet_pton(AF_INET, o.host.c_str(), &a.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One keep-alive GET /health on fd, its response read up to the end of the (small) body.
bool keep_alive_health(int fd) {
  const std::string req = "GET /health HTTP/1.1\r\nHost: loadgen\r\nConnection: keep-alive\r\n\r\n";
  if (::send(fd, req.data(), req.size(), 0) != ssize_t(req.size())) return false;
  std::string got;
  char buf[1024];
  while (got.find("\r\n\r\n") == std::string::npos || got.find('}') == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    got.append(buf, size_t(n));
  }
  return got.rfind("HTTP/1.1 200", 0) == 0;
}

double metric(const Options& o, const std::string& name) {
  httplib::Client cli(o.host, o.port);
  auto res = cli.Get("/metrics");
  if (!res) return -1;
  size_t p = res->body.find("\n" + name + " ");
  return p == std::string::npos ? -1 : std::atof(res->body.c_str() + p + name.size() + 2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--host") o.host = next();
    else if (a == "--port") o.port = std::atoi(next().c_str());
    else if (a == "--api-key") o.api_key = next();
    else if (a == "--requests") o.requests = std::atoi(next().c_str());
    else if (a == "--concurrency") o.concurrency = std::atoi(next().c_str());
    else if (a == "--max-tokens") o.max_tokens = std::atoi(next().c_str());
    else if (a == "--seed") o.seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--ignore-eos") o.ignore_eos = true;
    else if (a == "--stream-only") o.stream_only = true;
    else if (a == "--idle") o.idle = std::atoi(next().c_str());
    else if (a == "--health-ms") o.health_ms = std::atoi(next().c_str());
    else if (a == "--max-filler") o.max_filler = std::atoi(next().c_str());
    else {
      std::fprintf(stderr, "unknown argument %s\nusage: server_loadgen --port P [--host H] [--api-key K] "
                           "[--requests N] [--concurrency C] [--max-tokens M] [--seed S] [--ignore-eos] [--stream-only] "
                           "[--idle N] [--health-ms MS] [--max-filler N]\n", a.c_str());
      return 2;
    }
  }
  if (o.port <= 0 || o.requests < 1 || o.concurrency < 1 || o.max_tokens < 0 || o.idle < 0 || o.health_ms < 0 ||
      o.max_filler < 0 || o.max_filler > 100000) {
    std::fprintf(stderr, "server_loadgen: --port, --requests >= 1, --concurrency >= 1, --max-tokens >= 0, --idle >= 0, "
                         "--health-ms >= 0 and --max-filler in 0..100000 are needed\n");
    return 2;
  }
  if (rlimit rl; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;  // --idle needs a descriptor per connection
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  std::vector<int> idle_fds;
  for (int i = 0; i < o.idle; ++i) {
    const int fd = connect_raw(o);
    if (fd < 0 || (i % 2 == 1 && !keep_alive_health(fd))) {
      std::fprintf(stderr, "server_loadgen: idle connection %d of %d failed\n", i, o.idle);
      return 1;
    }
    idle_fds.push_back(fd);
  }
  std::vector<Result> results(size_t(o.requests));
  std::atomic<int> next{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> th;
  for (int c = 0; c < o.concurrency; ++c)
    th.emplace_back([&] {
      for (int i; (i = next++) < o.requests;) results[size_t(i)] = run_one(o, i);
    });
  std::atomic<bool> running{true};
  std::vector<double> health_ms;
  int health_failed = 0;
  std::thread prober;
  if (o.health_ms > 0)
    prober = std::thread([&] {
      while (running) {
        httplib::Client cli(o.host, o.port);
        cli.set_read_timeout(30, 0);
        const auto h0 = Clock::now();
        auto res = cli.Get("/health");
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - h0).count();
        if (res && res->status == 200) health_ms.push_back(ms);
        else ++health_failed;
        std::this_thread::sleep_for(std::chrono::milliseconds(o.health_ms));
      }
    });
  for (auto& t : th) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  running = false;
  if (prober.joinable()) prober.join();
  // The idle connections are still served: a keep-alive request on each of a few.
  int idle_alive = 0, idle_checked = 0;
  for (size_t i = 1; i < idle_fds.size(); i += std::max<size_t>(1, idle_fds.size() / 16), ++idle_checked)
    idle_alive += keep_alive_health(idle_fds[i]) ? 1 : 0;
  for (int fd : idle_fds) ::close(fd);

  int ok = 0;
  long prompt = 0, completion = 0;
  std::map<std::string, int> errors;
  std::vector<double> lat, ttft;
  std::string first_error;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    if (r.status == 200 && r.error.empty()) {
      ++ok;
      prompt += r.prompt_tokens;
      completion += r.completion_tokens;
      lat.push_back(r.seconds);
      if (r.first_text >= 0) ttft.push_back(r.first_text);
    } else {
      ++errors[std::to_string(r.status)];
      if (first_error.empty()) first_error = r.error;
      // When each failure happened tells timeouts (a fixed delay) from other causes.
      std::fprintf(stderr, "server_loadgen: request %zu failed after %.3f s: status %d: %s\n", i, r.seconds, r.status,
                   r.error.c_str());
    }
  }
  // The scheduler frees pages at the end of the step that finishes a request, which can be
  // a moment after the last response; give it a second.
  double pages_used = metric(o, "ninfer_kv_pages_used");
  for (int k = 0; k < 20 && pages_used != 0; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pages_used = metric(o, "ninfer_kv_pages_used");
  }
  json out = {{"requests", o.requests},
              {"ignore_eos", o.ignore_eos},
              {"concurrency", o.concurrency},
              {"max_tokens", o.max_tokens},
              {"ok", ok},
              {"errors", o.requests - ok},
              {"errors_by_status", errors},
              {"first_error", first_error},
              {"wall_s", wall},
              {"requests_per_s", double(ok) / wall},
              {"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"completion_tokens_per_s", double(completion) / wall},
              {"total_tokens_per_s", double(prompt + completion) / wall},
              {"latency_p50_s", percentile(lat, 0.5)},
              {"latency_p95_s", percentile(lat, 0.95)},
              {"latency_p99_s", percentile(lat, 0.99)},
              {"ttft_p50_s", percentile(ttft, 0.5)},
              {"ttft_p95_s", percentile(ttft, 0.95)},
              {"ttft_p99_s", percentile(ttft, 0.99)},
              {"idle_connections", o.idle},
              {"idle_checked", idle_checked},
              {"idle_alive", idle_alive},
              {"health_probes", health_ms.size()},
              {"health_failed", health_failed},
              {"health_p50_ms", percentile(health_ms, 0.5)},
              {"health_p99_ms", percentile(health_ms, 0.99)},
              {"health_max_ms", health_ms.empty() ? 0.0 : *std::max_element(health_ms.begin(), health_ms.end())},
              {"kv_pages_used_after", pages_used},
              {"preemptions", metric(o, "ninfer_preemptions_total")}};
  std::printf("%s\n", out.dump().c_str());
  return (ok == o.requests && pages_used == 0 && health_failed == 0) ? 0 : 1;
}
