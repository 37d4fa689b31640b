// Where tests find their inputs. ../shared (reference models, corpora) is optional: tests
// that need it call NINFER_REQUIRE_SHARED() and skip with a message when it is absent.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace ninfer::test {

std::filesystem::path shared_dir();      // ../shared beside the checkout (may not exist)
std::filesystem::path model_dir(const std::string& name);  // shared_dir()/models/name
std::filesystem::path test_data_dir();   // tests/data in the source tree
std::filesystem::path ninfer_binary();   // build/bin/ninfer
bool have_shared();

// Runs a shell command, captures stdout (and stderr if merge_stderr), returns exit status.
int run_command(const std::string& cmd, std::string* output, bool merge_stderr = false);

}  // namespace ninfer::test

#define NINFER_REQUIRE_SHARED()                                                          \
  do {                                                                                   \
    if (!::ninfer::test::have_shared())                                                  \
      GTEST_SKIP() << "../shared not found at " << ::ninfer::test::shared_dir()          \
                   << " (reference models and corpora); skipping";                       \
  } while (0)

#define NINFER_REQUIRE_MODEL(name)                                                       \
  do {                                                                                   \
    if (!std::filesystem::exists(::ninfer::test::model_dir(name) / "config.json"))       \
      GTEST_SKIP() << "reference model " << ::ninfer::test::model_dir(name)              \
                   << " not found; skipping";                                            \
  } while (0)
