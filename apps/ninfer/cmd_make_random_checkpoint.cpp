// `ninfer make-random-checkpoint`: writes a random-weight checkpoint of a real model shape
// (default: Llama-3-8B) in the Hugging Face layout, for speed measurements where the weights'
// values do not matter: config.json, one bf16 model.safetensors, and the tokenizer files
// copied from another model directory (token ids beyond that tokenizer's vocabulary are
// never produced by it, which is fine for benchmarks that feed random ids).
//
// Values: model/random_weights.h (the same bytes `bench --random-weights` makes in memory).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/ninfer/command.h"
#include "core/dtype.h"
#include "core/error.h"
#include "model/config.h"
#include "model/family.h"
#include "model/model.h"
#include "model/random_weights.h"

namespace ninfer::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Shape {
  int layers = 32, hidden = 4096, heads = 32, kv_heads = 8, head_dim = 128, ffn = 14336, vocab = 128256;
  double rope_theta = 500000.0;
  int max_pos = 131072;
  bool tied = false;
};

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  bool norm = false;
  uint16_t norm_value = 0x3F80;  // the bf16 bits of a norm's every element
  size_t numel() const {
    size_t n = 1;
    for (int64_t s : shape) n *= size_t(s);
    return n;
  }
};

// Writes tensors ts (random values; norms their norm_value) to out/model.safetensors.
size_t write_tensors(const fs::path& out, const std::vector<Tensor>& ts, uint64_t seed);

void write_checkpoint(const fs::path& out, const Shape& s, const fs::path& tok_dir, uint64_t seed) {
  fs::create_directories(out);
  std::vector<Tensor> ts;
  const int64_t H = s.hidden, qd = int64_t(s.heads) * s.head_dim, kvd = int64_t(s.kv_heads) * s.head_dim;
  ts.push_back({"model.embed_tokens.weight", {s.vocab, H}});
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    ts.push_back({p + "input_layernorm.weight", {H}, true});
    ts.push_back({p + "self_attn.q_proj.weight", {qd, H}});
    ts.push_back({p + "self_attn.k_proj.weight", {kvd, H}});
    ts.push_back({p + "self_attn.v_proj.weight", {kvd, H}});
    ts.push_back({p + "self_attn.o_proj.weight", {H, qd}});
    ts.push_back({p + "post_attention_layernorm.weight", {H}, true});
    ts.push_back({p + "mlp.gate_proj.weight", {s.ffn, H}});
    ts.push_back({p + "mlp.up_proj.weight", {s.ffn, H}});
    ts.push_back({p + "mlp.down_proj.weight", {H, s.ffn}});
  }
  ts.push_back({"model.norm.weight", {H}, true});
  if (!s.tied) ts.push_back({"lm_head.weight", {s.vocab, H}});
  const size_t off = write_tensors(out, ts, seed);
  json cfg = {{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"hidden_size", s.hidden},
              {"intermediate_size", s.ffn},
              {"num_hidden_layers", s.layers},
              {"num_attention_heads", s.heads},
              {"num_key_value_heads", s.kv_heads},
              {"head_dim", s.head_dim},
              {"vocab_size", s.vocab},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", s.rope_theta},
              {"max_position_embeddings", s.max_pos},
              {"tie_word_embeddings", s.tied},
              {"hidden_act", "silu"},
              {"attention_bias", false},
              {"mlp_bias", false},
              {"bos_token_id", nullptr},
              {"eos_token_id", 2},
              {"torch_dtype", "bfloat16"}};
  std::ofstream(out / "config.json") << cfg.dump(2) << "\n";
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    if (fs::exists(tok_dir / name)) fs::copy_file(tok_dir / name, out / name, fs::copy_options::overwrite_existing);
  }
  if (!fs::exists(out / "tokenizer.json"))
    fail("--tokenizer-from {}: no tokenizer.json there (the engine needs one to load the checkpoint)", tok_dir.string());
  std::printf("wrote %s: %d layers, hidden %d, heads %d/%d, head_dim %d, ffn %d, vocab %d, %.2f GB\n",
              out.string().c_str(), s.layers, s.hidden, s.heads, s.kv_heads, s.head_dim, s.ffn, s.vocab, off / 1e9);
}

size_t write_tensors(const fs::path& out, const std::vector<Tensor>& ts, uint64_t seed) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}, {"note", "random weights written by ninfer make-random-checkpoint"}};
  size_t off = 0;
  for (const Tensor& t : ts) {
    const size_t b = t.numel() * 2;
    header[t.name] = {{"dtype", "BF16"}, {"shape", t.shape}, {"data_offsets", {off, off + b}}};
    off += b;
  }
  std::string hs = header.dump();
  while (hs.size() % 8) hs += ' ';
  const fs::path file = out / "model.safetensors";
  std::ofstream f(file, std::ios::binary);
  if (!f) fail("cannot write {}", file.string());
  const uint64_t hl = hs.size();
  f.write(reinterpret_cast<const char*>(&hl), 8);
  f.write(hs.data(), std::streamsize(hs.size()));
  std::vector<uint16_t> buf;
  size_t done = 0;
  for (size_t ti = 0; ti < ts.size(); ++ti) {
    const Tensor& t = ts[ti];
    buf.resize(t.numel());
    fill_random_tensor(buf.data(), buf.size(), seed, ti, t.norm, t.norm_value);
    f.write(reinterpret_cast<const char*>(buf.data()), std::streamsize(buf.size() * 2));
    if (!f) fail("write to {} failed (disk full?)", file.string());
    done += buf.size() * 2;
    if (ti % 20 == 0 || ti + 1 == ts.size())
      std::fprintf(stderr, "make-random-checkpoint: %.1f / %.1f GB\n", done / 1e9, off / 1e9);
  }
  return off;
}

// A random checkpoint of any supported architecture from a real config.json: the tensors are
// the ones the family binds (model/model.h list_weights), the config is copied unchanged.
void write_from_config(const fs::path& out, const fs::path& cfg_path, const fs::path& tok_dir, uint64_t seed) {
  const ModelConfig c = parse_model_config(read_file(cfg_path), cfg_path.string());
  fs::create_directories(out);
  std::vector<Tensor> ts;
  for (auto& [name, shape] : list_weights(c)) {
    // Gemma-style norms store w - 1: 0 there is a plain RMSNorm.
    ts.push_back({name, shape, is_norm_tensor(name), norm_fill_value(c, name)});
  }
  const size_t bytes = write_tensors(out, ts, seed);
  fs::copy_file(cfg_path, out / "config.json", fs::copy_options::overwrite_existing);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    if (fs::exists(tok_dir / name)) fs::copy_file(tok_dir / name, out / name, fs::copy_options::overwrite_existing);
  }
  if (!fs::exists(out / "tokenizer.json"))
    fail("--tokenizer-from {}: no tokenizer.json there (the engine needs one to load the checkpoint)", tok_dir.string());
  std::printf("wrote %s: %s, %zu tensors, %.2f GB (%.2f B parameters, %.2f B active per token)\n",
              out.string().c_str(), c.architecture.c_str(), ts.size(), bytes / 1e9, c.n_params() / 1e9,
              c.n_active_params() / 1e9);
}

struct MakeCmd {
  std::string out, tok_dir, preset = "llama3-8b", config;
  Shape s;
  uint64_t seed = 1;
};

RegisterCommand reg_make("make-random-checkpoint", "write a random-weight checkpoint of a real shape (for speed runs)",
                         [](CLI::App* app) {
  auto c = std::make_shared<MakeCmd>();
  app->add_option("-o,--out", c->out, "output directory")->required();
  app->add_option("--tokenizer-from", c->tok_dir, "model directory to copy tokenizer files from")->required();
  app->add_option("--preset", c->preset, "llama3-8b, or 'custom' with the flags below")->capture_default_str();
  app->add_option("--layers", c->s.layers, "custom: layers");
  app->add_option("--hidden", c->s.hidden, "custom: hidden size");
  app->add_option("--q-heads", c->s.heads, "custom: attention heads");
  app->add_option("--kv-heads", c->s.kv_heads, "custom: key/value heads");
  app->add_option("--head-dim", c->s.head_dim, "custom: head_dim");
  app->add_option("--ffn", c->s.ffn, "custom: intermediate size");
  app->add_option("--vocab", c->s.vocab, "custom: vocabulary size");
  app->add_option("--seed", c->seed, "random seed")->capture_default_str();
  app->add_option("--config", c->config, "a real config.json: random weights of its architecture and shape");
  app->callback([c]() {
    if (!c->config.empty()) {
      write_from_config(c->out, c->config, c->tok_dir, c->seed);
      return;
    }
    if (c->preset != "llama3-8b" && c->preset != "custom") fail("--preset must be llama3-8b or custom, got '{}'", c->preset);
    if (c->preset == "llama3-8b" && (c->s.layers != 32 || c->s.hidden != 4096))
      fail("shape flags need --preset custom");
    if (c->s.layers <= 0 || c->s.hidden <= 0 || c->s.heads <= 0 || c->s.kv_heads <= 0 || c->s.head_dim <= 0 ||
        c->s.ffn <= 0 || c->s.vocab <= 0 || c->s.heads % c->s.kv_heads != 0)
      fail("make-random-checkpoint: every shape value must be positive and q heads a multiple of kv heads");
    write_checkpoint(c->out, c->s, c->tok_dir, c->seed);
  });
});

}  // namespace
}  // namespace ninfer::app
