#include "runtime/engine.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "kv/capacity.h"
#include "runtime/backend_factory.h"
#include "runtime/stop_strings.h"

namespace ninfer {

using Clock = std::chrono::steady_clock;

namespace {

// The seed of every page's hash chain: what besides the tokens decides a page's bytes. The
// cache lives in one process with one model, so this mostly guards against a format change
// (set_kv_format also drops the cache); it names the rest so that a key means one thing.
uint64_t prefix_chain_seed(const Model& m, const KvFormat& fmt, uint64_t random_weights_seed) {
  const ModelConfig& c = m.config;
  std::string id = fmt::format("ninfer prefix v1|{}|{}|{}|L{} H{} h{}/{} d{} V{}|rw{}|kv {}|win", m.dir.string(),
                               c.architecture, c.dtype, c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, c.head_dim,
                               c.vocab, random_weights_seed, fmt.name);
  for (const LayerSpec& l : c.layers) id += fmt::format(" {}:{}", l.window, l.rope);
  for (const RopeSpec& r : c.ropes) {
    id += fmt::format("|rope {} {} {} {} {} {} {} {} {} {} {} {} {} {}", rope_type_name(r.type), r.theta, r.rotary_dim,
                      r.factor, r.original_max, r.max_position, r.low_freq_factor, r.high_freq_factor, r.beta_fast,
                      r.beta_slow, r.truncate, r.attention_factor, r.mscale, r.mscale_all_dim);
    for (double f : r.short_factor) id += fmt::format(" s{}", f);
    for (double f : r.long_factor) id += fmt::format(" l{}", f);
  }
  return hash_bytes(0, id.data(), id.size());
}

}  // namespace

std::unique_ptr<Engine> Engine::create(const std::filesystem::path& dir, const EngineOptions& opt) {
  std::unique_ptr<Engine> e(new Engine());
  e->opt_ = opt;
  e->format_ = &find_kv_format(opt.kv_dtype);
  e->model_ = load_model(dir, opt.random_weights_seed, parse_weights_option(opt.weights));
  const ModelConfig& c = e->model_->config;
  e->format_->check_head_dim(c.head_dim);
  e->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(dir));
  if (!opt.chat_template_file.empty()) {
    std::ifstream f(opt.chat_template_file, std::ios::binary);
    if (!f) fail("--chat-template: cannot read '{}'", opt.chat_template_file);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (text.empty()) fail("--chat-template: '{}' is empty", opt.chat_template_file);
    *e->tokenizer_ = e->tokenizer_->with_chat_template(std::move(text));
  }
  e->gen_config_ = load_generation_config(dir);
  if (opt.max_context < 0) fail("--max-context must be positive, got {}", opt.max_context);
  e->max_context_ = opt.max_context > 0 ? opt.max_context : c.max_position;
  if (e->max_context_ > c.max_position) {
    if (!opt.allow_long_context)
      fail("--max-context {} exceeds max_position_embeddings {} of {}/config.json; pass --allow-long-context to run "
           "past the context the model was trained for",
           e->max_context_, c.max_position, dir.string());
    if (!opt.quiet)
      std::fprintf(stderr,
                   "warning: --max-context %lld exceeds the model's max_position_embeddings %d "
                   "(--allow-long-context): quality past the trained context is not guaranteed\n",
                   (long long)e->max_context_, c.max_position);
  }
  e->backend_ = make_backend(*e->model_, opt.device, opt.kv_dtype, opt.threads, opt.quiet);

  CapacityInputs in;
  MemoryInfo mem = e->backend_->memory();
  // NOTE: the backend has already loaded its weights, so without a budget we plan with the
  // memory free now plus the weights (i.e. as if planning before loading).
  in.memory = opt.memory_budget > 0 ? size_t(opt.memory_budget) : mem.free + mem.weights;
  in.weights = mem.weights;
  in.workspace = e->backend_->name() == "cpu" ? 0 : workspace_estimate(c, opt.prefill_chunk);
  in.page_bytes = e->backend_->page_bytes(*e->format_);
  in.max_context = e->max_context_;
  in.kv_capacity = opt.kv_capacity;
  if (c.state_bytes() > 0) {
    in.state_slots = std::max(1, opt.max_sequences);
    in.state_slot_bytes = c.state_bytes();
  }
  e->window_ = e->window_for(*e->format_);
  if (!e->window_.on() && default_kv_window(e->format_->name).on() && opt.kv_sink < 0 && opt.kv_recent < 0 &&
      !opt.quiet) {
    const KvWindow d = default_kv_window(e->format_->name);
    const std::string why = !e->backend_->implements_kv_window()
                                ? fmt::format("not implemented on {} yet", e->backend_->name())
                                : std::string("the prefix cache is on (pass --kv-sink / --kv-recent to keep a window "
                                              "instead; the prefix cache then turns off)");
    std::fprintf(stderr, "note: %s's default exact KV window (--kv-sink %d --kv-recent %d) is off: %s\n",
                 std::string(e->format_->name).c_str(), d.sink, d.recent, why.c_str());
  }
  if (e->window_.on()) {
    in.window_slots = std::max(1, opt.max_sequences);
    in.window_slot_bytes = kv_window_slot_bytes(e->window_, c.n_attention_layers(), c.n_kv_heads, c.head_dim);
  }
  if (e->backend_->name() == "cpu") {
    // On the CPU the pool is ordinary RAM: automatic capacity is what the expected sequences
    // need, not all free memory.
    in.auto_cap_tokens = e->max_context_ * std::max(1, opt.max_sequences);
  }
  CapacityPlan plan = plan_capacity(in);
  e->pages_ = std::make_unique<PageTable>(int(plan.pages), opt.page_shuffle_seed);
  e->backend_->init_kv(*e->format_, int(plan.pages));
  if (in.state_slots > 0) {
    e->backend_->init_state(in.state_slots);
    e->state_free_.assign(size_t(in.state_slots), true);
  }
  e->backend_->init_kv_window(e->window_, in.window_slots);
  e->window_free_.assign(size_t(in.window_slots), true);
  e->capacity_line_ = ninfer::capacity_line(plan, *e->format_, e->window_);
  if (opt.prefix_cache) {
    bool length_dependent = false;
    for (const RopeSpec& r : c.ropes) length_dependent = length_dependent || rope_depends_on_length(r);
    e->prefix_enabled_ = !length_dependent && c.state_bytes() == 0 && !e->window_.on();
    // NOTE: a cached page holds only codes; the exact window of its tokens would have to be
    // cached with it.
    if (e->window_.on() && !opt.quiet)
      std::fprintf(stderr, "prefix cache off: the exact KV window (--kv-sink/--kv-recent) is on\n");
    if (length_dependent && !opt.quiet)
      std::fprintf(stderr, "prefix cache off: the model's rope table depends on the sequence length\n");
    // NOTE: cached KV pages alone cannot resume a DeltaNet layer: its state after the prefix
    // would have to be cached too.
    if (!length_dependent && c.state_bytes() > 0 && !opt.quiet)
      std::fprintf(stderr, "prefix cache off: the model's linear-attention layers keep a recurrent state\n");
    e->prefix_seed_ = prefix_chain_seed(*e->model_, *e->format_, opt.random_weights_seed);
  }
  if (!opt.quiet) std::fprintf(stderr, "%s\n", e->capacity_line_.c_str());
  return e;
}

void Engine::set_kv_format(const KvFormat& fmt, std::optional<KvWindow> window) {
  NINFER_CHECK(seqs_.empty(), "set_kv_format with {} live sequences", seqs_.size());
  fmt.check_head_dim(config().head_dim);
  const KvWindow w = window ? *window : window_for(fmt);
  if (!(w == window_)) {
    // NOTE: the pool keeps its pages; the window's slots are per sequence and not counted in
    // them (perplexity switches formats on one pool).
    window_ = w;
    const int slots = std::max<int>(1, int(window_free_.size()));
    backend_->init_kv_window(w, w.on() ? slots : 0);
    window_free_.assign(w.on() ? size_t(slots) : 0, true);
    if (w.on()) prefix_enabled_ = false;
  }
  if (&fmt == format_) return;
  format_ = &fmt;
  backend_->init_kv(fmt, pages_->n_pages());
  pages_->drop_cache();
  if (prefix_enabled_) prefix_seed_ = prefix_chain_seed(*model_, fmt, opt_.random_weights_seed);
}

KvWindow Engine::window_for(const KvFormat& fmt) const {
  const KvWindow w = resolve_kv_window(fmt.name, opt_.kv_sink, opt_.kv_recent);
  // NOTE: a default window where the backend lacks it would refuse every run of the format on
  // that backend, and one with the prefix cache requested would turn the cache off; the
  // default falls back to none there. Explicit flags are refused by name (backend) or turn the
  // prefix cache off.
  if (w.on() && opt_.kv_sink < 0 && opt_.kv_recent < 0 && (!backend_->implements_kv_window() || opt_.prefix_cache))
    return {};
  return w;
}

void Engine::set_max_context(int64_t n) {
  if (n < 1 || n > kv_capacity_tokens())
    fail("max context {} must be in [1, {}] (the KV pool's tokens)", n, kv_capacity_tokens());
  for (const auto& [id, st] : seqs_)
    NINFER_CHECK(int64_t(st.tokens.size()) <= n, "sequence {} already holds {} tokens > {}", id, st.tokens.size(), n);
  max_context_ = n;
}

void Engine::extend_by_repeating(int32_t seq, int64_t n_tokens) {
  const int64_t len = sequence_length(seq);
  if (window_.on())
    fail("bench --fill-from repeats compressed pages only: not with an exact KV window (--kv-sink {} --kv-recent "
         "{}); pass --kv-sink 0 --kv-recent 0",
         window_.sink, window_.recent);
  if (len <= 0 || len % kPageSize != 0)
    fail("extend_by_repeating: the sequence holds {} tokens, not a positive multiple of the page size {}", len,
         kPageSize);
  if (n_tokens < len) fail("extend_by_repeating: {} tokens is shorter than the sequence's {}", n_tokens, len);
  if (n_tokens > max_context_) fail("sequence of {} tokens exceeds --max-context {}", n_tokens, max_context_);
  const int64_t have = int64_t(pages_->block_table(seq).size());
  const int64_t need = pages_for_tokens(n_tokens) - have;
  if (need > pages_->n_free())
    throw KvFullError(fmt::format("KV cache full: {} more pages needed, {} free of {}", need, pages_->n_free(),
                                  pages_->n_pages()));
  const int64_t src_pages = len / kPageSize;
  NINFER_CHECK(pages_->reserve(seq, n_tokens), "reserve failed");
  const std::vector<int32_t>& bt = pages_->block_table(seq);
  std::vector<int32_t> src, dst;
  for (int64_t j = src_pages; j < int64_t(bt.size()); ++j) {
    src.push_back(bt[size_t(j % src_pages)]);
    dst.push_back(bt[size_t(j)]);
  }
  backend_->copy_kv_pages(src, dst);
  // NOTE: the repeated pages are not what the model computes for their tokens: they must
  // never be found by a prefix lookup.
  seqs_[seq].cacheable = false;
  auto& toks = seqs_[seq].tokens;
  for (int64_t i = len; i < n_tokens; ++i) toks.push_back(toks[size_t(i % len)]);
}

int32_t Engine::new_sequence() {
  int32_t id = pages_->create_sequence();
  SeqState st;
  if (config().state_bytes() > 0) st.state_slot = take_slot(state_free_, [&](int n) { backend_->init_state(n); });
  if (window_.on()) st.window_slot = take_slot(window_free_, [&](int n) { backend_->init_kv_window(window_, n); });
  seqs_[id] = std::move(st);
  return id;
}

int Engine::take_slot(std::vector<bool>& free, const std::function<void(int)>& grow) {
  auto it = std::find(free.begin(), free.end(), true);
  if (it == free.end()) {  // more sequences than planned: twice the slots (RAM or device memory)
    const size_t n = free.size();
    grow(int(std::max<size_t>(1, 2 * n)));
    free.resize(std::max<size_t>(1, 2 * n), true);
    it = free.begin() + ptrdiff_t(n);
  }
  *it = false;
  return int(it - free.begin());
}

void Engine::free_sequence(int32_t seq) {
  pages_->release(seq);
  auto it = seqs_.find(seq);
  if (it != seqs_.end() && it->second.state_slot >= 0) state_free_[size_t(it->second.state_slot)] = true;
  if (it != seqs_.end() && it->second.window_slot >= 0) window_free_[size_t(it->second.window_slot)] = true;
  seqs_.erase(seq);
}

namespace {

// The cached pages at the head of `tokens`, in chain order: whole pages, at most
// (tokens.size() - 1) / kPageSize (the last token is always computed) and no more than
// max_context holds. f(key, tokens of the page, physical page) for each; returns how many.
template <typename F>
size_t walk_cached_prefix(const PageTable& pages, uint64_t seed, int64_t max_context, std::span<const int32_t> tokens,
                          F&& f) {
  const size_t max_pages = std::min<size_t>((tokens.size() - 1) / kPageSize, size_t(max_context / kPageSize));
  uint64_t parent = seed;
  size_t i = 0;
  for (; i < max_pages; ++i) {
    const std::span<const int32_t> page = tokens.subspan(i * kPageSize, kPageSize);
    const uint64_t key = page_key(parent, page);
    const int32_t p = pages.lookup(key, parent, page);
    if (p < 0) break;
    f(key, page, p);
    parent = key;
  }
  return i;
}

}  // namespace

PrefixMatch Engine::match_prefix(std::span<const int32_t> tokens) const {
  PrefixMatch m;
  if (!prefix_enabled_ || tokens.empty()) return m;
  m.n_pages = int(walk_cached_prefix(*pages_, prefix_seed_, max_context_, tokens, [&](uint64_t, auto, int32_t p) {
    if (pages_->refs(p) == 0) ++m.n_unreferenced;
  }));
  return m;
}

int64_t Engine::attach_prefix(int32_t seq, std::span<const int32_t> tokens) {
  auto it = seqs_.find(seq);
  NINFER_CHECK(it != seqs_.end(), "unknown sequence {}", seq);
  SeqState& st = it->second;
  NINFER_CHECK(st.tokens.empty() && pages_->block_table(seq).empty(), "attach_prefix on sequence {} holding {} tokens",
               seq, st.tokens.size());
  if (!prefix_enabled_ || tokens.empty()) return 0;
  prefix_stats_.queries += tokens.size();
  walk_cached_prefix(*pages_, prefix_seed_, max_context_, tokens,
                     [&](uint64_t key, std::span<const int32_t> page, int32_t p) {
                       pages_->attach(seq, p);
                       st.page_keys.push_back(key);
                       st.tokens.insert(st.tokens.end(), page.begin(), page.end());
                     });
  prefix_stats_.hits += st.tokens.size();
  return int64_t(st.tokens.size());
}

PrefixCacheStats Engine::prefix_cache_stats() const {
  PrefixCacheStats s = prefix_stats_;
  s.evictions = pages_->evictions();
  return s;
}

void Engine::publish_full_pages(int32_t seq) {
  SeqState& st = seqs_[seq];
  if (!st.cacheable) return;
  const size_t full = st.tokens.size() / kPageSize;
  while (st.page_keys.size() < full) {
    const size_t i = st.page_keys.size();
    const uint64_t parent = i == 0 ? prefix_seed_ : st.page_keys.back();
    const std::span<const int32_t> page(st.tokens.data() + i * kPageSize, kPageSize);
    const uint64_t key = page_key(parent, page);
    // A page someone published first under the same key stays private here; the chain goes on.
    pages_->publish(seq, int(i), key, parent, page);
    st.page_keys.push_back(key);
  }
}

int64_t Engine::sequence_length(int32_t seq) const { return int64_t(sequence_tokens(seq).size()); }

const std::vector<int32_t>& Engine::sequence_tokens(int32_t seq) const {
  auto it = seqs_.find(seq);
  NINFER_CHECK(it != seqs_.end(), "unknown sequence {}", seq);
  return it->second.tokens;
}

void Engine::step(std::span<const StepItem> items, std::vector<float>& logits) {
  // Check everything before reserving anything, so a failure changes nothing.
  int64_t pages_needed = 0;
  for (const StepItem& it : items) {
    const int64_t n = sequence_length(it.seq) + int64_t(it.tokens.size());
    if (n > max_context_)
      fail("sequence of {} tokens exceeds --max-context {}", n, max_context_);
    pages_needed += std::max<int64_t>(0, pages_for_tokens(n) - int64_t(pages_->block_table(it.seq).size()));
  }
  if (pages_needed > pages_->n_free())
    throw KvFullError(fmt::format("KV cache full: {} more pages needed, {} free of {}", pages_needed,
                                  pages_->n_free(), pages_->n_pages()));
  std::vector<SeqChunk> chunks;
  chunks.reserve(items.size());
  for (const StepItem& it : items) {
    const int64_t start = sequence_length(it.seq);
    NINFER_CHECK(pages_->reserve(it.seq, start + int64_t(it.tokens.size())), "reserve failed");
    const std::vector<int32_t>& bt = pages_->block_table(it.seq);
    // NOTE: shared and published pages are read-only; only the sequence's own pages at and
    // past its length are written. A bug here would corrupt other sequences, so it aborts.
    if (!it.tokens.empty())
      for (int64_t b = start / kPageSize; b <= (start + int64_t(it.tokens.size()) - 1) / kPageSize; ++b)
        NINFER_CHECK(pages_->writable(bt[size_t(b)]), "step would write shared page {} (refs {}, published {})",
                     bt[size_t(b)], pages_->refs(bt[size_t(b)]), pages_->is_published(bt[size_t(b)]));
    chunks.push_back(SeqChunk{it.tokens.data(), int(it.tokens.size()), int(start), bt.data(), int(bt.size()),
                              it.all_logits, seqs_[it.seq].state_slot, seqs_[it.seq].window_slot});
  }
  backend_->forward(chunks, logits);
  for (const StepItem& it : items) {
    auto& toks = seqs_[it.seq].tokens;
    toks.insert(toks.end(), it.tokens.begin(), it.tokens.end());
    if (prefix_enabled_) publish_full_pages(it.seq);
  }
}

void Engine::prefill(int32_t seq, std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits) {
  NINFER_CHECK(!tokens.empty(), "empty prefill");
  const size_t chunk = size_t(std::max(1, opt_.prefill_chunk));
  const size_t vocab = size_t(config().vocab);
  std::vector<float> part;
  if (all_logits) logits.clear();
  // Long prompts report progress on stderr (tokens done, tokens/s, ETA) about once a second:
  // on a terminal one line rewritten in place, otherwise a line each.
  if (!all_logits && sequence_length(seq) == 0 && prefix_enabled_) {
    const int64_t cached = attach_prefix(seq, tokens);
    tokens = tokens.subspan(size_t(cached));
  }
  const bool progress = !opt_.quiet && tokens.size() >= opt_.progress_tokens;
  const auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const size_t n = std::min(chunk, tokens.size() - i);
    StepItem item{seq, tokens.subspan(i, n), all_logits};
    step({&item, 1}, part);
    if (progress) {
      const auto now = std::chrono::steady_clock::now();
      const bool done = i + n == tokens.size();
      if (done || now - last >= std::chrono::seconds(1)) {
        last = now;
        const double s = std::chrono::duration<double>(now - t0).count(), tps = double(i + n) / s;
        const bool tty = isatty(2);
        std::fprintf(stderr, "%sprefill %zu/%zu tokens | %.0f tokens/s | %s %.1f s%s", tty ? "\r" : "", i + n,
                     tokens.size(), tps, done ? "took" : "ETA", done ? s : double(tokens.size() - i - n) / tps,
                     tty && !done ? "" : "\n");
        std::fflush(stderr);
      }
    }
    if (all_logits) {
      logits.insert(logits.end(), part.begin(), part.end());
    } else if (i + n == tokens.size()) {
      logits.assign(part.end() - long(vocab), part.end());
    }
  }
}

std::vector<int32_t> Engine::encode_chat(const std::vector<ChatMessage>& messages) const {
  return encode_chat(messages, ChatOptions{});
}

std::vector<int32_t> Engine::encode_chat(const std::vector<ChatMessage>& messages, const ChatOptions& opts) const {
  const std::string& tmpl = tokenizer_->chat_template();
  if (tmpl.empty()) fail("{}: the model has no chat_template in tokenizer_config.json", model_->dir.string());
  std::string text = render_chat_template(tmpl, messages, opts, tokenizer_->bos_token(), tokenizer_->eos_token());
  // A template written for another model emits special tokens this vocabulary lacks; they
  // would silently become plain text. Every "<|...|>" marker must be a known token.
  for (size_t i = text.find("<|"); i != std::string::npos; i = text.find("<|", i + 2)) {
    size_t j = text.find("|>", i + 2);
    if (j == std::string::npos) break;
    std::string_view tok(text.data() + i, j + 2 - i);
    if (tok.find_first_of(" \n\t<", 2) < tok.size() - 2) continue;
    if (!tokenizer_->token_id(tok))
      fail("{}: the chat template's output contains special token '{}', which tokenizer.json does not define",
           (model_->dir / "tokenizer_config.json").string(), tok);
  }
  // NOTE: templates write BOS themselves when the model wants it, so no special tokens are
  // added on top (as transformers' apply_chat_template(tokenize=True) does).
  return tokenizer_->encode(text, false);
}

GenerateResult Engine::generate(std::span<const int32_t> prompt, const GenerateOptions& opt,
                                 const std::function<bool(std::string_view)>& on_text) {
  opt.sampling.validate();
  if (prompt.empty()) fail("the prompt is empty (no tokens to condition on)");
  if (opt.max_new_tokens < 0) fail("max new tokens must be >= 0, got {}", opt.max_new_tokens);
  if (int64_t(prompt.size()) >= max_context_)
    fail("the prompt has {} tokens but --max-context is {}", prompt.size(), max_context_);
  for (const std::string& s : opt.stop_strings)
    if (s.empty()) fail("stop strings must not be empty");
  std::vector<int32_t> stops = opt.stop_ids;
  if (!opt.ignore_eos) stops.insert(stops.end(), gen_config_.eos_ids.begin(), gen_config_.eos_ids.end());

  GenerateResult r;
  r.prompt_tokens = int(prompt.size());
  r.finish_reason = "length";
  const int32_t seq = new_sequence();
  struct Guard {
    Engine* e;
    int32_t s;
    ~Guard() { e->free_sequence(s); }
  } guard{this, seq};

  std::vector<float> logits;
  auto t0 = Clock::now();
  prefill(seq, prompt, logits);
  auto t1 = Clock::now();
  r.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  Sampler sampler(opt.sampling);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  Tokenizer::StreamDecoder dec(*tokenizer_);
  std::string pending;  // decoded text not yet emitted
  bool cancelled = false;
  const int64_t budget = std::min<int64_t>(opt.max_new_tokens, max_context_ - int64_t(prompt.size()));
  for (int64_t i = 0; i < budget && !cancelled; ++i) {
    int32_t tok = sampler.sample(logits, history);
    if (std::find(stops.begin(), stops.end(), tok) != stops.end()) {
      // Text held back as a possible stop-string prefix is real output after all.
      pending += dec.flush();
      if (!pending.empty()) {
        r.text += pending;
        if (on_text) on_text(pending);
      }
      r.finish_reason = "stop";
      break;
    }
    r.tokens.push_back(tok);
    history.push_back(tok);
    pending += dec.push(tok);
    bool hit = false;
    if (!opt.stop_strings.empty()) {
      size_t cut = std::string::npos;
      for (const std::string& s : opt.stop_strings) cut = std::min(cut, pending.find(s));
      if (cut != std::string::npos) {
        pending.resize(cut);
        hit = true;
      }
    }
    const size_t hold = hit ? 0 : stop_string_holdback(pending, opt.stop_strings);
    if (pending.size() > hold) {
      std::string_view out(pending.data(), pending.size() - hold);
      r.text += out;
      if (on_text && !on_text(out)) cancelled = true;
      pending.erase(0, out.size());
    }
    if (hit) {
      r.finish_reason = "stop";
      break;
    }
    if (i + 1 < budget) {
      StepItem item{seq, {&tok, 1}, false};
      step({&item, 1}, logits);
    }
  }
  if (r.finish_reason == "length" && !cancelled) {
    pending += dec.flush();
    if (!pending.empty()) {
      r.text += pending;
      if (on_text) on_text(pending);
    }
  }
  r.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return r;
}

}  // namespace ninfer
