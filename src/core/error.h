// Errors. Inside the engine, bad input is reported by throwing ninfer::Error with a message
// that names what is wrong (file, tensor, field, flag, request part). Entry points (the CLI,
// each server request) catch it and turn it into a message and a non-zero exit / HTTP error.
// NINFER_CHECK is for internal invariants (bugs), not for user input.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ninfer {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ninfer

#define NINFER_CHECK(cond, ...)                                                         \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      throw ::ninfer::Error(fmt::format("internal check failed at {}:{}: {}: {}",       \
                                        __FILE__, __LINE__, #cond,                      \
                                        fmt::format(__VA_ARGS__)));                     \
    }                                                                                   \
  } while (0)
