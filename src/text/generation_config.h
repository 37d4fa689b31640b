// Stop tokens and BOS from a model directory's generation_config.json (Hugging Face), with
// config.json as the fallback for fields the former lacks. Both files are optional.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace ninfer {

struct GenerationConfig {
  std::vector<int32_t> eos_ids;  // generation stops at any of these; may be empty
  std::optional<int32_t> bos_id;
};

// eos_token_id may be an int, a list of ints or null. Throws Error naming the file and
// field on malformed JSON or a field of the wrong type.
GenerationConfig load_generation_config(const std::filesystem::path& model_dir);

}  // namespace ninfer
