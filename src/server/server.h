// `ninfer serve`'s HTTP layer: an OpenAI-compatible API over cpp-httplib in front of a
// Scheduler. Routes:
//   POST /v1/chat/completions, POST /v1/completions   (JSON, or SSE with "stream": true)
//   GET  /v1/models, GET /v1/models/{id}
//   GET  /health                                       (200 {"status":"ok"}; 503 stopping)
//   GET  /metrics                                      (Prometheus text format 0.0.4)
//   POST /tokenize, POST /detokenize                   (vLLM's: text or messages <-> token ids)
// With allowed_origins, responses carry CORS headers for those origins and OPTIONS
// preflights are answered.
// Every handler thread parses and tokenizes its own request, submits it to the scheduler and
// then waits on the request's handle; only the scheduler thread touches the engine. A
// streaming client that goes away is noticed at the next write (text or a keep-alive
// comment, at least every kKeepAlive) and its request is cancelled, which frees its pages.
// A non-streaming request polls its client's socket while it waits and is cancelled the
// same way when the client has closed it. Connections are served by a pool that grows by a
// thread whenever none is idle, so idle keep-alive connections never starve new ones.
// Errors are OpenAI-style JSON; no request can stop the server.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace ninfer {
class Engine;
class Scheduler;
}  // namespace ninfer

namespace ninfer::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port (bind() returns it)
  std::string api_key;                 // empty: no authentication
  std::string model_name;              // the id /v1/models reports and responses carry
  size_t max_body_bytes = 8u << 20;    // larger bodies: 413
  int http_threads = 0;                // threads kept; 0: max_concurrency + max_queue + 8
  int http_max_threads = 4096;         // the pool grows to this (one thread per open connection)
  bool log_requests = true;            // one line per request on stderr
  // Origins browsers may call from (CORS); "*": any; empty: no CORS headers at all.
  std::vector<std::string> allowed_origins;
};

class Server {
 public:
  // The engine is only read (tokenizer, chat template, config) from handler threads; the
  // scheduler drives it.
  Server(const Engine& engine, Scheduler& scheduler, ServerOptions opt);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port. Throws Error when it cannot.
  int bind();
  // Serves until stop(); returns after the in-flight requests have ended.
  void run();
  // Thread-safe; run() returns soon after.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ninfer::server
