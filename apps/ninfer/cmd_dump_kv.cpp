// `ninfer dump-kv`: runs a text through the model and writes the raw K and V rows it stores
// (K after q/k-norm and rope, before any format rotation) for codec measurements:
//   OUT/k.f32, OUT/v.f32   little-endian float32, [n_rows, head_dim], rows ordered by
//                          (layer, position, kv head)
//   OUT/meta.json          {"model", "head_dim", "n_rows", "n_layers", "n_kv_heads", "tokens", "file"}
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/ninfer/command.h"
#include "core/error.h"
#include "model/config.h"

namespace ninfer::app {
namespace {

struct DumpCmd {
  EngineFlags ef;
  std::string file, out;
  int tokens = 1024;
};

RegisterCommand reg("dump-kv", "write the raw K/V rows of a text's forward pass (for kv-bench --real)",
                    [](CLI::App* app) {
  auto c = std::make_shared<DumpCmd>();
  c->ef.add(app, false);
  app->add_option("-f,--file", c->file, "text file")->required();
  app->add_option("--tokens", c->tokens, "tokens of the file to run")->capture_default_str();
  app->add_option("-o,--out", c->out, "output directory")->required();
  app->callback([c]() {
    if (c->tokens < 1) fail("--tokens must be >= 1, got {}", c->tokens);
    EngineOptions o = c->ef.options();
    o.kv_dtype = "f32";
    o.max_context = c->tokens;
    std::string text = read_file(c->file);
    auto eng = Engine::create(c->ef.model_dir, o);
    std::vector<int32_t> toks = eng->tokenizer().encode(text, true);
    if (int64_t(toks.size()) < c->tokens) fail("{}: only {} tokens, --tokens is {}", c->file, toks.size(), c->tokens);
    toks.resize(size_t(c->tokens));
    const ModelConfig& cfg = eng->config();
    std::filesystem::create_directories(c->out);
    std::ofstream kf(std::filesystem::path(c->out) / "k.f32", std::ios::binary);
    std::ofstream vf(std::filesystem::path(c->out) / "v.f32", std::ios::binary);
    if (!kf || !vf) fail("cannot write to {}", c->out);
    const size_t row_bytes = size_t(cfg.kv_dim()) * 4;
    // Rows arrive per layer and position; buffer per layer so the files are in
    // (layer, position, head) order even when prefill runs in chunks.
    std::vector<std::vector<float>> kbuf(size_t(cfg.n_layers)), vbuf(size_t(cfg.n_layers));
    eng->backend().set_kv_observer([&](int layer, int pos, const float* k, const float* v) {
      auto& kb = kbuf[size_t(layer)];
      auto& vb = vbuf[size_t(layer)];
      kb.resize(std::max(kb.size(), size_t(pos + 1) * cfg.kv_dim()));
      vb.resize(kb.size());
      std::memcpy(kb.data() + size_t(pos) * cfg.kv_dim(), k, row_bytes);
      std::memcpy(vb.data() + size_t(pos) * cfg.kv_dim(), v, row_bytes);
    });
    int32_t seq = eng->new_sequence();
    std::vector<float> logits;
    eng->prefill(seq, toks, logits);
    eng->free_sequence(seq);
    eng->backend().set_kv_observer(nullptr);
    for (int l = 0; l < cfg.n_layers; ++l) {
      kf.write(reinterpret_cast<const char*>(kbuf[size_t(l)].data()), std::streamsize(kbuf[size_t(l)].size() * 4));
      vf.write(reinterpret_cast<const char*>(vbuf[size_t(l)].data()), std::streamsize(vbuf[size_t(l)].size() * 4));
    }
    const int64_t n_rows = int64_t(cfg.n_layers) * c->tokens * cfg.n_kv_heads;
    nlohmann::json meta = {{"model", eng->model().dir.filename().string()}, {"head_dim", cfg.head_dim},
                           {"n_rows", n_rows}, {"n_layers", cfg.n_layers}, {"n_kv_heads", cfg.n_kv_heads},
                           {"tokens", c->tokens}, {"file", c->file}};
    std::ofstream(std::filesystem::path(c->out) / "meta.json") << meta.dump(2) << "\n";
    std::printf("wrote %lld K and V rows of head_dim %d to %s\n", (long long)n_rows, cfg.head_dim, c->out.c_str());
  });
});

}  // namespace
}  // namespace ninfer::app
