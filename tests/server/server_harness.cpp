#include "server_harness.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "test_paths.h"

namespace ninfer::test {

std::unique_ptr<ServerProcess> ServerProcess::start(const std::vector<std::string>& extra, std::string* error) {
  auto sp = std::unique_ptr<ServerProcess>(new ServerProcess());
  static int counter = 0;
  sp->log_path_ = std::filesystem::temp_directory_path() /
                  ("ninfer_serve_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".log");
  std::vector<std::string> args = {ninfer_binary().string(), "serve",    "-m",      model_dir("ref-qwen3-d256").string(),
                                   "--host",                 "127.0.0.1", "--port", "0",
                                   "--device",               "cpu",       "--threads", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  // Everything the child needs is prepared before fork(): after it, only async-signal-safe
  // calls (the test process has threads).
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // NOTE: the test machine's cores are shared; passive OpenMP waiting keeps a busy
  // neighbour from slowing the server by an order of magnitude.
  std::vector<std::string> env_store = {"OMP_WAIT_POLICY=passive"};
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("OMP_WAIT_POLICY=", 0) != 0) env_store.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log_path = sp->log_path_.string();
  const pid_t pid = fork();
  if (pid < 0) {
    *error = "fork failed";
    return nullptr;
  }
  if (pid == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  sp->pid_ = pid;
  const std::regex listening(R"(listening on http://[0-9.]+:([0-9]+))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    const std::string text = sp->log();
    if (std::regex_search(text, m, listening)) {
      sp->port_ = std::stoi(m[1]);
      return sp;
    }
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      sp->pid_ = -1;
      *error = "ninfer serve exited during startup:\n" + text;
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *error = "ninfer serve did not start listening within 120 s:\n" + sp->log();
  return nullptr;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) stop();
  std::error_code ec;
  std::filesystem::remove(log_path_, ec);
}

int ServerProcess::stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int st = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &st, 0);
  pid_ = -1;
  return -1;
}

std::string ServerProcess::log() const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

namespace {

httplib::Headers headers_for(const std::string& key) {
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  return h;
}

Reply to_reply(const httplib::Result& r) {
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.body = r->body;
  out.j = json::parse(out.body, nullptr, false);
  if (out.j.is_discarded()) out.j = nullptr;
  return out;
}

}  // namespace

Reply Client::get(const std::string& path) const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(120, 0);
  return to_reply(c.Get(path.c_str(), headers_for(key_)));
}

Reply Client::post(const std::string& path, const std::string& body, const std::string& content_type) const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(300, 0);
  return to_reply(c.Post(path.c_str(), headers_for(key_), body, content_type.c_str()));
}

StreamReply Client::post_stream(const std::string& path, const json& body,
                                const std::function<bool(const std::string&)>& on_event) const {
  StreamReply out;
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(300, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers_for(key_);
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  std::string buf;
  req.response_handler = [&](const httplib::Response& r) {
    out.status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    out.raw.append(data, n);
    buf.append(data, n);
    size_t pos;
    while ((pos = buf.find("\n\n")) != std::string::npos) {
      const std::string ev = buf.substr(0, pos);
      buf.erase(0, pos + 2);
      if (ev.rfind("data: ", 0) != 0) continue;  // SSE comments (keep-alives)
      out.events.push_back(ev.substr(6));
      if (on_event && !on_event(out.events.back())) {
        out.aborted = true;
        return false;
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  c.send(req, res, err);
  if (out.status == 0 && err == httplib::Error::Success) out.status = res.status;
  return out;
}

double Client::metric(const std::string& name_with_labels) const {
  Reply r = get("/metrics");
  std::istringstream in(r.body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name_with_labels + " ", 0) == 0) return std::stod(line.substr(name_with_labels.size() + 1));
  }
  return NAN;
}

void stop_server(std::unique_ptr<ServerProcess>& server) {
  if (!server) return;
  const std::string log = server->log();
  EXPECT_EQ(server->stop(), 0) << "SIGTERM should end the server cleanly:\n" << log;
  server.reset();
}

void print_log_if_failed(const ServerProcess* server) {
  if (!server || !::testing::Test::HasFailure()) return;
  const std::string log = server->log();
  std::cerr << "server log (tail):\n" << log.substr(log.size() > 4000 ? log.size() - 4000 : 0) << "\n";
}

std::string stream_text(const StreamReply& r) {
  std::string text;
  for (const std::string& e : r.events) {
    if (e == "[DONE]") continue;
    json j = json::parse(e, nullptr, false);
    if (j.is_discarded() || !j.contains("choices")) continue;
    for (const json& ch : j["choices"]) {
      if (ch.contains("delta") && ch["delta"].contains("content") && ch["delta"]["content"].is_string())
        text += ch["delta"]["content"].get<std::string>();
      if (ch.contains("text") && ch["text"].is_string()) text += ch["text"].get<std::string>();
    }
  }
  return text;
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

}  // namespace ninfer::test
