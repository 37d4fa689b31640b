#include "core/env.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace ninfer {

bool env_switch(const char* name, bool unset_value) {
  const char* e = std::getenv(name);
  if (!e || !*e) return unset_value;
  if (std::strcmp(e, "1") == 0) return true;
  if (std::strcmp(e, "0") == 0) return false;
  fail("{} must be 0 or 1, got '{}'", name, e);
}

}  // namespace ninfer
