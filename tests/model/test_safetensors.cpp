// safetensors reader and weight binding: valid files load; truncated files, lying headers,
// missing and misshapen tensors give errors naming the file and tensor.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "core/error.h"
#include "model/model.h"
#include "test_paths.h"

namespace ninfer {
namespace {

namespace fs = std::filesystem;

struct Tensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;  // raw data
};

// Writes a safetensors file; header_override replaces the JSON header when non-empty.
void write_safetensors(const fs::path& p, const std::vector<Tensor>& ts, const std::string& header_override = "",
                       size_t truncate_to = 0) {
  std::string header = "{";
  std::string data;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    std::string shape;
    for (size_t j = 0; j < t.shape.size(); ++j) shape += (j ? "," : "") + std::to_string(t.shape[j]);
    header += (i ? "," : "") + ("\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape +
                                "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
                                std::to_string(data.size() + t.bytes.size()) + "]}");
    data += t.bytes;
  }
  header += "}";
  if (!header_override.empty()) header = header_override;
  std::string file(8, '\0');
  uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header + data;
  if (truncate_to) file.resize(truncate_to);
  std::ofstream(p, std::ios::binary) << file;
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ninfer_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string expect_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

TEST(Safetensors, ReadsF32Bf16F16) {
  fs::path d = temp_dir("ok");
  float f[3] = {1.0f, -2.5f, 3.25f};
  uint16_t bf[2] = {0x3f80, 0xc000};  // 1.0, -2.0
  uint16_t h[2] = {0x3c00, 0x4000};   // 1.0, 2.0
  write_safetensors(d / "model.safetensors",
                    {{"a", "F32", {3}, std::string((char*)f, 12)},
                     {"b", "BF16", {1, 2}, std::string((char*)bf, 4)},
                     {"c", "F16", {2}, std::string((char*)h, 4)}});
  auto s = TensorStore::open(d);
  ASSERT_EQ(s->tensors().size(), 3u);
  const TensorInfo* b = s->find("b");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->dtype, DType::BF16);
  EXPECT_EQ(b->shape_str(), "[1, 2]");
  float out[2];
  convert_to_f32(b->dtype, b->data, out, 2);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  convert_to_f32(DType::F16, s->find("c")->data, out, 2);
  EXPECT_EQ(out[1], 2.0f);
}

TEST(Safetensors, TruncatedFileNamesFileAndTensor) {
  fs::path d = temp_dir("trunc");
  std::string data(400, '\1');
  write_safetensors(d / "model.safetensors", {{"w", "F32", {100}, data}}, "", 8 + 80 + 100);
  std::string msg = expect_error([&] { TensorStore::open(d); });
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
}

TEST(Safetensors, HeaderLengthPastEnd) {
  fs::path d = temp_dir("hlen");
  write_safetensors(d / "model.safetensors", {{"w", "F32", {1}, std::string(4, '\0')}}, "", 20);
  std::string msg = expect_error([&] { TensorStore::open(d); });
  EXPECT_NE(msg.find("header length"), std::string::npos) << msg;
}

TEST(Safetensors, HeaderThatLiesAboutSize) {
  fs::path d = temp_dir("lie");
  write_safetensors(d / "model.safetensors", {},
                    R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})");
  std::string msg = expect_error([&] { TensorStore::open(d); });
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
}

// A shape whose byte count wraps around 2^64 ([2^32, 2^32] of F32 is 2^66 bytes, 0 mod 2^64)
// matched an empty data_offsets span (and TensorInfo::numel() overflowed: undefined behaviour).
TEST(Safetensors, ShapeWhoseSizeWrapsAround) {
  fs::path d = temp_dir("wrap");
  write_safetensors(d / "model.safetensors", {},
                    R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})");
  std::string msg = expect_error([&] { TensorStore::open(d); });
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("more bytes than any file"), std::string::npos) << msg;
  write_safetensors(d / "model.safetensors", {},
                    R"({"w":{"dtype":"BF16","shape":[4611686018427387904,4],"data_offsets":[0,0]}})");
  msg = expect_error([&] { TensorStore::open(d); });
  EXPECT_NE(msg.find("more bytes than any file"), std::string::npos) << msg;
}

// Found by fuzz_safetensors: a number past double range in the header (1e400) made nlohmann
// throw out_of_range, not parse_error, and it escaped as a foreign exception.
TEST(Safetensors, NumberOutOfRangeInHeader) {
  fs::path d = temp_dir("bignum");
  write_safetensors(d / "model.safetensors", {},
                    R"({"__metadata__":{"x":1e400},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
  std::string msg = expect_error([&] { TensorStore::open(d); });
  EXPECT_NE(msg.find("invalid safetensors JSON header"), std::string::npos) << msg;
}

TEST(Safetensors, BadJsonHeader) {
  fs::path d = temp_dir("badjson");
  write_safetensors(d / "model.safetensors", {}, R"({"w":{"dtype":)");
  std::string msg = expect_error([&] { TensorStore::open(d); });
  EXPECT_NE(msg.find("invalid safetensors JSON header"), std::string::npos) << msg;
}

TEST(Safetensors, ShardedIndexMissingShard) {
  fs::path d = temp_dir("shard");
  std::ofstream(d / "model.safetensors.index.json")
      << R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})";
  write_safetensors(d / "model-00001-of-00002.safetensors", {{"a", "F32", {1}, std::string(4, '\0')}});
  std::string msg = expect_error([&] { TensorStore::open(d); });
  EXPECT_NE(msg.find("model-00002-of-00002.safetensors"), std::string::npos) << msg;
}

// Copies a reference model with one shard replaced, to check errors on real layouts.
fs::path copy_model(const std::string& name, const std::string& tag) {
  fs::path d = temp_dir(tag);
  for (const auto& e : fs::directory_iterator(test::model_dir(name))) fs::copy(e.path(), d / e.path().filename());
  return d;
}

TEST(ModelLoad, TruncatedShardOfRealModel) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  fs::path d = copy_model("ref-qwen3-d256", "realtrunc");
  fs::path shard = d / "model-00003-of-00006.safetensors";
  fs::resize_file(shard, fs::file_size(shard) / 2);
  std::string msg = expect_error([&] { load_model(d); });
  EXPECT_NE(msg.find("model-00003-of-00006.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  fs::remove_all(d);
}

TEST(ModelLoad, WrongTensorShape) {
  NINFER_REQUIRE_MODEL("stories260k");
  fs::path d = copy_model("stories260k", "shape");
  // Claim 4 layers in config: fine (extra tensors ignored). Claim a larger ffn: shapes mismatch.
  std::string cfg = read_file(d / "config.json");
  cfg.replace(cfg.find("\"intermediate_size\": 172"), 24, "\"intermediate_size\": 174");
  std::ofstream(d / "config.json") << cfg;
  std::string msg = expect_error([&] { load_model(d); });
  EXPECT_NE(msg.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[172, 64]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  fs::remove_all(d);
}

TEST(ModelLoad, MissingTensor) {
  NINFER_REQUIRE_MODEL("stories260k");
  fs::path d = copy_model("stories260k", "missing");
  std::string cfg = read_file(d / "config.json");
  cfg.replace(cfg.find("\"num_hidden_layers\": 5"), 22, "\"num_hidden_layers\": 6");
  std::ofstream(d / "config.json") << cfg;
  std::string msg = expect_error([&] { load_model(d); });
  EXPECT_NE(msg.find("model.layers.5."), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  fs::remove_all(d);
}

TEST(ModelLoad, ReferenceModelsBind) {
  NINFER_REQUIRE_SHARED();
  auto m = load_model(test::model_dir("ref-llama-d128"));
  EXPECT_EQ(m->weights.layers.size(), 6u);
  EXPECT_EQ(m->weights.lm_head.t, m->weights.embed.t);  // tied
  EXPECT_EQ(m->weight_bytes, size_t(26221056) * 2);  // bf16
}

}  // namespace
}  // namespace ninfer
