// The engine: a loaded model, its tokenizer, a backend with a paged KV cache of one format,
// and the page table. Sequences are created, extended (prefill in chunks, decode) and freed;
// generate() runs one request end to end with streaming, stop tokens and stop strings.
// The server's scheduler drives step() directly to batch many sequences.
#pragma once
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "kv/page_table.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "core/error.h"
#include "text/chat_template.h"
#include "text/generation_config.h"
#include "text/tokenizer.h"

namespace ninfer {

struct EngineOptions {
  std::string device = "auto";  // cpu | cuda | auto
  int threads = 0;              // CPU threads, 0: all
  std::string kv_dtype = "bf16";
  // The exact KV window (kv/kv_window.h): --kv-sink / --kv-recent tokens; -1: the format's
  // default (default_kv_window; what the CLI passes unless the flags are given). The format's
  // default is off on a backend without the window and when the prefix cache is requested.
  int kv_sink = 0;
  int kv_recent = 0;
  // Weights: "bf16" keeps the checkpoint's (dense or quantised) weights as stored; fp8 | int8 |
  // int4 quantise a dense checkpoint's projections at load (model/weight_format.h).
  std::string weights = "bf16";
  int64_t max_context = 0;      // tokens per sequence; 0: the model's max_position_embeddings
  int64_t kv_capacity = 0;      // tokens in the KV pool; 0: automatic
  int64_t memory_budget = 0;    // bytes to plan with instead of the device's memory; 0: device
  int max_sequences = 1;        // sequences expected at once (automatic capacity on the CPU)
  int prefill_chunk = 512;      // prompt tokens per forward call
  uint64_t page_shuffle_seed = 0;  // tests: hand out physical pages in shuffled order
  bool quiet = false;           // no startup lines on stderr
  // A max_context past the model's max_position_embeddings is an error unless this is set
  // (--allow-long-context; then a warning names both numbers).
  bool allow_long_context = false;
  size_t progress_tokens = 8192;  // prompts this long show prefill progress on stderr
  uint64_t random_weights_seed = 0;  // != 0: random weights of the config's shape, no weight files read
  // Prefix caching (kv/page_table.h): full pages of finished or running sequences are kept,
  // keyed by their tokens, and attached read-only to a new sequence whose prompt starts with
  // them. Off by default (a benchmark must not time cached prefills); `serve` turns it on.
  bool prefix_cache = false;
  // A Jinja chat template file used instead of the model's (tokenizer_config.json's), as
  // vLLM's --chat-template; "" for the model's own.
  std::string chat_template_file;
};

// Longest run of cached pages at the head of some tokens (Engine::match_prefix).
struct PrefixMatch {
  int n_pages = 0;         // pages found; n_pages * kPageSize tokens
  int n_unreferenced = 0;  // of those, pages no sequence holds now (attaching takes them off the free count)
};

// Counters of the prefix cache since the engine started.
struct PrefixCacheStats {
  uint64_t queries = 0;    // prompt tokens looked up (attach_prefix calls, their tokens)
  uint64_t hits = 0;       // of those, tokens attached from cached pages
  uint64_t evictions = 0;  // cached pages reused for other content
};

class KvFullError : public Error {
 public:
  using Error::Error;
};

struct GenerateOptions {
  int max_new_tokens = 256;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;       // in addition to the model's generation_config stops
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (stop token excluded)
  std::string text;             // generated text (stop string excluded)
  std::string finish_reason;    // "stop" or "length"
  int prompt_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
};

// One unit of work for step(): new tokens for a sequence.
struct StepItem {
  int32_t seq = -1;
  std::span<const int32_t> tokens;
  bool all_logits = false;
};

class Engine {
 public:
  static std::unique_ptr<Engine> create(const std::filesystem::path& model_dir, const EngineOptions& opt);

  const Model& model() const { return *model_; }
  const ModelConfig& config() const { return model_->config; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GenerationConfig& generation_config() const { return gen_config_; }
  Backend& backend() { return *backend_; }
  const PageTable& pages() const { return *pages_; }
  const KvFormat& kv_format() const { return *format_; }
  int64_t max_context() const { return max_context_; }
  int64_t kv_capacity_tokens() const { return int64_t(pages_->n_pages()) * kPageSize; }
  const std::string& capacity_line() const { return capacity_line_; }

  // Replaces the KV format (same page count); only when no sequence is live. Used by
  // `perplexity --kl-ref` to run the reference format in the same process.
  // The window is `window`, or (nullopt) the options' window for fmt (resolve_kv_window).
  void set_kv_format(const KvFormat& fmt, std::optional<KvWindow> window = std::nullopt);
  const KvWindow& kv_window() const { return window_; }
  // The window fmt gets from the options (resolve_kv_window); a format's default only on a
  // backend that implements it and without the prefix cache.
  KvWindow window_for(const KvFormat& fmt) const;

  // Raises or lowers max_context (no live sequence may be longer); at most the pool's tokens.
  void set_max_context(int64_t n);

  int32_t new_sequence();
  // Drops the sequence; its pages' references go, and its published full pages stay cached
  // (unreferenced, evictable) when the prefix cache is on.
  void free_sequence(int32_t seq);

  // Prefix cache. Enabled when EngineOptions::prefix_cache is set and the model's rope tables
  // do not depend on the sequence length (dynamic, longrope: a cached key would carry another
  // length's table than a fresh prefill gives it).
  bool prefix_cache_enabled() const { return prefix_enabled_; }
  // The cached pages that a sequence starting with `tokens` could attach now: whole pages of
  // the hash chain, at most (tokens.size() - 1) / kPageSize of them so that the last token is
  // always computed (its logits are the answer) and at most max_context of them. Changes nothing.
  PrefixMatch match_prefix(std::span<const int32_t> tokens) const;
  // Attaches match_prefix(tokens) to `seq`, which must be empty: its cached length becomes
  // the matched tokens, which are then never recomputed or written. Returns that length (0
  // when the cache is off). Counts a query of tokens.size() tokens.
  int64_t attach_prefix(int32_t seq, std::span<const int32_t> tokens);
  PrefixCacheStats prefix_cache_stats() const;
  int64_t sequence_length(int32_t seq) const;
  const std::vector<int32_t>& sequence_tokens(int32_t seq) const;

  // Appends tokens to sequences in one forward call; logits rows as Backend::forward.
  // Throws KvFullError (changing nothing) when the pool lacks pages, and Error when a
  // sequence would exceed max_context.
  void step(std::span<const StepItem> items, std::vector<float>& logits);
  // Feeds a prompt in chunks of prefill_chunk; returns the last token's logits (or all rows
  // when all_logits). An empty sequence first attaches its cached prefix (attach_prefix;
  // not with all_logits, which needs every row). Prompts of EngineOptions::progress_tokens or more print progress on
  // stderr (unless quiet).
  void prefill(int32_t seq, std::span<const int32_t> tokens, std::vector<float>& logits,
               bool all_logits = false);

  // Grows a sequence whose cached length is a positive whole number of pages to n_tokens by
  // repeating its cached pages (KV and tokens) in order, without running the model: a
  // benchmark's way to a long context in seconds (`bench --fill-from`). The result is not what
  // the model would compute for that text (positions repeat), but every page holds real KV
  // of the model, so a decode step reads and attends over exactly n_tokens tokens. Throws
  // KvFullError (changing nothing) when the pool lacks pages.
  void extend_by_repeating(int32_t seq, int64_t n_tokens);

  GenerateResult generate(std::span<const int32_t> prompt, const GenerateOptions& opt,
                          const std::function<bool(std::string_view)>& on_text = nullptr);

  // Renders a chat through the model's template (with the generation prompt) and encodes it.
  std::vector<int32_t> encode_chat(const std::vector<ChatMessage>& messages) const;
  // With tools and template kwargs (enable_thinking, ...) passed to the chat template.
  std::vector<int32_t> encode_chat(const std::vector<ChatMessage>& messages, const ChatOptions& opts) const;

 private:
  Engine() = default;
  struct SeqState {
    std::vector<int32_t> tokens;     // cached tokens
    std::vector<uint64_t> page_keys; // chain key of each full page so far (prefix cache on)
    bool cacheable = true;           // false after extend_by_repeating (pages are not the model's)
    int state_slot = -1;             // DeltaNet models: the backend's recurrent-state slot
    int window_slot = -1;            // exact KV window on: the backend's window slot
  };
  // Takes a free slot of `free` (free[i]: slot i), doubling the slots through grow(n) when
  // none is free.
  static int take_slot(std::vector<bool>& free, const std::function<void(int)>& grow);
  // Publishes the pages of `seq` that its last step filled.
  void publish_full_pages(int32_t seq);
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  GenerationConfig gen_config_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<PageTable> pages_;
  const KvFormat* format_ = nullptr;
  EngineOptions opt_;
  int64_t max_context_ = 0;
  std::string capacity_line_;
  std::unordered_map<int32_t, SeqState> seqs_;
  bool prefix_enabled_ = false;
  uint64_t prefix_seed_ = 0;  // chain seed: model identity, KV format, rope settings
  PrefixCacheStats prefix_stats_;
  // Recurrent-state slots (models with DeltaNet layers): free[i] for slot i; more are
  // allocated when a new sequence finds none free.
  std::vector<bool> state_free_;
  KvWindow window_;                 // the exact KV window of the current format
  std::vector<bool> window_free_;   // window slots (window_ on), as state_free_
};

}  // namespace ninfer
