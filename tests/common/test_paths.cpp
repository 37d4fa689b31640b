#include "test_paths.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>

namespace ninfer::test {

std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("NINFER_SHARED_DIR")) return env;
  return NINFER_SHARED_DIR;
}
std::filesystem::path model_dir(const std::string& name) { return shared_dir() / "models" / name; }
std::filesystem::path test_data_dir() {
  // NINFER_TEST_DATA (environment) overrides the build's path, for binaries run from another checkout.
  if (const char* env = std::getenv("NINFER_TEST_DATA")) return env;
  return NINFER_TEST_DATA;
}
std::filesystem::path ninfer_binary() { return NINFER_BIN; }
bool have_shared() { return std::filesystem::exists(shared_dir() / "models"); }

int run_command(const std::string& cmd, std::string* output, bool merge_stderr) {
  std::string full = cmd + (merge_stderr ? " 2>&1" : "");
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf;
  size_t n;
  if (output) output->clear();
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) {
    if (output) output->append(buf.data(), n);
  }
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace ninfer::test
