// quantization_config parsing and the checkpoint loaders (model/quant_checkpoint.h): tensors
// packed by the independent helpers of quant_test_util.h (AWQ's nibble order, GPTQ's +1 zero
// convention, desc_act g_idx, fp8 block / channel / tensor scales) load to exactly the helper's
// dequantised values; unsupported methods, bit widths and layouts are refused naming the field.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/config.h"
#include "model/model.h"
#include "quant_test_util.h"

namespace ninfer {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

ModelConfig config_with(const std::string& quant_json) {
  return parse_model_config(test::tiny_config_json(test::TinySpec{}, quant_json), "config.json");
}

test::Mat random_mat(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  test::Mat m{rows, cols, std::vector<float>(size_t(rows * cols))};
  for (float& v : m.w) v = nd(rng);
  m.w[3] = 0.9f;  // an outlier
  return m;
}

// Writes the module's tensors, loads them through the config's method, compares exactly.
void expect_loads_exactly(const std::string& quant_json, const test::QuantOut& o, const char* what) {
  SCOPED_TRACE(what);
  const ModelConfig c = config_with(quant_json);
  ASSERT_TRUE(bool(c.quant));
  const fs::path d = test::fresh_dir("quant_load");
  test::write_st(d / "m.safetensors", o.tensors);
  auto store = TensorStore::open_file(d / "m.safetensors");
  auto q = c.quant.method->load(c.quant, *store, "x", o.dequant.rows, o.dequant.cols);
  ASSERT_NE(q, nullptr);
  q->validate();
  std::vector<float> got(o.dequant.w.size(), -777.0f);
  q->format->dequant_rows(*q, 0, q->rows, got.data());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], o.dequant.w[i]) << "element " << i;
  fs::remove_all(d);
}

TEST(QuantCheckpoint, Fp8BlockChannelTensor) {
  const test::Mat m = random_mat(200, 136, 1);  // ragged 128-blocks on both sides
  expect_loads_exactly(R"({"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})",
                       test::quant_fp8("x", m, 128, 128, false, "weight_scale_inv"), "fp8 block");
  expect_loads_exactly(R"({"quant_method": "fp8", "weight_block_size": [128, 128]})",
                       test::quant_fp8("x", m, 128, 128, false, "weight_scale_inv", "BF16"), "fp8 block, bf16 scales");
  expect_loads_exactly(R"({"quant_method": "fp8", "activation_scheme": "static"})",
                       test::quant_fp8("x", m, 0, 0, false, "weight_scale"), "fp8 per tensor");
  expect_loads_exactly(R"({"quant_method": "fp8"})", test::quant_fp8("x", m, 0, 0, true, "weight_scale"),
                       "fp8 per channel");
}

std::string ct_json(const std::string& strategy, const std::string& extra = "") {
  return R"({"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
    "symmetric": true, "dynamic": false, "strategy": ")" + strategy + "\"" + extra + R"(},
    "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}}}})";
}

TEST(QuantCheckpoint, CompressedTensorsFp8) {
  const test::Mat m = random_mat(64, 96, 2);
  expect_loads_exactly(ct_json("channel"), test::quant_fp8("x", m, 0, 0, true, "weight_scale"), "channel");
  expect_loads_exactly(ct_json("tensor"), test::quant_fp8("x", m, 0, 0, false, "weight_scale"), "tensor");
  expect_loads_exactly(ct_json("block", R"(, "block_structure": [32, 64])"),
                       test::quant_fp8("x", m, 32, 64, false, "weight_scale"), "block");
}

TEST(QuantCheckpoint, AwqGemm) {
  const test::Mat m = random_mat(48, 256, 3);
  expect_loads_exactly(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true, "version": "gemm"})",
                       test::quant_awq("x", m, 128), "awq g128");
  expect_loads_exactly(R"({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true, "version": "GEMM"})",
                       test::quant_awq("x", m, 64), "awq g64");
}

// AWQ's order, by hand: AutoAWQ packs column order[i] (0 2 4 6 1 3 5 7) into nibble i, so the
// word 0x76543210 (nibble i = i) holds columns 0..7 = 0, 4, 1, 5, 2, 6, 3, 7.
TEST(QuantCheckpoint, AwqNibbleOrderByHand) {
  std::vector<uint32_t> qw(8, 0x76543210u), qz(1, 0u);
  std::vector<uint16_t> sc(8, f32_to_f16(1.0f));
  const fs::path d = test::fresh_dir("awq_hand");
  test::write_st(d / "m.safetensors", {test::st_tensor("x.qweight", "I32", {8, 1}, qw),
                                       test::st_tensor("x.qzeros", "I32", {1, 1}, qz),
                                       test::st_tensor("x.scales", "F16", {1, 8}, sc)});
  const ModelConfig c = config_with(R"({"quant_method": "awq", "bits": 4, "group_size": 8, "zero_point": true, "version": "gemm"})");
  auto store = TensorStore::open_file(d / "m.safetensors");
  auto q = c.quant.method->load(c.quant, *store, "x", 8, 8);
  std::vector<float> w(64);
  q->format->dequant_rows(*q, 0, 8, w.data());
  const float want[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int o = 0; o < 8; ++o)
    for (int k = 0; k < 8; ++k) EXPECT_EQ(w[size_t(o * 8 + k)], want[o]) << o << "," << k;
  fs::remove_all(d);
}

TEST(QuantCheckpoint, GptqSymAsymDescActV1V2) {
  const test::Mat m = random_mat(40, 256, 4);
  for (int64_t g : {32, 64, 128}) {
    const std::string gs = std::to_string(g);
    expect_loads_exactly(R"({"quant_method": "gptq", "bits": 4, "group_size": )" + gs + R"(, "desc_act": false, "sym": true})",
                         test::quant_gptq("x", m, g, true, false, true), ("sym g" + gs).c_str());
    expect_loads_exactly(R"({"quant_method": "gptq", "bits": 4, "group_size": )" + gs + R"(, "desc_act": false, "sym": false})",
                         test::quant_gptq("x", m, g, false, false, true), ("asym g" + gs).c_str());
    expect_loads_exactly(R"({"quant_method": "gptq", "bits": 4, "group_size": )" + gs + R"(, "desc_act": true, "sym": false})",
                         test::quant_gptq("x", m, g, false, true, true), ("asym desc_act g" + gs).c_str());
  }
  expect_loads_exactly(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true, "sym": true, "checkpoint_format": "gptq_v2"})",
                       test::quant_gptq("x", m, 128, true, true, false), "v2 sym desc_act");
}

// v1's "+1": a true zero of 0 is stored as 15 (0 - 1 mod 16) and must read back as 0.
TEST(QuantCheckpoint, GptqV1ZeroWrapsModulo16) {
  test::Mat m{8, 8, std::vector<float>(64)};
  for (int64_t o = 0; o < 8; ++o)
    for (int64_t k = 0; k < 8; ++k) m.w[size_t(o * 8 + k)] = 0.1f * float(k + 1);  // all positive: zero 0
  test::QuantOut o = test::quant_gptq("x", m, 8, false, false, true);
  uint32_t qz;
  std::memcpy(&qz, o.tensors[1].bytes.data(), 4);
  EXPECT_EQ(qz, 0xFFFFFFFFu);
  expect_loads_exactly(R"({"quant_method": "gptq", "bits": 4, "group_size": 8, "desc_act": false, "sym": false})", o,
                       "zero 0 stored as 15");
}

TEST(QuantCheckpoint, RefusedMethodsAndFields) {
  auto cfg_err = [](const std::string& q) { return error_of([&] { config_with(q); }); };
  EXPECT_NE(cfg_err(R"({"quant_method": "bitsandbytes"})").find("'quantization_config.quant_method' 'bitsandbytes' is not supported"),
            std::string::npos);
  EXPECT_NE(cfg_err(R"({"quant_method": "awq", "bits": 8, "group_size": 128})").find("'quantization_config.bits' = 8 is not supported for awq"),
            std::string::npos);
  EXPECT_NE(cfg_err(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"})").find("'quantization_config.version' 'gemv'"),
            std::string::npos);
  EXPECT_NE(cfg_err(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": false})").find("zero_point"),
            std::string::npos);
  EXPECT_NE(cfg_err(R"({"quant_method": "gptq", "bits": 3, "group_size": 128})").find("'quantization_config.bits' = 3"),
            std::string::npos);
  EXPECT_NE(cfg_err(R"({"quant_method": "gptq", "bits": 4, "group_size": 100})").find("group_size' = 100 is not supported"),
            std::string::npos);
  EXPECT_NE(cfg_err(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "checkpoint_format": "marlin"})").find("checkpoint_format' 'marlin'"),
            std::string::npos);
  EXPECT_NE(cfg_err(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "lm_head": true})").find("'quantization_config.lm_head' = true"),
            std::string::npos);
  EXPECT_NE(cfg_err(R"({"quant_method": "fp8", "fmt": "e5m2"})").find("'quantization_config.fmt' 'e5m2'"), std::string::npos);
  EXPECT_NE(cfg_err(R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {}})").find("'quantization_config.format' 'pack-quantized'"),
            std::string::npos);
  EXPECT_NE(cfg_err(ct_json("group")).find("strategy' 'group' is not supported"), std::string::npos);
  // Found by the model_config fuzzer: a block size past int64's range was converted before the check.
  for (const char* bad : {"[1e308, 128]", "[128, -1e308]", "[1073741825, 128]", "[128.5, 128]"})
    EXPECT_NE(cfg_err(std::string(R"({"quant_method": "fp8", "weight_block_size": )") + bad + "}")
                  .find("'quantization_config.weight_block_size' must be two positive integers"),
              std::string::npos)
        << bad;
}

TEST(QuantCheckpoint, RefusedLayouts) {
  const fs::path d = test::fresh_dir("quant_bad");
  auto load_err = [&](const std::string& qj, const std::vector<test::StTensor>& ts, int64_t rows, int64_t cols) {
    test::write_st(d / "m.safetensors", ts);
    const ModelConfig c = config_with(qj);
    auto store = TensorStore::open_file(d / "m.safetensors");
    return error_of([&] { c.quant.method->load(c.quant, *store, "x", rows, cols)->validate(); });
  };
  const test::Mat m = random_mat(16, 64, 5);
  const std::string gptq = R"({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": true})";
  // desc_act true without g_idx
  std::vector<test::StTensor> ts = test::quant_gptq("x", m, 32, false, true, true).tensors;
  ts.pop_back();
  EXPECT_NE(load_err(gptq, ts, 16, 64).find("'x.g_idx' is missing"), std::string::npos);
  // group_size that does not divide in_features: the partial group is refused
  EXPECT_NE(load_err(R"({"quant_method": "gptq", "bits": 4, "group_size": 48})", ts, 16, 64).find("group_size 48 does not divide in_features 64"),
            std::string::npos);
  // a non-trivial g_idx with desc_act false
  EXPECT_NE(load_err(R"({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false})",
                     test::quant_gptq("x", m, 32, false, true, true).tensors, 16, 64)
                .find("desc_act false"),
            std::string::npos);
  // qweight of the wrong shape (AWQ's packing read as GPTQ's)
  EXPECT_NE(load_err(gptq, test::quant_awq("x", m, 32).tensors, 16, 64).find("gptq's layout [in / 8, out]"),
            std::string::npos);
  // fp8: scale grid of the wrong shape, a NaN code, a missing scale
  test::QuantOut f = test::quant_fp8("x", m, 8, 8, false, "weight_scale_inv");
  EXPECT_NE(load_err(R"({"quant_method": "fp8", "weight_block_size": [16, 16]})", f.tensors, 16, 64).find("x.weight_scale_inv"),
            std::string::npos);
  f.tensors[0].bytes[5] = char(0x7F);
  EXPECT_NE(load_err(R"({"quant_method": "fp8", "weight_block_size": [8, 8]})", f.tensors, 16, 64).find("element (0, 5) is the e4m3 NaN code"),
            std::string::npos);
  EXPECT_NE(load_err(R"({"quant_method": "fp8"})", {f.tensors[0]}, 16, 64).find("'x.weight_scale' is missing"),
            std::string::npos);
  fs::remove_all(d);
}

// A checkpoint whose lm_head (and any module) is kept dense loads it dense; --weights on an
// already quantised checkpoint is refused; F8 tensors without quantization_config are refused.
TEST(QuantCheckpoint, DenseModulesAndModelLoad) {
  const fs::path root = test::fresh_dir("quant_model");
  int n = 0;
  test::write_tiny_pair(test::TinySpec{}, R"({"quant_method": "gptq", "bits": 4, "group_size": 64, "desc_act": false})",
                        [&](const std::string& base, const test::Mat& m) {
                          if (n++ % 7 == 6) return test::QuantOut{};  // down_proj dense
                          return test::quant_gptq(base, m, 64, false, false, true);
                        },
                        root / "q", root / "d");
  auto model = load_model(root / "q");
  EXPECT_EQ(model->weights.quantised.size(), 12u);  // 2 layers x 6 quantised projections
  EXPECT_TRUE(model->weights.layers[0][Proj::Down].parts[0].w.t != nullptr);
  std::string fmt_name;
  EXPECT_EQ(first_quantised_tensor(*model, &fmt_name), "model.layers.0.self_attn.q_proj.qweight");
  EXPECT_EQ(fmt_name, "int4");
  EXPECT_LT(model->weight_bytes, load_model(root / "d")->weight_bytes / 2);
  EXPECT_NE(error_of([&] { load_model(root / "q", 0, parse_weights_option("int8")); })
                .find("--weights int8: " + (root / "q").string() + "/config.json says the checkpoint is already quantised"),
            std::string::npos);
  // An fp8 checkpoint whose config lost its quantization_config.
  test::write_tiny_pair(test::TinySpec{}, "", [&](const std::string& base, const test::Mat& m) {
    return test::quant_fp8(base, m, 128, 128, false, "weight_scale_inv");
  }, root / "f", root / "fd");
  EXPECT_NE(error_of([&] { load_model(root / "f"); }).find("has dtype F8_E4M3; weights must be F32, F16 or BF16 (quantised weights need config.json's quantization_config"),
            std::string::npos);
  fs::remove_all(root);
}

}  // namespace
}  // namespace ninfer
