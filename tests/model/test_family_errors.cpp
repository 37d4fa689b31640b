// Bad checkpoints of the new families: an expert count in config.json that does not match the
// tensors, and a wrong-typed family field, each an error naming the file, field or tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"
#include "model/model.h"
#include "test_paths.h"

namespace ninfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A copy of tests/data/tiny/<name> with config.json edited by `edit`.
fs::path edited_copy(const std::string& name, const std::function<void(json&)>& edit) {
  const fs::path src = test::test_data_dir() / "tiny" / name;
  const fs::path dst = fs::temp_directory_path() / ("ninfer_family_errors_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::create_directories(dst);
  fs::copy_file(src / "model.safetensors", dst / "model.safetensors");
  json c = json::parse(read_file(src / "config.json"));
  edit(c);
  std::ofstream(dst / "config.json") << c.dump(2);
  return dst;
}

std::string error_of(const fs::path& dir) {
  try {
    load_model(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FamilyErrors, ExpertCountMustMatchTheTensors) {
  // mixtral has 4 experts: a config saying 3 or 5 disagrees with the router's [4, hidden] first.
  for (int n : {3, 5}) {
    std::string e = error_of(edited_copy("mixtral", [n](json& c) { c["num_local_experts"] = n; }));
    EXPECT_NE(e.find("tensor 'model.layers.0.block_sparse_moe.gate.weight' has shape"), std::string::npos) << e;
    EXPECT_NE(e.find("but the config implies [" + std::to_string(n) + ", 128]"), std::string::npos) << e;
    EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  }
}

TEST(FamilyErrors, WrongTypesNameTheField) {
  std::string e = error_of(edited_copy("gemma2", [](json& c) { c["query_pre_attn_scalar"] = "big"; }));
  EXPECT_NE(e.find("field 'query_pre_attn_scalar' must be a number"), std::string::npos) << e;
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  e = error_of(edited_copy("qwen3-moe", [](json& c) { c["mlp_only_layers"] = {7}; }));
  EXPECT_NE(e.find("mlp_only_layers"), std::string::npos) << e;
  e = error_of(edited_copy("llama-rope-yarn", [](json& c) { c["rope_scaling"]["rope_type"] = "yarn2"; }));
  EXPECT_NE(e.find("'yarn2' is not a supported rope type"), std::string::npos) << e;
}

}  // namespace
}  // namespace ninfer
