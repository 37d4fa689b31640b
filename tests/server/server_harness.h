// Test harness for `ninfer serve`: starts the real binary on 127.0.0.1 with --port 0 (the
// port it picked is read from its "listening on" line), talks HTTP to it (plain and SSE),
// reads /metrics, and stops it with SIGTERM (expecting a clean exit).
#pragma once
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ninfer::test {

using json = nlohmann::json;

class ServerProcess {
 public:
  // `ninfer serve -m <ref model> --host 127.0.0.1 --port 0 --device cpu --threads 1 <extra>`.
  // Returns nullptr (with `error` set) when it does not come up within the timeout.
  static std::unique_ptr<ServerProcess> start(const std::vector<std::string>& extra, std::string* error);
  ~ServerProcess();
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // SIGTERM, then waits; returns the exit status (-1: killed after a timeout or a signal).
  int stop();
  std::string log() const;  // its stdout + stderr so far

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::filesystem::path log_path_;
};

struct Reply {
  int status = 0;  // 0: no HTTP response (connection failed)
  std::string body;
  json j;          // body parsed (null when it is not JSON)
};

struct StreamReply {
  int status = 0;
  std::vector<std::string> events;  // "data:" payloads in order ("[DONE]" included)
  std::string raw;
  bool aborted = false;             // on_event asked to stop
};

class Client {
 public:
  explicit Client(int port, std::string api_key = {}) : port_(port), key_(std::move(api_key)) {}
  Reply get(const std::string& path) const;
  Reply post(const std::string& path, const std::string& body, const std::string& content_type = "application/json") const;
  Reply post(const std::string& path, const json& body) const { return post(path, body.dump()); }
  // Streams an SSE response; on_event(payload) returning false closes the connection.
  StreamReply post_stream(const std::string& path, const json& body,
                          const std::function<bool(const std::string&)>& on_event = nullptr) const;
  // A scalar from /metrics (first sample of that name with those labels); NaN if absent.
  double metric(const std::string& name_with_labels) const;

 private:
  int port_;
  std::string key_;
};

// For a suite's TearDownTestSuite: stops the server (if any), expecting a clean SIGTERM exit.
void stop_server(std::unique_ptr<ServerProcess>& server);
// For a test's TearDown: the last 4,000 bytes of the server's log when the test failed.
void print_log_if_failed(const ServerProcess* server);

// The text of a streamed chat or text completion (concatenated deltas).
std::string stream_text(const StreamReply& r);

// Polls until pred() or timeout; returns pred().
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

}  // namespace ninfer::test
