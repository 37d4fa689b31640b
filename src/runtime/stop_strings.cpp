#include "runtime/stop_strings.h"

#include <algorithm>

namespace ninfer {

size_t stop_string_holdback(std::string_view text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops) {
    if (s.empty()) continue;
    for (size_t n = std::min(s.size() - 1, text.size()); n > hold; --n) {
      if (text.substr(text.size() - n) == std::string_view(s).substr(0, n)) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

}  // namespace ninfer
