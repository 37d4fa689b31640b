// Rotary position embeddings: the rope types of transformers' modeling_rope_utils (one table,
// rope.cpp: name -> parser and inverse-frequency rule) and the per-forward table a backend
// applies. Half-split convention (rotate_half) over the first `rotary_dim` dims of each head;
// the rest pass through (partial rotary).
//
// A forward's table depends on the sequence length for `dynamic` (NTK base grows past
// max_position_embeddings) and `longrope` (long factors past original_max_position_embeddings).
// As in transformers, where that length is the largest position of the forward + 1, ours is
// the chunk's start_pos + n_tokens: one prompt prefilled as one chunk gets transformers'
// table exactly, and every decode step gets the table of its own length (the keys cached
// before keep the table they were rotated with, as in transformers' cache).
#pragma once
#include <string>
#include <vector>

namespace ninfer {

enum class RopeType { Default, Linear, Dynamic, Yarn, Llama3, LongRope };

struct RopeSpec {
  RopeType type = RopeType::Default;
  double theta = 10000.0;
  int rotary_dim = 0;        // dims rotated per head (head_dim * partial_rotary_factor)
  double factor = 1.0;
  int original_max = 0;      // original_max_position_embeddings
  int max_position = 0;      // max_position_embeddings
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double beta_fast = 32.0, beta_slow = 1.0;              // yarn
  bool truncate = true;                                  // yarn: round the correction range
  double attention_factor = 0.0;  // cos/sin multiplier given by the config (0: derived)
  double mscale = 0.0, mscale_all_dim = 0.0;             // yarn (DeepSeek-style)
  std::vector<double> short_factor, long_factor;         // longrope, [rotary_dim / 2]
};

// The name transformers uses for a type ("default", "linear", "dynamic", "yarn", "llama3", "longrope").
const char* rope_type_name(RopeType t);
// True when the table depends on the sequence length (dynamic, longrope).
bool rope_depends_on_length(const RopeSpec& r);

// One forward's rope: angle_i = pos * inv_freq[i] (fp32), x rotated by (cos, sin) * attention_factor.
struct RopeTable {
  std::vector<float> inv_freq;  // [rotary_dim / 2]
  float attention_factor = 1.0f;
};
// The table for a chunk whose last position is seq_len - 1.
RopeTable rope_table(const RopeSpec& r, int seq_len);

}  // namespace ninfer
