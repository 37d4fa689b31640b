// env_switch: the values it takes, and the error for any other.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/env.h"
#include "core/error.h"

namespace ninfer {
namespace {

constexpr const char* kVar = "NINFER_TEST_ENV_SWITCH";

struct EnvSwitch : ::testing::Test {
  void TearDown() override { unsetenv(kVar); }
};

TEST_F(EnvSwitch, UnsetAndEmptyGiveTheDefault) {
  unsetenv(kVar);
  EXPECT_TRUE(env_switch(kVar));
  EXPECT_FALSE(env_switch(kVar, false));
  setenv(kVar, "", 1);
  EXPECT_TRUE(env_switch(kVar));
  EXPECT_FALSE(env_switch(kVar, false));
}

TEST_F(EnvSwitch, ZeroAndOne) {
  setenv(kVar, "0", 1);
  EXPECT_FALSE(env_switch(kVar));
  EXPECT_FALSE(env_switch(kVar, false));
  setenv(kVar, "1", 1);
  EXPECT_TRUE(env_switch(kVar));
  EXPECT_TRUE(env_switch(kVar, false));
}

TEST_F(EnvSwitch, AnyOtherValueIsAnErrorNamingTheVariable) {
  for (const char* bad : {"yes", "true", "2", "00", " 1", "off"}) {
    setenv(kVar, bad, 1);
    try {
      env_switch(kVar);
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), std::string(kVar) + " must be 0 or 1, got '" + bad + "'");
    }
  }
}

}  // namespace
}  // namespace ninfer
