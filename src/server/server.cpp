#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "server/metrics.h"
#include "server/tool_calls.h"
#include "server/openai_api.h"
#include "server/structured_output.h"
#include "text/chat_template.h"

namespace ninfer::server {
namespace {

using Clock = std::chrono::steady_clock;

// NOTE: a stream with nothing to say (queued, or a long prefill) writes an SSE comment this
// often: it is how a client that went away is noticed (the write fails) before any text.
constexpr auto kKeepAlive = std::chrono::milliseconds(1000);
// NOTE: how long a stream handler waits for output before looking at the keep-alive clock.
constexpr auto kPoll = std::chrono::milliseconds(100);
// NOTE: cpp-httplib 0.11 (Debian's libcpp-httplib) gives a server 5 s read, write and
// keep-alive timeouts, and the keep-alive one also bounds the wait for the *first* request on a
// new connection: a worker that picks up an accepted socket closes it, with no response, when
// no byte arrives within 5 s (and a request whose bytes stall 5 s midway gets a bare 400). A
// healthy but CPU-starved machine crosses that line: a client descheduled between connect()
// and send(), or whose first segment was dropped by a full listen queue and waits for its
// retransmit, then sees "connection failed: Read" with no HTTP status, and the server logs
// nothing: the likely source of the 4-in-200 "Read" failures of the load test on a busy CI
// machine. Requests here are legitimately slow anyway, so read/write limits are 600 s (as
// llama.cpp's server --timeout default); an idle keep-alive connection still gives its handler
// thread back after kKeepAliveIdleS. (A streaming client that stops reading without closing is
// now noticed after kWriteTimeoutS instead of 5 s, once the socket buffer is full.)
constexpr time_t kReadTimeoutS = 600;
constexpr time_t kWriteTimeoutS = 600;
constexpr time_t kKeepAliveIdleS = 60;
// NOTE: cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into the
// library); 16 clients connecting at once overflow it while the accept thread waits for a CPU,
// and the kernel drops their SYNs (a 1 s retransmit each) or their first data. listen() again
// on the bound socket raises it.
constexpr int kListenBacklog = 1024;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e).dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// A TaskQueue that never makes a connection wait for a thread (cpp-httplib runs one
// connection per task, for as long as the client keeps it alive): an idle worker takes a
// new connection, and when none is idle a new worker starts, up to max_threads (beyond that
// connections queue). Workers idle for kWorkerIdle exit, down to min_threads. So idle
// keep-alive connections cost a sleeping thread each, never a stalled /health.
class ElasticPool : public httplib::TaskQueue {
 public:
  ElasticPool(size_t min_threads, size_t max_threads) : min_(min_threads), max_(std::max(min_threads, max_threads)) {
    std::lock_guard lk(mu_);
    for (size_t i = 0; i < min_; ++i) spawn();
  }
  ~ElasticPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lk(mu_);
    jobs_.push_back(std::move(fn));
    if (jobs_.size() > idle_ && threads_ < max_) spawn();
    cv_.notify_one();
  }

  void shutdown() override {
    std::unique_lock lk(mu_);
    shut_ = true;
    cv_.notify_all();
    exited_.wait(lk, [&] { return threads_ == 0; });
  }

 private:
  // NOTE: long enough that a burst's threads are reused by the next burst, short enough
  // that a spike of idle connections gives its memory back within a minute after they close.
  static constexpr auto kWorkerIdle = std::chrono::seconds(30);

  void spawn() {  // mu_ held
    ++threads_;
    std::thread([this] { work(); }).detach();
  }
  void work() {
    std::unique_lock lk(mu_);
    while (true) {
      if (!jobs_.empty()) {
        std::function<void()> fn = std::move(jobs_.front());
        jobs_.pop_front();
        lk.unlock();
        fn();
        lk.lock();
        continue;
      }
      if (shut_) break;
      ++idle_;
      const bool woke = cv_.wait_for(lk, kWorkerIdle, [&] { return !jobs_.empty() || shut_; });
      --idle_;
      if (!woke && threads_ > min_) break;
    }
    --threads_;
    // NOTE: notified after this thread is gone, so shutdown() cannot free the pool while a
    // worker still unlocks its mutex.
    std::notify_all_at_thread_exit(exited_, std::move(lk));
  }

  const size_t min_, max_;
  std::mutex mu_;
  std::condition_variable cv_, exited_;
  std::deque<std::function<void()>> jobs_;
  size_t idle_ = 0, threads_ = 0;
  bool shut_ = false;
};

// The socket of the connection a request came on. cpp-httplib 0.11 does not hand it to
// handlers; the (local, remote) address pair identifies it among the process's sockets.
// INVALID_SOCKET when not found.
socket_t connection_socket(const httplib::Request& req) {
  auto addr_port = [](const sockaddr_storage& ss, std::string* addr) -> int {
    char buf[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
      inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
      *addr = buf;
      return ntohs(a->sin_port);
    }
    if (ss.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
      inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
      *addr = buf;
      return ntohs(a->sin6_port);
    }
    return -1;
  };
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int fd = std::stoi(name);
    sockaddr_storage peer{}, self{};
    socklen_t pl = sizeof(peer), sl = sizeof(self);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    std::string pa, sa;
    if (addr_port(peer, &pa) != req.remote_port || pa != req.remote_addr) continue;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &sl) != 0) continue;
    if (addr_port(self, &sa) != req.local_port || sa != req.local_addr) continue;
    return fd;
  }
  return INVALID_SOCKET;
}

// The client closed the connection (or it failed). Pipelined bytes waiting are not a close.
bool peer_closed(socket_t fd) {
  pollfd p{fd, short(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
  char c;
  return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

// One choice being generated: its scheduler request and what has come back.
struct ChoiceRun {
  RequestHandle handle;
  size_t prompt = 0;                    // index into Job::prompts
  std::string text;                     // non-streaming: all of it
  std::vector<TokenLogprob> logprobs;   // non-streaming: all; streaming: not sent yet
  std::vector<TokenLogprob> prompt_logprobs;
  bool finished = false, echoed = false;
  std::string finish_reason, error;
  int completion_tokens = 0;
  int cached_tokens = 0;                // prompt tokens the prefix cache served at admission
  double submitted = -1;                // seconds from the request to this choice's submission
  double queue = -1, first_token = -1;  // the scheduler's times, from submission
  std::vector<double> token_gaps;       // all of them
  size_t offset = 0;                    // streaming completions: bytes of text sent (text_offset)
  std::string held;                     // streaming chat with tools: text kept until the end
  bool call_opened = false;             // streaming, a named tool_choice: the call's first delta sent
  double lp_sum = 0;                    // best_of: the sum of the tokens' log-probabilities
  size_t lp_count = 0;

  void absorb(RequestOutput&& o) {
    text += o.text;
    for (const TokenLogprob& t : o.logprobs) {
      lp_sum += t.logprob;
      ++lp_count;
    }
    logprobs.insert(logprobs.end(), std::make_move_iterator(o.logprobs.begin()), std::make_move_iterator(o.logprobs.end()));
    if (!o.prompt_logprobs.empty()) prompt_logprobs = std::move(o.prompt_logprobs);
    completion_tokens = o.completion_tokens;
    cached_tokens = std::max(cached_tokens, o.cached_tokens);
    if (o.queue_seconds >= 0) queue = o.queue_seconds;
    if (o.first_token_seconds >= 0) first_token = o.first_token_seconds;
    token_gaps.insert(token_gaps.end(), o.token_gaps.begin(), o.token_gaps.end());
    if (o.finished) {
      finished = true;
      finish_reason = o.finish_reason;
      error = o.error;
    }
  }
};

// One completion request: its prompts and choices (one scheduler request each).
struct Job {
  ResponseMeta meta;
  bool chat = true;
  bool include_usage = false;
  int logprobs = -1;      // what the client asked for
  bool echo = false;
  int n = 1;              // choices returned per prompt
  int candidates = 1;     // choices generated per prompt (best_of)
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> prompt_texts;  // echo
  std::vector<ChoiceRun> runs;            // prompt-major: runs[p * candidates + i]
  ToolCallFormat tool_format = ToolCallFormat::none;  // chat with tools: how the model writes calls
  ToolChoice tool_choice = ToolChoice::automatic;     // required / named: the reply is the calls' JSON
  bool parallel_tool_calls = true;                    // false: calls after the first are dropped
  std::string tool_name;                              // named: the function
  Clock::time_point t0;
  bool started = false;
  bool ended = false;
  int prompt_tokens() const {
    int n_tok = 0;
    for (const auto& p : prompts) n_tok += int(p.size());
    return n_tok;
  }
  int completion_tokens() const {
    int n_tok = 0;
    for (const auto& r : runs) n_tok += r.completion_tokens;
    return n_tok;
  }
  // Each prompt is counted once, as in prompt_tokens(): by its first choice, the one that
  // met the cache as it stood when the request arrived (the others share its pages).
  // For the histograms: queue time, and first token and prefill time of the first choice to get there.
  RequestTiming timing(double e2e) const {
    RequestTiming t;
    t.e2e = e2e;
    for (const ChoiceRun& r : runs) {
      if (r.queue >= 0 && (t.queue < 0 || r.queue < t.queue)) t.queue = r.queue;
      if (r.first_token >= 0 && (t.first_token < 0 || r.submitted + r.first_token < t.first_token)) {
        t.first_token = r.submitted + r.first_token;
        // That choice's prefill: admission to its first token (a preempted choice's recompute
        // included, as vLLM's request_prefill_time counts from its first scheduling).
        t.prefill = r.queue >= 0 ? std::max(0.0, r.first_token - r.queue) : -1;
      }
      t.token_gaps.insert(t.token_gaps.end(), r.token_gaps.begin(), r.token_gaps.end());
    }
    return t;
  }
  int cached_tokens() const {
    int n_tok = 0;
    for (size_t p = 0; p < prompts.size(); ++p) n_tok += runs[p * size_t(candidates)].cached_tokens;
    return n_tok;
  }
};

// A request body that must be a JSON object (/tokenize, /detokenize).
json parse_object_body(const std::string& text) {
  json body = parse_body(text);
  if (!body.is_object())
    throw ApiError{400, "the request body must be a JSON object", "invalid_request_error", "", "invalid_value"};
  return body;
}

// OpenAI's shape of the calls read out of a reply, each with a fresh id.
json tool_calls_json(const std::vector<ParsedToolCall>& calls) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  json out = json::array();
  for (const ParsedToolCall& c : calls)
    out.push_back({{"id", fmt::format("call_{:016x}", salt ^ (++counter * 0x9e3779b97f4a7c15ull))},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

// The calls a forced tool_choice's constrained reply makes: named, the reply is the
// function's arguments; required, a JSON array of {"name", "parameters"}. Empty when the reply
// is not that (cut off by max_tokens): the client then gets it as content.
std::vector<ParsedToolCall> forced_tool_calls(ToolChoice choice, const std::string& name, const std::string& text) {
  if (choice == ToolChoice::named) return {ParsedToolCall{name, text}};
  std::vector<ParsedToolCall> calls;
  const nlohmann::ordered_json arr = nlohmann::ordered_json::parse(text, nullptr, false);
  if (!arr.is_array()) return calls;
  for (const auto& c : arr) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("parameters")) return {};
    calls.push_back(ParsedToolCall{c["name"].get<std::string>(), c["parameters"].dump()});
  }
  return calls;
}

}  // namespace

struct Server::Impl {
  const Engine& eng;
  Scheduler& sched;
  ServerOptions opt;
  httplib::Server http;
  HttpMetrics metrics;
  std::atomic<uint64_t> next_id{1};
  std::mutex rng_mu;
  std::mt19937_64 rng{std::random_device{}()};
  int64_t started_unix = 0;
  std::mutex log_mu;
  socket_t listen_fd = INVALID_SOCKET;
  std::shared_ptr<const VocabTrie> trie;  // structured output: the vocabulary's bytes

  Impl(const Engine& e, Scheduler& s, ServerOptions o) : eng(e), sched(s), opt(std::move(o)) {}

  void setup();
  void completions(const httplib::Request& req, httplib::Response& res, Endpoint ep);
  // check_context: a prompt that leaves no room in the context is a 400.
  std::vector<int32_t> prompt_tokens(const ApiRequest& ar, size_t index, bool check_context = true);
  RequestParams to_params(const ApiRequest& ar);
  RequestHandle submit(RequestParams p, Endpoint ep);
  void stream(httplib::Response& res, std::shared_ptr<Job> job, const std::string& route);
  LogprobEntry entry(const TokenLogprob& t) const;
  json choice_logprobs(const Job& job, const ChoiceRun& run) const;
  bool authorized(const httplib::Request& req, httplib::Response& res);
  uint64_t random_u64() {
    std::lock_guard lk(rng_mu);
    return rng();
  }
  void log(const std::string& line) {
    if (!opt.log_requests) return;
    std::lock_guard lk(log_mu);
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  ResponseMeta meta(Endpoint ep) {
    ResponseMeta m;
    m.id = fmt::format("{}{:016x}{:08x}", ep == Endpoint::kChat ? "chatcmpl-" : "cmpl-", random_u64(),
                       uint32_t(next_id++));
    m.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                    .count();
    m.model = opt.model_name;
    return m;
  }
  json model_object() const {
    return {{"id", opt.model_name},
            {"object", "model"},
            {"created", started_unix},
            {"owned_by", "ninfer"},
            {"max_model_len", sched.max_context()}};
  }
};

bool Server::Impl::authorized(const httplib::Request& req, httplib::Response& res) {
  if (opt.api_key.empty()) return true;
  const std::string h = req.get_header_value("Authorization");
  const std::string want = "Bearer " + opt.api_key;
  // NOTE: constant-time comparison, so the key cannot be guessed byte by byte from timing.
  bool ok = h.size() == want.size();
  unsigned diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff |= unsigned(uint8_t(i < h.size() ? h[i] : 0) ^ uint8_t(want[i]));
  ok = ok && diff == 0;
  if (ok) return true;
  send_error(res, ApiError{401,
                           h.empty() ? "missing API key: send the header 'Authorization: Bearer <key>'"
                                     : "incorrect API key provided",
                           "invalid_request_error", "", "invalid_api_key"});
  return false;
}

std::vector<int32_t> Server::Impl::prompt_tokens(const ApiRequest& ar, size_t index, bool check_context) {
  RequestParams p;
  const std::string where = ar.prompts.size() > 1 ? fmt::format("prompt[{}]", index) : "prompt";
  try {
    if (ar.endpoint == Endpoint::kChat) {
      std::vector<ChatMessage> msgs;
      msgs.reserve(ar.messages.size());
      for (const Message& m : ar.messages) msgs.push_back(ChatMessage{m.role, m.content, m.fields});
      ChatOptions copts;
      copts.tools = ar.tools;
      copts.kwargs = ar.chat_template_kwargs;
      // A template that never reads `tools` would drop them silently: refuse instead.
      if (!ar.tools.is_undefined() && !chat_template_mentions(eng.tokenizer().chat_template(), "tools"))
        throw ApiError{400, "'tools' were given but this model's chat template does not use tools",
                       "invalid_request_error", "tools", "unsupported_parameter"};
      p.prompt = eng.encode_chat(msgs, copts);
    } else if (ar.prompts[index].text) {
      p.prompt = eng.tokenizer().encode(*ar.prompts[index].text, true);
    } else {
      p.prompt = ar.prompts[index].ids;
      const int32_t vocab = eng.config().vocab;
      for (size_t i = 0; i < p.prompt.size(); ++i)
        if (p.prompt[i] >= vocab)
          throw ApiError{400, fmt::format("token id {} is outside the vocabulary (0..{})", p.prompt[i], vocab - 1),
                         "invalid_request_error", fmt::format("{}[{}]", where, i), "invalid_value"};
    }
  } catch (const Error& e) {
    throw ApiError{400, e.what(), "invalid_request_error", ar.endpoint == Endpoint::kChat ? "messages" : where,
                   "invalid_value"};
  }
  if (p.prompt.empty())
    throw ApiError{400, "the prompt encodes to no tokens and the model adds no BOS token", "invalid_request_error",
                   where, "invalid_value"};
  // NOTE: OpenAI answers a prompt over the context with 400 context_length_exceeded (its SDK
  // maps that code to a specific error), not 413.
  if (check_context && int64_t(p.prompt.size()) >= sched.max_context())
    throw ApiError{400,
                   fmt::format("This model's maximum context length is {} tokens. However, your {} resulted in {} "
                               "tokens (at least one token must be left for the completion).",
                               sched.max_context(), ar.endpoint == Endpoint::kChat ? "messages" : "prompt",
                               p.prompt.size()),
                   "invalid_request_error", ar.endpoint == Endpoint::kChat ? "messages" : where,
                   "context_length_exceeded"};
  return std::move(p.prompt);
}

// Everything but the prompt and the seed, which differ per choice.
RequestParams Server::Impl::to_params(const ApiRequest& ar) {
  RequestParams p;
  for (auto [id, bias] : ar.sampling.logit_bias)
    if (id >= eng.config().vocab)
      throw ApiError{400, fmt::format("logit_bias: token id {} is outside the vocabulary (0..{})", id, eng.config().vocab - 1),
                     "invalid_request_error", fmt::format("logit_bias.{}", id), "invalid_value"};
  p.max_tokens = ar.max_tokens;
  p.sampling = ar.sampling;
  // generation_config.json's sampling defaults for what the request left unset (vLLM's
  // --generation-config auto); serve lists them at startup.
  apply_sampling_defaults(eng.generation_config().sampling,
                          SamplingKnobs{&p.sampling.temperature, &p.sampling.top_p, &p.sampling.top_k,
                                        &p.sampling.min_p, &p.sampling.repetition_penalty, ar.set_temperature,
                                        ar.set_top_p, ar.set_top_k, ar.set_min_p, ar.set_repetition_penalty});
  // NOTE: without a seed, sampled requests differ run to run, as OpenAI's do.
  if (!ar.seed_given) p.sampling.seed = random_u64();
  p.stop_strings = ar.stop;
  p.ignore_eos = ar.ignore_eos;
  // best_of ranks candidates by their log-probabilities: they need them even if not asked.
  p.logprobs = ar.logprobs >= 0 ? ar.logprobs : (ar.best_of > ar.n ? 0 : -1);
  p.prompt_logprobs = ar.echo && ar.logprobs >= 0;
  return p;
}

LogprobEntry Server::Impl::entry(const TokenLogprob& t) const {
  LogprobEntry e;
  e.token = eng.tokenizer().token_piece(t.token);
  e.logprob = t.logprob;
  for (const auto& [id, lp] : t.top) e.top.emplace_back(eng.tokenizer().token_piece(id), lp);
  return e;
}

// The choice's logprobs object (non-streaming): the echoed prompt's tokens first (the first
// has no log-probability), then the generated ones.
json Server::Impl::choice_logprobs(const Job& job, const ChoiceRun& run) const {
  if (job.logprobs < 0) return nullptr;
  std::vector<LogprobEntry> es;
  if (job.echo) {
    const std::vector<int32_t>& pr = job.prompts[run.prompt];
    es.push_back(LogprobEntry{eng.tokenizer().token_piece(pr[0]), std::nullopt, {}});
    for (const TokenLogprob& t : run.prompt_logprobs) es.push_back(entry(t));
  }
  for (const TokenLogprob& t : run.logprobs) es.push_back(entry(t));
  return job.chat ? chat_logprobs(es) : completion_logprobs(es, 0);
}

RequestHandle Server::Impl::submit(RequestParams p, Endpoint ep) {
  try {
    return sched.submit(std::move(p));
  } catch (const QueueFullError& e) {
    throw ApiError{429, e.what(), "rate_limit_error", "", "queue_full"};
  } catch (const PromptTooLongError& e) {
    throw ApiError{400, e.what(), "invalid_request_error", ep == Endpoint::kChat ? "messages" : "prompt",
                   "context_length_exceeded"};
  } catch (const ShuttingDownError& e) {
    throw ApiError{503, e.what(), "server_error", "", "shutting_down"};
  } catch (const Error& e) {
    throw ApiError{400, e.what(), "invalid_request_error", "", "invalid_value"};
  }
}

void Server::Impl::completions(const httplib::Request& req, httplib::Response& res, Endpoint ep) {
  const auto t0 = Clock::now();
  const std::string route = ep == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
  if (!authorized(req, res)) {
    metrics.record(route, res.status);
    log(fmt::format("POST {} {} | bad API key", route, res.status));
    return;
  }
  try {
    json body = parse_body(req.body);
    ApiRequest ar;
    if (ep == Endpoint::kChat) {
      // The same text again in key order, for the tools / tool calls the template prints.
      const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(req.body);
      ar = parse_chat_request(body, &ordered);
    } else {
      ar = parse_completion_request(body);
    }
    auto job = std::make_shared<Job>();
    job->meta = meta(ep);
    job->chat = ep == Endpoint::kChat;
    job->include_usage = ar.include_usage;
    job->logprobs = ar.logprobs;
    job->echo = ar.echo;
    job->n = ar.n;
    job->candidates = std::max(ar.n, ar.best_of);
    job->t0 = t0;
    job->tool_choice = ar.tool_choice;
    job->tool_name = ar.tool_choice_name;
    job->parallel_tool_calls = ar.parallel_tool_calls;
    if (job->chat && !ar.tools.is_undefined() && ar.tool_choice == ToolChoice::automatic)
      job->tool_format = tool_call_format_for(eng.tokenizer().chat_template());
    const size_t n_prompts = job->chat ? 1 : ar.prompts.size();
    for (size_t i = 0; i < n_prompts; ++i) {
      job->prompts.push_back(prompt_tokens(ar, i));
      if (ar.echo)
        job->prompt_texts.push_back(ar.prompts[i].text ? *ar.prompts[i].text
                                                       : eng.tokenizer().decode(job->prompts.back()));
    }
    const RequestParams base = to_params(ar);
    for (size_t pi = 0; pi < n_prompts; ++pi)
      for (int c = 0; c < job->candidates; ++c) {
        RequestParams p = base;
        p.prompt = job->prompts[pi];
        // NOTE: with a seed, choice c samples with seed + c: reproducible, and choice 0 is
        // what the same request with n = 1 gives.
        p.sampling.seed = ar.seed_given ? base.sampling.seed + uint64_t(c) : random_u64();
        // Each choice has its own matcher state.
        if (ar.grammar)
          p.constraint = std::make_shared<JsonConstraint>(
              trie, ar.grammar, ar.ignore_eos ? std::vector<int32_t>{} : eng.generation_config().eos_ids);
        ChoiceRun run;
        run.prompt = pi;
        run.submitted = seconds_since(job->t0);
        run.handle = submit(std::move(p), ep);  // a refusal cancels the runs submitted so far
        job->runs.push_back(std::move(run));
      }
    if (ar.stream) {
      stream(res, job, route);
      return;
    }
    // NOTE: a non-streaming client that goes away is seen by polling its socket between
    // waits: its choices are cancelled, which frees their pages at the next step.
    const socket_t fd = connection_socket(req);
    for (ChoiceRun& run : job->runs) {
      while (!run.finished) {
        run.absorb(run.handle.take(kPoll));
        if (!run.finished && fd != INVALID_SOCKET && peer_closed(fd)) {
          for (ChoiceRun& r : job->runs) r.handle.cancel();
          job->ended = true;
          metrics.record(route, 499);  // NOTE: nginx's "client closed request"
          log(fmt::format("POST {} 499 | the client closed the connection after {:.3f} s, request cancelled", route,
                          seconds_since(t0)));
          res.status = 499;
          return;
        }
      }
    }
    job->ended = true;
    for (const ChoiceRun& run : job->runs)
      if (run.finish_reason == "error" || run.finish_reason == "cancelled") {
        const bool down = !sched.running();
        throw ApiError{down ? 503 : 500, run.error.empty() ? "request cancelled" : run.error, "server_error", "",
                       down ? "shutting_down" : "internal_error"};
      }
    std::vector<Choice> choices;
    for (size_t pi = 0; pi < n_prompts; ++pi) {
      std::vector<const ChoiceRun*> cands;
      for (int c = 0; c < job->candidates; ++c) cands.push_back(&job->runs[pi * size_t(job->candidates) + size_t(c)]);
      if (job->candidates > job->n) {
        // best_of: the candidates with the highest mean token log-probability (stable: ties
        // keep the lower index).
        auto mean = [](const ChoiceRun* r) {
          return r->lp_count ? r->lp_sum / double(r->lp_count) : -std::numeric_limits<double>::infinity();
        };
        std::stable_sort(cands.begin(), cands.end(), [&](auto* a, auto* b) { return mean(a) > mean(b); });
        cands.resize(size_t(job->n));
      }
      for (const ChoiceRun* r : cands) {
        Choice c{job->echo ? job->prompt_texts[pi] + r->text : r->text, r->finish_reason, choice_logprobs(*job, *r),
                 nullptr};
        if (job->tool_choice != ToolChoice::automatic) {
          const std::vector<ParsedToolCall> calls = forced_tool_calls(job->tool_choice, job->tool_name, c.text);
          if (!calls.empty()) {
            c.text.clear();
            c.tool_calls = tool_calls_json(calls);
          }
        } else if (job->tool_format != ToolCallFormat::none) {
          ToolOutput t = parse_tool_output(c.text, job->tool_format);
          if (!job->parallel_tool_calls && t.calls.size() > 1) t.calls.resize(1);
          if (!t.calls.empty()) {
            c.text = std::move(t.content);
            c.tool_calls = tool_calls_json(t.calls);
          }
        }
        choices.push_back(std::move(c));
      }
    }
    const Usage u{job->prompt_tokens(), job->completion_tokens(), job->cached_tokens()};
    json out = job->chat ? chat_completion(job->meta, choices, u) : text_completion(job->meta, choices, u);
    res.status = 200;
    res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    metrics.record(route, 200);
    metrics.record_request(job->timing(seconds_since(t0)));
    log(fmt::format("POST {} 200 | prompt {}, completion {}, {} choice(s), {} | {:.3f} s", route, u.prompt_tokens,
                    u.completion_tokens, choices.size(), choices.empty() ? "" : choices[0].finish_reason,
                    seconds_since(t0)));
  } catch (const ApiError& e) {
    send_error(res, e);
    metrics.record(route, e.status);
    log(fmt::format("POST {} {} | {}", route, e.status, e.message));
  }
}

void Server::Impl::stream(httplib::Response& res, std::shared_ptr<Job> job, const std::string& route) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto provider = [this, job, route](size_t, httplib::DataSink& sink) -> bool {
    Job& j = *job;
    auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    auto gone = [&]() {
      // The client went away: cancelling frees the sequences' pages at the next step.
      for (ChoiceRun& r : j.runs) r.handle.cancel();
      j.ended = true;
      metrics.record(route, 499);  // NOTE: nginx's "client closed request"
      log(fmt::format("POST {} 200 | stream closed by the client after {:.3f} s, request cancelled", route,
                      seconds_since(j.t0)));
      return false;
    };
    auto lp_json = [&](ChoiceRun& r, const std::vector<LogprobEntry>& es) -> json {
      if (j.logprobs < 0) return nullptr;
      return j.chat ? chat_logprobs(es) : completion_logprobs(es, r.offset);
    };
    auto pending = [&](ChoiceRun& r) {
      std::vector<LogprobEntry> es;
      for (const TokenLogprob& t : r.logprobs) es.push_back(entry(t));
      r.logprobs.clear();
      return es;
    };
    auto chunk = [&](ChoiceRun& r, int index, const std::string& text, const std::string& finish,
                     const std::vector<LogprobEntry>& es) {
      const json lp = lp_json(r, es);
      r.offset += text.size();
      if (j.chat) {
        const json delta = finish.empty() ? json{{"content", text}} : json::object();
        return sse_event(chat_chunk(j.meta, delta, finish, j.include_usage, index, lp));
      }
      return sse_event(text_chunk(j.meta, text, finish, j.include_usage, index, lp));
    };
    if (!j.started) {
      j.started = true;
      std::string head;
      if (j.chat)
        for (size_t i = 0; i < j.runs.size(); ++i)
          head += sse_event(chat_chunk(j.meta, {{"role", "assistant"}, {"content", ""}}, "", j.include_usage, int(i)));
      if (!head.empty() && !write(head)) return gone();
    }
    auto last_write = Clock::now();
    while (true) {
      bool waited = false;
      for (size_t i = 0; i < j.runs.size(); ++i) {
        ChoiceRun& r = j.runs[i];
        if (r.finished) continue;
        // NOTE: one blocking wait per round (on the first unfinished choice); the others are
        // only looked at, so no choice's text waits for another's.
        RequestOutput o = r.handle.take(waited ? std::chrono::milliseconds(0) : kPoll);
        waited = true;
        std::string text = std::move(o.text);
        const bool fin = o.finished;
        o.text.clear();
        r.absorb(std::move(o));
        r.text.clear();
        std::string out;
        if (j.echo && !r.echoed && (!r.prompt_logprobs.empty() || !text.empty() || !r.logprobs.empty() || fin)) {
          // The echoed prompt goes first, with its log-probabilities.
          r.echoed = true;
          std::vector<LogprobEntry> es;
          if (j.logprobs >= 0) {
            es.push_back(LogprobEntry{eng.tokenizer().token_piece(j.prompts[r.prompt][0]), std::nullopt, {}});
            for (const TokenLogprob& t : r.prompt_logprobs) es.push_back(entry(t));
          }
          out += chunk(r, int(i), j.prompt_texts[r.prompt], "", es);
        }
        const bool ok_end = fin && r.finish_reason != "error" && r.finish_reason != "cancelled";
        if (j.tool_choice == ToolChoice::named) {
          // The reply is the arguments: streamed as OpenAI streams a call, the id and name
          // first, then the arguments in fragments.
          if (!r.call_opened && (!text.empty() || ok_end)) {
            r.call_opened = true;
            json call = tool_calls_json({ParsedToolCall{j.tool_name, ""}});
            call[0]["index"] = 0;
            out += sse_event(chat_chunk(j.meta, {{"tool_calls", call}}, "", j.include_usage, int(i), nullptr));
          }
          if (!text.empty()) {
            const json frag = json::array({{{"index", 0}, {"function", {{"arguments", text}}}}});
            out += sse_event(chat_chunk(j.meta, {{"tool_calls", frag}}, "", j.include_usage, int(i),
                                        lp_json(r, pending(r))));
            text.clear();
          }
          if (ok_end && r.finish_reason == "stop") r.finish_reason = "tool_calls";
        } else if (j.tool_choice == ToolChoice::required || j.tool_format != ToolCallFormat::none) {
          // NOTE: content streams until a call marker may have begun; from there the text is
          // held to the end, then sent as its content and calls (one delta each): a call is
          // only known to be one once its JSON closes. required: all of it is the calls' JSON.
          r.held += text;
          text.clear();
          if (j.tool_choice == ToolChoice::automatic) {
            const size_t n = tool_text_releasable(r.held, j.tool_format);
            text = r.held.substr(0, n);
            r.held.erase(0, n);
          }
        }
        if (!text.empty()) {
          out += chunk(r, int(i), text, "", pending(r));
        }
        if (ok_end && (j.tool_choice == ToolChoice::required || j.tool_format != ToolCallFormat::none)) {
          ToolOutput t;
          if (j.tool_choice == ToolChoice::required) {
            t.calls = forced_tool_calls(j.tool_choice, j.tool_name, r.held);
            if (t.calls.empty()) t.content = r.held;
          } else {
            t = parse_tool_output(r.held, j.tool_format);
            if (!j.parallel_tool_calls && t.calls.size() > 1) t.calls.resize(1);
          }
          if (!t.content.empty()) out += chunk(r, int(i), t.content, "", pending(r));
          if (!t.calls.empty()) {
            json calls = tool_calls_json(t.calls);
            for (size_t k = 0; k < calls.size(); ++k) calls[k]["index"] = k;
            out += sse_event(chat_chunk(j.meta, {{"tool_calls", calls}}, "", j.include_usage, int(i), nullptr));
            if (r.finish_reason == "stop") r.finish_reason = "tool_calls";
          }
        }
        if (fin) {
          if (r.finish_reason == "error" || r.finish_reason == "cancelled") {
            // The status line is long gone: the error travels as an event, as OpenAI's does.
            const bool down = !sched.running();
            out += sse_event(error_body(ApiError{down ? 503 : 500, r.error.empty() ? "request cancelled" : r.error,
                                                 "server_error", "", down ? "shutting_down" : "internal_error"}));
            out += "data: [DONE]\n\n";
            for (ChoiceRun& other : j.runs) other.handle.cancel();
            j.ended = true;
            if (!write(out)) return gone();
            sink.done();
            metrics.record(route, 200);
            log(fmt::format("POST {} 200 | stream ended by an error: {}", route, r.error));
            return true;
          }
          out += chunk(r, int(i), "", r.finish_reason, pending(r));
        }
        if (!out.empty()) {
          if (!write(out)) return gone();
          last_write = Clock::now();
        }
      }
      const bool all_done = std::all_of(j.runs.begin(), j.runs.end(), [](const ChoiceRun& r) { return r.finished; });
      if (all_done) {
        j.ended = true;
        const Usage u{j.prompt_tokens(), j.completion_tokens(), j.cached_tokens()};
        std::string tail;
        if (j.include_usage) tail += sse_event(usage_chunk(j.meta, j.chat, u));
        tail += "data: [DONE]\n\n";
        if (!write(tail)) return gone();
        sink.done();
        metrics.record(route, 200);
        metrics.record_request(j.timing(seconds_since(j.t0)));
        log(fmt::format("POST {} 200 | stream, prompt {}, completion {}, {} choice(s), {} | {:.3f} s", route,
                        u.prompt_tokens, u.completion_tokens, j.runs.size(), j.runs[0].finish_reason,
                        seconds_since(j.t0)));
        return true;
      }
      if (Clock::now() - last_write >= kKeepAlive) {
        if (!write(": keep-alive\n\n")) return gone();
        last_write = Clock::now();
      }
    }
  };
  // Called when the response ends for any reason (also when the connection died before the
  // provider ran): unfinished choices are cancelled.
  auto releaser = [job](bool) {
    if (!job->ended)
      for (ChoiceRun& r : job->runs) r.handle.cancel();
  };
  res.set_chunked_content_provider("text/event-stream", provider, releaser);
}

void Server::Impl::setup() {
  trie = std::make_shared<VocabTrie>(eng.tokenizer());
  started_unix =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const size_t threads = opt.http_threads > 0
                             ? size_t(opt.http_threads)
                             : size_t(sched.options().max_concurrency + sched.options().max_queue + 8);
  // NOTE: a connection holds its handler thread for as long as it is open (a request while
  // queued and running, an idle keep-alive connection up to kKeepAliveIdleS): the pool keeps
  // `threads` and grows to http_max_threads, so open connections never starve /health.
  const size_t max_threads = std::max(threads, size_t(std::max(1, opt.http_max_threads)));
  http.new_task_queue = [threads, max_threads] { return new ElasticPool(threads, max_threads); };
  http.set_payload_max_length(opt.max_body_bytes);
  http.set_tcp_nodelay(true);
  http.set_keep_alive_max_count(1000);
  http.set_read_timeout(kReadTimeoutS, 0);
  http.set_write_timeout(kWriteTimeoutS, 0);
  http.set_keep_alive_timeout(kKeepAliveIdleS);
  // Remembers the listening socket (httplib does not expose it) for bind() to raise its backlog.
  http.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    if (listen_fd == INVALID_SOCKET) listen_fd = sock;
  });

  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions(req, res, Endpoint::kChat);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions(req, res, Endpoint::kCompletion);
  });
  http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    json out = {{"object", "list"}, {"data", json::array({model_object()})}};
    res.set_content(out.dump(), "application/json");
  });
  http.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    const std::string id = req.matches[1];
    if (id != opt.model_name) {
      send_error(res, ApiError{404, fmt::format("the model '{}' does not exist; this server serves '{}'", id,
                                                opt.model_name),
                               "invalid_request_error", "model", "model_not_found"});
      return;
    }
    res.set_content(model_object().dump(), "application/json");
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (sched.running()) {
      res.set_content(R"({"status":"ok"})", "application/json");
    } else {
      send_error(res, ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"});
    }
  });
  // vLLM's /tokenize: {"prompt": text, "add_special_tokens"?} or {"messages": [...]} (the chat
  // template applied, with the generation prompt) -> {"tokens", "count", "max_model_len"}, and
  // "token_strs" with "return_token_strs": true.
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    try {
      json body = parse_object_body(req.body);
      // NOTE: /tokenize measures prompts: one over the context is still tokenized.
      std::vector<int32_t> ids;
      if (body.contains("messages")) {
        const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(req.body);
        ApiRequest ar = parse_chat_request(body, &ordered);
        ids = prompt_tokens(ar, 0, false);
      } else {
        auto p = body.find("prompt");
        if (p == body.end())
          throw ApiError{400, "'prompt' or 'messages' is required", "invalid_request_error", "prompt",
                         "missing_required_parameter"};
        if (!p->is_string())
          throw ApiError{400, fmt::format("'prompt' must be a string, got {}", p->type_name()),
                         "invalid_request_error", "prompt", "invalid_type"};
        bool special = true;
        if (auto a = body.find("add_special_tokens"); a != body.end() && !a->is_null()) {
          if (!a->is_boolean())
            throw ApiError{400, "'add_special_tokens' must be a boolean", "invalid_request_error",
                           "add_special_tokens", "invalid_type"};
          special = a->get<bool>();
        }
        ids = eng.tokenizer().encode(p->get<std::string>(), special);
      }
      json out = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", sched.max_context()}};
      auto r = body.find("return_token_strs");
      if (r != body.end() && !r->is_null() && !r->is_boolean())
        throw ApiError{400, "'return_token_strs' must be a boolean", "invalid_request_error", "return_token_strs",
                       "invalid_type"};
      if (r != body.end() && r->is_boolean() && r->get<bool>()) {
        json strs = json::array();
        for (int32_t id : ids) strs.push_back(eng.tokenizer().token_piece(id));
        out["token_strs"] = strs;
      }
      res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    try {
      json body = parse_object_body(req.body);
      auto t = body.find("tokens");
      if (t == body.end())
        throw ApiError{400, "'tokens' is required", "invalid_request_error", "tokens", "missing_required_parameter"};
      if (!t->is_array())
        throw ApiError{400, fmt::format("'tokens' must be an array of token ids, got {}", t->type_name()),
                       "invalid_request_error", "tokens", "invalid_type"};
      std::vector<int32_t> ids;
      for (size_t i = 0; i < t->size(); ++i) {
        const json& x = (*t)[i];
        const int64_t v = x.is_number_integer() ? x.get<int64_t>() : -1;
        if (!x.is_number_integer() || v < 0 || v >= eng.config().vocab)
          throw ApiError{400, fmt::format("'tokens[{}]' must be a token id in 0..{}", i, eng.config().vocab - 1),
                         "invalid_request_error", fmt::format("tokens[{}]", i), "invalid_value"};
        ids.push_back(int32_t(v));
      }
      res.set_content(json{{"prompt", eng.tokenizer().decode(ids)}}.dump(-1, ' ', false, json::error_handler_t::replace),
                      "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
  if (!opt.allowed_origins.empty()) {
    // CORS: the allowed origin is echoed (or "*"); a preflight gets the methods and headers.
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const std::string origin = req.get_header_value("Origin");
      if (origin.empty()) return httplib::Server::HandlerResponse::Unhandled;
      const bool any = std::find(opt.allowed_origins.begin(), opt.allowed_origins.end(), "*") != opt.allowed_origins.end();
      const bool listed =
          std::find(opt.allowed_origins.begin(), opt.allowed_origins.end(), origin) != opt.allowed_origins.end();
      if (!any && !listed) return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
      if (!any) res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        const std::string want = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Headers", want.empty() ? "Authorization, Content-Type" : want);
        res.set_header("Access-Control-Max-Age", "600");
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
  }
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(sched.stats(), sched.options(), metrics), "text/plain; version=0.0.4");
  });

  // Errors httplib produces itself (no route, body over the limit, unparsable HTTP) get
  // OpenAI-style bodies too; responses that already have one are left alone.
  http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                      httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.status = res.status;
    if (res.status == 404) {
      const bool post_route = req.path == "/v1/chat/completions" || req.path == "/v1/completions";
      if (post_route && req.method != "POST") {
        e.status = res.status = 405;
        e.message = fmt::format("{} {}: use POST", req.method, req.path);
        e.code = "method_not_allowed";
      } else {
        e.message = fmt::format("unknown route: {} {}", req.method, req.path);
        e.code = "not_found";
      }
    } else if (res.status == 413) {
      e.message = fmt::format("the request body is larger than the limit of {} bytes (--max-body-bytes)",
                              opt.max_body_bytes);
      e.code = "request_too_large";
    } else {
      // What cpp-httplib answers by itself: unparsable requests, oversized headers or URIs,
      // bad ranges. Each gets a message and a code a client can branch on.
      static const std::map<int, std::pair<const char*, const char*>> kHttp = {
          {400, {"the HTTP request could not be parsed", "bad_http_request"}},
          {408, {"the request was not received in time", "request_timeout"}},
          {414, {"the request URI is too long", "uri_too_long"}},
          {416, {"the requested range is not satisfiable", "range_not_satisfiable"}},
          {417, {"the expectation given in the Expect header cannot be met", "expectation_failed"}},
          {431, {"the request headers are too large", "headers_too_large"}},
          {500, {"internal server error", "internal_error"}},
          {503, {"the server is unavailable", "service_unavailable"}},
      };
      auto it = kHttp.find(res.status);
      e.message = it != kHttp.end() ? fmt::format("HTTP {}: {}", res.status, it->second.first)
                                    : fmt::format("HTTP error {}", res.status);
      e.code = it != kHttp.end() ? it->second.second : fmt::format("http_{}", res.status);
      if (res.status >= 500) e.type = "server_error";
    }
    // NOTE: unknown paths share one label so clients cannot grow the metric set.
    const bool known = req.path.rfind("/v1/", 0) == 0 || req.path == "/health" || req.path == "/metrics";
    metrics.record(known && res.status != 404 ? req.path : "other", e.status);
    send_error(res, e);
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log(fmt::format("{} {} 500 | internal error: {}", req.method, req.path, what));
    send_error(res, ApiError{500, "internal error: " + what, "server_error", "", "internal_error"});
  });
}

Server::Server(const Engine& engine, Scheduler& scheduler, ServerOptions opt)
    : impl_(std::make_unique<Impl>(engine, scheduler, std::move(opt))) {
  impl_->setup();
}

Server::~Server() { stop(); }

int Server::bind() {
  const ServerOptions& o = impl_->opt;
  // Every connection is a descriptor: raise the soft limit to the hard one (best effort), so
  // a thousand idle clients do not make accept() fail.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  int port = o.port;
  if (o.port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
    if (port <= 0) fail("cannot listen on {} (any port): the address is not available", o.host);
  } else if (!impl_->http.bind_to_port(o.host, o.port)) {
    fail("cannot listen on {}:{}: the port is in use or the address is not available (--host, --port)", o.host,
         o.port);
  }
  // Best effort: on failure the library's backlog of 5 stays (the kernel caps it at somaxconn).
  int listening = 0;
  socklen_t len = sizeof(listening);
  if (impl_->listen_fd != INVALID_SOCKET &&
      getsockopt(impl_->listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening)
    ::listen(impl_->listen_fd, kListenBacklog);
  return port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::stop() {
  if (impl_) impl_->http.stop();
}

}  // namespace ninfer::server
