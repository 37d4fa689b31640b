// Stop tokens and BOS from a model directory's generation_config.json (Hugging Face), with
// config.json as the fallback for fields the former lacks, and the sampling defaults
// generation_config.json recommends (temperature, top_p, top_k, min_p, repetition_penalty,
// do_sample), which run / chat / serve apply to whatever the request or CLI leaves unset, as
// vLLM does with --generation-config auto. Both files are optional.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ninfer {

// The sampling fields of generation_config.json; absent (or null) fields are nullopt.
struct SamplingDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;         // 0: off
  std::optional<bool> do_sample;    // false: greedy (transformers' meaning)
  std::string file;                 // generation_config.json's path, "" if there was none
  bool empty() const {
    return !temperature && !top_p && !min_p && !repetition_penalty && !top_k && !do_sample;
  }
};

struct GenerationConfig {
  std::vector<int32_t> eos_ids;  // generation stops at any of these; may be empty
  std::optional<int32_t> bos_id;
  SamplingDefaults sampling;
};

// The sampling knobs a caller has, and which of them the request / command line set.
struct SamplingKnobs {
  float* temperature;
  float* top_p;
  int* top_k;
  float* min_p;
  float* repetition_penalty;
  bool set_temperature = false, set_top_p = false, set_top_k = false, set_min_p = false,
       set_repetition_penalty = false;
};

// Fills the knobs the caller did not set from `d`: each field present in the file is taken;
// do_sample false makes an unset temperature 0 (greedy), and do_sample true with no
// temperature in the file makes an unset temperature of 0 (the CLI's greedy default) 1.0, as
// transformers samples at temperature 1. Returns "name=value" for each knob taken (for the
// message telling the user where the defaults came from).
std::vector<std::string> apply_sampling_defaults(const SamplingDefaults& d, const SamplingKnobs& k);

// eos_token_id may be an int, a list of ints or null. Throws Error naming the file and
// field on malformed JSON or a field of the wrong type or out of range (temperature < 0,
// top_p outside (0, 1], top_k < 0, min_p outside [0, 1], repetition_penalty <= 0).
GenerationConfig load_generation_config(const std::filesystem::path& model_dir);

}  // namespace ninfer
