// Quantised weights have no GPU kernels yet (issue 27): the CUDA backend refuses them where it
// receives the weights, naming the tensor and its format, and make_backend with --device auto
// falls back to the CPU while --device cuda is an error saying why.
#include <gtest/gtest.h>

#include "core/error.h"
#include "cuda_test_util.h"
#include "model/model.h"
#include "runtime/backend_factory.h"
#include "test_paths.h"

namespace ninfer {
namespace {

TEST(CudaQuant, QuantisedWeightsRefusedNamingTensorAndFormat) {
  NINFER_REQUIRE_GPU();
  const auto dir = test::test_data_dir() / "tiny" / "llama-rope-default";
  auto m = load_model(dir, 0, parse_weights_option("int4"));
  std::string msg;
  try {
    make_cuda_backend(*m);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("no kernels for quantised weights yet: tensor 'model.layers.0.self_attn.q_proj.weight' is held as int4"),
            std::string::npos)
      << msg;
  try {
    make_backend(*m, "cuda", "bf16", 0, true);
    ADD_FAILURE() << "--device cuda accepted quantised weights";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("quantised weights have no CUDA kernels yet"), std::string::npos) << e.what();
  }
  EXPECT_EQ(make_backend(*m, "auto", "bf16", 0, true)->name(), "cpu");
}

}  // namespace
}  // namespace ninfer
