// Stop strings during streaming: text that could still become a stop string is held back
// until the next token decides it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {

// Length of the longest suffix of `text` that is a proper prefix of some stop string.
size_t stop_string_holdback(std::string_view text, const std::vector<std::string>& stops);

}  // namespace ninfer
