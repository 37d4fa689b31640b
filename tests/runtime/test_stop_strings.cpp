// Stop-string hold-back: exactly the text that could still grow into a stop string waits.
#include <gtest/gtest.h>

#include "runtime/stop_strings.h"

namespace ninfer {
namespace {

TEST(StopStrings, HoldsBackLongestPrefixSuffix) {
  const std::vector<std::string> stops = {"</answer>", "\n\nUser:"};
  EXPECT_EQ(stop_string_holdback("The result is 4", stops), 0u);
  EXPECT_EQ(stop_string_holdback("The result is 4</", stops), 2u);
  EXPECT_EQ(stop_string_holdback("The result is 4</answer", stops), 8u);
  EXPECT_EQ(stop_string_holdback("done\n\nUs", stops), 4u);
  EXPECT_EQ(stop_string_holdback("done\n", stops), 1u);
  EXPECT_EQ(stop_string_holdback("", stops), 0u);
  // A full stop string is found by the caller's search, not held back.
  EXPECT_EQ(stop_string_holdback("x</answer>", stops), 0u);
  EXPECT_EQ(stop_string_holdback("anything", {}), 0u);
}

}  // namespace
}  // namespace ninfer
