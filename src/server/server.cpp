#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>

#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "server/metrics.h"
#include "server/openai_api.h"
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

// One streaming response: the request's handle and what the chunks need.
struct StreamCtx {
  RequestHandle handle;
  ResponseMeta meta;
  bool chat = true;
  bool include_usage = false;
  int prompt_tokens = 0;
  Clock::time_point t0;
  double first_text = -1;
  bool started = false;
  bool ended = false;
};

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

  Impl(const Engine& e, Scheduler& s, ServerOptions o) : eng(e), sched(s), opt(std::move(o)) {}

  void setup();
  void completions(const httplib::Request& req, httplib::Response& res, Endpoint ep);
  RequestParams to_params(const ApiRequest& ar);
  RequestHandle submit(RequestParams p, Endpoint ep);
  void stream(httplib::Response& res, std::shared_ptr<StreamCtx> ctx, const std::string& route);
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

RequestParams Server::Impl::to_params(const ApiRequest& ar) {
  RequestParams p;
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
    } else if (ar.prompt_text) {
      p.prompt = eng.tokenizer().encode(*ar.prompt_text, true);
    } else {
      p.prompt = *ar.prompt_ids;
      const int32_t vocab = eng.config().vocab;
      for (size_t i = 0; i < p.prompt.size(); ++i)
        if (p.prompt[i] >= vocab)
          throw ApiError{400, fmt::format("token id {} is outside the vocabulary (0..{})", p.prompt[i], vocab - 1),
                         "invalid_request_error", fmt::format("prompt[{}]", i), "invalid_value"};
    }
  } catch (const Error& e) {
    throw ApiError{400, e.what(), "invalid_request_error", ar.endpoint == Endpoint::kChat ? "messages" : "prompt",
                   "invalid_value"};
  }
  if (p.prompt.empty())
    throw ApiError{400, "the prompt encodes to no tokens and the model adds no BOS token", "invalid_request_error",
                   "prompt", "invalid_value"};
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
  return p;
}

RequestHandle Server::Impl::submit(RequestParams p, Endpoint ep) {
  try {
    return sched.submit(std::move(p));
  } catch (const QueueFullError& e) {
    throw ApiError{429, e.what(), "rate_limit_error", "", "queue_full"};
  } catch (const PromptTooLongError& e) {
    throw ApiError{413, e.what(), "invalid_request_error", ep == Endpoint::kChat ? "messages" : "prompt",
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
    RequestParams p = to_params(ar);
    const int n_prompt = int(p.prompt.size());
    RequestHandle h = submit(std::move(p), ep);
    auto ctx = std::make_shared<StreamCtx>();
    ctx->handle = std::move(h);
    ctx->meta = meta(ep);
    ctx->chat = ep == Endpoint::kChat;
    ctx->include_usage = ar.include_usage;
    ctx->prompt_tokens = n_prompt;
    ctx->t0 = t0;
    if (ar.stream) {
      stream(res, ctx, route);
      return;
    }
    RequestOutput o = ctx->handle.wait_done();
    ctx->ended = true;
    if (o.finish_reason == "error") {
      const bool down = !sched.running();
      throw ApiError{down ? 503 : 500, o.error, "server_error", "", down ? "shutting_down" : "internal_error"};
    }
    const Usage u{n_prompt, o.completion_tokens, o.cached_tokens};
    json out = ctx->chat ? chat_completion(ctx->meta, o.text, o.finish_reason, u)
                         : text_completion(ctx->meta, o.text, o.finish_reason, u);
    res.status = 200;
    res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    metrics.record(route, 200);
    metrics.record_latency(seconds_since(t0), -1);
    log(fmt::format("POST {} 200 | prompt {}, completion {}, {} | {:.3f} s", route, n_prompt, o.completion_tokens,
                    o.finish_reason, seconds_since(t0)));
  } catch (const ApiError& e) {
    send_error(res, e);
    metrics.record(route, e.status);
    log(fmt::format("POST {} {} | {}", route, e.status, e.message));
  }
}

void Server::Impl::stream(httplib::Response& res, std::shared_ptr<StreamCtx> ctx, const std::string& route) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto provider = [this, ctx, route](size_t, httplib::DataSink& sink) -> bool {
    StreamCtx& c = *ctx;
    auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    auto gone = [&]() {
      // The client went away: cancelling frees the sequence's pages at the next step.
      c.handle.cancel();
      c.ended = true;
      metrics.record(route, 499);  // NOTE: nginx's "client closed request"
      log(fmt::format("POST {} 200 | stream closed by the client after {:.3f} s, request cancelled", route,
                      seconds_since(c.t0)));
      return false;
    };
    if (!c.started) {
      c.started = true;
      if (c.chat && !write(sse_event(chat_chunk(c.meta, {{"role", "assistant"}, {"content", ""}}, "", c.include_usage))))
        return gone();
    }
    auto last_write = Clock::now();
    while (true) {
      RequestOutput o = c.handle.take(kPoll);
      if (!o.text.empty()) {
        if (c.first_text < 0) c.first_text = seconds_since(c.t0);
        const json chunk = c.chat ? chat_chunk(c.meta, {{"content", o.text}}, "", c.include_usage)
                                  : text_chunk(c.meta, o.text, "", c.include_usage);
        if (!write(sse_event(chunk))) return gone();
        last_write = Clock::now();
      }
      if (o.finished) {
        c.ended = true;
        const Usage u{c.prompt_tokens, o.completion_tokens, o.cached_tokens};
        std::string tail;
        if (o.finish_reason == "error" || o.finish_reason == "cancelled") {
          // The status line is long gone: the error travels as an event, as OpenAI's does.
          const bool down = !sched.running();
          tail += sse_event(error_body(ApiError{down ? 503 : 500, o.error.empty() ? "request cancelled" : o.error,
                                                "server_error", "", down ? "shutting_down" : "internal_error"}));
        } else {
          tail += sse_event(c.chat ? chat_chunk(c.meta, json::object(), o.finish_reason, c.include_usage)
                                   : text_chunk(c.meta, "", o.finish_reason, c.include_usage));
          if (c.include_usage) tail += sse_event(usage_chunk(c.meta, c.chat, u));
        }
        tail += "data: [DONE]\n\n";
        if (!write(tail)) return gone();
        sink.done();
        metrics.record(route, 200);
        metrics.record_latency(seconds_since(c.t0), c.first_text);
        log(fmt::format("POST {} 200 | stream, prompt {}, completion {}, {} | {:.3f} s", route, c.prompt_tokens,
                        o.completion_tokens, o.finish_reason, seconds_since(c.t0)));
        return true;
      }
      if (Clock::now() - last_write >= kKeepAlive) {
        if (!write(": keep-alive\n\n")) return gone();
        last_write = Clock::now();
      }
    }
  };
  // Called when the response ends for any reason (also when the connection died before the
  // provider ran): an unfinished request is cancelled.
  auto releaser = [ctx](bool) {
    if (!ctx->ended) ctx->handle.cancel();
  };
  res.set_chunked_content_provider("text/event-stream", provider, releaser);
}

void Server::Impl::setup() {
  started_unix =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const size_t threads = opt.http_threads > 0
                             ? size_t(opt.http_threads)
                             : size_t(sched.options().max_concurrency + sched.options().max_queue + 8);
  // NOTE: a request holds its handler thread while queued and while it runs, so the pool
  // must exceed running + queued requests, with spare threads for /health and /metrics.
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
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
      e.message = fmt::format("HTTP error {}", res.status);
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
