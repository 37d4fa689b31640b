// load_generation_config: eos_token_id as int or list, fallback to config.json, missing
// files, and errors naming the file and field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/error.h"
#include "test_paths.h"
#include "text/generation_config.h"

namespace ninfer {
namespace {

TEST(GenerationConfig, ReferenceModels) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  NINFER_REQUIRE_MODEL("stories260k");
  GenerationConfig q = load_generation_config(test::model_dir("ref-qwen3-d256"));
  EXPECT_EQ(q.eos_ids, (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(q.bos_id, std::nullopt);  // null in both files
  GenerationConfig s = load_generation_config(test::model_dir("stories260k"));
  EXPECT_EQ(s.eos_ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(s.bos_id, 1);
}

class GenerationConfigFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ninfer_gen_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::filesystem::path dir_;
};

TEST_F(GenerationConfigFiles, MissingFilesGiveAnEmptyConfig) {
  GenerationConfig g = load_generation_config(dir_);
  EXPECT_TRUE(g.eos_ids.empty());
  EXPECT_EQ(g.bos_id, std::nullopt);
}

TEST_F(GenerationConfigFiles, IntListAndDuplicates) {
  write("generation_config.json", R"({"eos_token_id": 7, "bos_token_id": 3})");
  EXPECT_EQ(load_generation_config(dir_).eos_ids, (std::vector<int32_t>{7}));
  EXPECT_EQ(load_generation_config(dir_).bos_id, 3);
  write("generation_config.json", R"({"eos_token_id": [5, 9, 5]})");
  EXPECT_EQ(load_generation_config(dir_).eos_ids, (std::vector<int32_t>{5, 9}));
}

TEST_F(GenerationConfigFiles, FallsBackToConfigJson) {
  write("config.json", R"({"eos_token_id": [11, 12], "bos_token_id": 10})");
  EXPECT_EQ(load_generation_config(dir_).eos_ids, (std::vector<int32_t>{11, 12}));
  write("generation_config.json", R"({"eos_token_id": null, "do_sample": false})");
  GenerationConfig g = load_generation_config(dir_);
  EXPECT_EQ(g.eos_ids, (std::vector<int32_t>{11, 12}));
  EXPECT_EQ(g.bos_id, 10);
  write("generation_config.json", R"({"eos_token_id": 4})");
  EXPECT_EQ(load_generation_config(dir_).eos_ids, (std::vector<int32_t>{4}));  // the first file wins
}

TEST_F(GenerationConfigFiles, ErrorsNameFileAndField) {
  write("generation_config.json", "{ not json");
  try {
    load_generation_config(dir_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos) << e.what();
  }
  write("generation_config.json", R"({"eos_token_id": "</s>"})");
  try {
    load_generation_config(dir_);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("generation_config.json"), std::string::npos) << m;
    EXPECT_NE(m.find("eos_token_id"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace ninfer
