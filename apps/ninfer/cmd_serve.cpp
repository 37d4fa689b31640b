// `ninfer serve`: the OpenAI-compatible HTTP server (src/server) over a continuous-batching
// scheduler (src/runtime/scheduler.h). Prints the capacity line and then
// "ninfer serve: listening on http://HOST:PORT" on stderr when ready; SIGINT/SIGTERM end it
// (in-flight requests get a 503-style error, then the process exits 0).
#ifdef NINFER_HAVE_SERVER
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "apps/ninfer/command.h"
#include "core/error.h"
#include "kv/capacity.h"
#include "runtime/scheduler.h"
#include "server/server.h"

namespace ninfer::app {
namespace {

struct ServeCmd {
  EngineFlags ef;
  server::ServerOptions so;
  SchedulerOptions sched;
  std::string max_body = "8MiB";
  bool quiet_requests = false;
  bool no_prefix_cache = false;
};

RegisterCommand reg_serve("serve", "OpenAI-compatible HTTP server with continuous batching", [](CLI::App* app) {
  auto c = std::make_shared<ServeCmd>();
  c->ef.add(app);
  app->add_option("--host", c->so.host, "address to listen on")->capture_default_str();
  app->add_option("--port", c->so.port, "port to listen on (0: any free port, printed at startup)")
      ->capture_default_str();
  app->add_option("--max-concurrency", c->sched.max_concurrency, "sequences decoded together at most")
      ->capture_default_str();
  app->add_option("--max-queue", c->sched.max_queue,
                  "requests that may wait for a slot or KV pages; more get HTTP 429")
      ->capture_default_str();
  app->add_option("--step-tokens", c->sched.step_tokens,
                  "tokens per forward call (decode tokens + prefill chunk); also the prefill chunk")
      ->capture_default_str();
  app->add_option("--api-key", c->so.api_key,
                  "require 'Authorization: Bearer KEY' on /v1/* (default: $NINFER_API_KEY, else none)");
  app->add_option("--model-name", c->so.model_name, "model id in /v1/models and responses (default: the directory name)");
  app->add_option("--max-body-bytes", c->max_body, "largest request body (e.g. 8MiB); more gets HTTP 413")
      ->capture_default_str();
  app->add_option("--http-threads", c->so.http_threads,
                  "HTTP handler threads kept (0: max-concurrency + max-queue + 8)")->capture_default_str();
  app->add_option("--http-max-threads", c->so.http_max_threads,
                  "HTTP handler threads at most: the pool grows by one whenever every thread holds a "
                  "connection (idle keep-alive ones included)")->capture_default_str();
  app->add_flag("--no-request-log", c->quiet_requests, "do not log one line per request on stderr");
  app->add_flag("--no-prefix-cache", c->no_prefix_cache,
                "do not reuse the KV pages of earlier prompts that a new prompt starts with");
  app->add_option("--allowed-origins", c->so.allowed_origins,
                  "origins browsers may call the API from (CORS), comma-separated; '*' for any")
      ->delimiter(',');
  app->callback([c]() {
    if (c->so.port < 0 || c->so.port > 65535) fail("--port must be in 0..65535, got {}", c->so.port);
    if (c->so.http_threads < 0) fail("--http-threads must be >= 0, got {}", c->so.http_threads);
    if (c->so.http_max_threads < 1) fail("--http-max-threads must be >= 1, got {}", c->so.http_max_threads);
    if (c->sched.max_concurrency < 1) fail("--max-concurrency must be >= 1, got {}", c->sched.max_concurrency);
    if (c->sched.max_queue < 0) fail("--max-queue must be >= 0, got {}", c->sched.max_queue);
    if (c->sched.step_tokens < 1) fail("--step-tokens must be >= 1, got {}", c->sched.step_tokens);
    c->so.max_body_bytes = parse_bytes(c->max_body, "--max-body-bytes");
    if (c->so.api_key.empty())
      if (const char* k = std::getenv("NINFER_API_KEY")) c->so.api_key = k;
    c->so.log_requests = !c->quiet_requests;
    if (c->so.model_name.empty()) {
      std::filesystem::path p(c->ef.model_dir);
      c->so.model_name = (p.has_filename() ? p.filename() : p.parent_path().filename()).string();
    }

    // NOTE: SIGINT/SIGTERM are blocked in every thread (the engine's OpenMP threads and the
    // HTTP pool inherit the mask) and taken by one waiter thread, which may then call into
    // the scheduler and the server safely, unlike a signal handler.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a client closing its socket must not kill the server

    EngineOptions eo = c->ef.options();
    eo.max_sequences = c->sched.max_concurrency;  // automatic CPU capacity: one context each
    eo.prefill_chunk = c->sched.step_tokens;
    eo.prefix_cache = !c->no_prefix_cache;
    auto eng = Engine::create(c->ef.model_dir, eo);
    Scheduler sched(*eng, c->sched);
    server::Server srv(*eng, sched, c->so);
    const int port = srv.bind();

    std::atomic<bool> done{false};
    std::thread waiter([&] {
      int sig = 0;
      sigwait(&sigs, &sig);
      if (done) return;  // run() ended on its own and woke us
      std::fprintf(stderr, "ninfer serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      sched.stop();  // fails in-flight requests, so their handler threads return
      srv.stop();
    });
    {
      // What a request that sets no sampling field gets (OpenAI's temperature 1 otherwise).
      SamplingParams d;
      d.temperature = 1.0f;
      std::vector<std::string> taken = apply_sampling_defaults(
          eng->generation_config().sampling,
          SamplingKnobs{&d.temperature, &d.top_p, &d.top_k, &d.min_p, &d.repetition_penalty});
      std::string list;
      for (const std::string& t : taken) list += (list.empty() ? "" : ", ") + t;
      if (!list.empty())
        std::fprintf(stderr, "ninfer serve: sampling defaults from %s: %s (request fields override them)\n",
                     eng->generation_config().sampling.file.c_str(), list.c_str());
    }
    std::fprintf(stderr,
                 "ninfer serve: model '%s', max concurrency %d, queue %d, prefix cache %s, listening on http://%s:%d\n",
                 c->so.model_name.c_str(), c->sched.max_concurrency, c->sched.max_queue,
                 eng->prefix_cache_enabled() ? "on" : "off", c->so.host.c_str(), port);
    srv.run();
    sched.stop();
    done = true;
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
  });
});

}  // namespace
}  // namespace ninfer::app
#endif  // NINFER_HAVE_SERVER
