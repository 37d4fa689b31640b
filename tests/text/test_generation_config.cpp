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

TEST_F(GenerationConfigFiles, SamplingFieldOfTheWrongTypeNamesFileAndField) {
  struct Case {
    const char* body;
    const char* part;
  } cases[] = {
      {R"({"temperature": "0.7"})", "\"temperature\" must be a number, got \"0.7\""},
      {R"({"top_p": 1.5})", "\"top_p\" must be in (0, 1], got 1.5"},
      {R"({"top_k": 2.5})", "\"top_k\" must be an integer"},
      {R"({"top_k": -1})", "\"top_k\" must be >= 0"},
      {R"({"min_p": [0.1]})", "\"min_p\" must be a number"},
      {R"({"repetition_penalty": 0})", "\"repetition_penalty\" must be > 0"},
      {R"({"do_sample": "yes"})", "\"do_sample\" must be true or false"},
  };
  for (const Case& c : cases) {
    write("generation_config.json", c.body);
    try {
      load_generation_config(dir_);
      ADD_FAILURE() << "no error for " << c.body;
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("generation_config.json"), std::string::npos) << m;
      EXPECT_NE(m.find(c.part), std::string::npos) << m;
    }
  }
  // Null means absent.
  write("generation_config.json", R"({"temperature": null, "do_sample": null})");
  EXPECT_TRUE(load_generation_config(dir_).sampling.empty());
}

}  // namespace
}  // namespace ninfer

namespace ninfer {
namespace {

// tests/data/generation_configs/qwen3-style: Qwen3's generation_config.json (do_sample true,
// temperature 0.6, top_k 20, top_p 0.95) plus min_p and repetition_penalty.
struct Knobs {
  float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f, repetition_penalty = 1.0f;
  int top_k = 0;
  SamplingKnobs knobs() { return SamplingKnobs{&temperature, &top_p, &top_k, &min_p, &repetition_penalty}; }
};

TEST(GenerationConfigSampling, DefaultsAreTaken) {
  auto dir = test::test_data_dir() / "generation_configs" / "qwen3-style";
  GenerationConfig g = load_generation_config(dir);
  EXPECT_EQ(g.sampling.file, (dir / "generation_config.json").string());
  EXPECT_EQ(g.sampling.do_sample, true);
  Knobs k;
  std::vector<std::string> taken = apply_sampling_defaults(g.sampling, k.knobs());
  EXPECT_FLOAT_EQ(k.temperature, 0.6f);
  EXPECT_FLOAT_EQ(k.top_p, 0.95f);
  EXPECT_EQ(k.top_k, 20);
  EXPECT_FLOAT_EQ(k.min_p, 0.05f);
  EXPECT_FLOAT_EQ(k.repetition_penalty, 1.1f);
  EXPECT_EQ(taken, (std::vector<std::string>{"temperature=0.6", "top_p=0.95", "top_k=20", "min_p=0.05",
                                             "repetition_penalty=1.1"}));
}

TEST(GenerationConfigSampling, ExplicitSettingsWin) {
  GenerationConfig g = load_generation_config(test::test_data_dir() / "generation_configs" / "qwen3-style");
  Knobs k;
  k.temperature = 0.0f;  // e.g. --temp 0 on the command line: stays greedy
  k.top_k = 5;
  SamplingKnobs kn = k.knobs();
  kn.set_temperature = kn.set_top_k = true;
  std::vector<std::string> taken = apply_sampling_defaults(g.sampling, kn);
  EXPECT_FLOAT_EQ(k.temperature, 0.0f);
  EXPECT_EQ(k.top_k, 5);
  EXPECT_FLOAT_EQ(k.top_p, 0.95f);
  EXPECT_EQ(taken.size(), 3u);
}

TEST(GenerationConfigSampling, DoSampleFalseMeansGreedyAndTrueMeansTemperatureOne) {
  SamplingDefaults greedy;
  greedy.do_sample = false;
  greedy.temperature = 0.7f;  // ignored by transformers when do_sample is false
  Knobs k;
  k.temperature = 1.0f;  // the server's OpenAI default
  EXPECT_EQ(apply_sampling_defaults(greedy, k.knobs()), (std::vector<std::string>{"temperature=0 (do_sample=false: greedy)"}));
  EXPECT_FLOAT_EQ(k.temperature, 0.0f);
  SamplingDefaults sample;
  sample.do_sample = true;
  Knobs c;  // the CLI's greedy default
  apply_sampling_defaults(sample, c.knobs());
  EXPECT_FLOAT_EQ(c.temperature, 1.0f);
  EXPECT_TRUE(apply_sampling_defaults(SamplingDefaults{}, c.knobs()).empty());
}

TEST(GenerationConfigSampling, ReferenceModelIsGreedy) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  EXPECT_EQ(load_generation_config(test::model_dir("ref-qwen3-d256")).sampling.do_sample, false);
}

}  // namespace
}  // namespace ninfer
