#include "kv/capacity.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"
#include "kv/page_table.h"
#include "model/config.h"
#include "model/model.h"

namespace ninfer {

int cuda_kv_head_dim(int head_dim) {
  switch (head_dim) {
    case 64:
    case 128:
    case 256: return head_dim;
    // NOTE: zero padding is exact for bf16 pages: a padded K column adds 0 to every score and
    // a padded V column reaches only an output column that is dropped.
    case 96: return 128;
    default: return 0;
  }
}

size_t kv_bytes_per_token(const ModelConfig& c, const KvFormat& f, int row_dim) {
  const int d = row_dim > 0 ? row_dim : c.head_dim;
  return size_t(c.n_attention_layers()) * size_t(c.n_kv_heads) * f.bytes_per_head_token(d);
}

size_t kv_page_bytes(const ModelConfig& c, const KvFormat& f, int row_dim) {
  return kv_bytes_per_token(c, f, row_dim) * kPageSize;
}

size_t workspace_estimate(const ModelConfig& c, int chunk) {
  size_t per_token = size_t(3 * c.hidden + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.ffn + c.vocab) * 4;
  const int pd = cuda_kv_head_dim(c.head_dim);
  if (pd > c.head_dim)
    per_token += size_t(c.n_heads + 2 * c.n_kv_heads) * size_t(pd) * 4 + size_t(c.n_heads) * size_t(pd) * 2;
  return (size_t(256) << 20) + kPrefillScratchBytes + size_t(chunk) * per_token;
}

size_t device_weight_bytes(const ModelConfig& c, const WeightFormat* at_load) {
  if (!at_load && !c.quant) return size_t(c.n_params()) * 2;
  return weight_bytes_estimate(c, at_load);
}

size_t capacity_headroom(size_t memory) {
  return std::max<size_t>(size_t(256) << 20, memory / 25);
}

CapacityPlan plan_capacity(const CapacityInputs& in) {
  NINFER_CHECK(in.page_bytes > 0, "page_bytes is 0");
  CapacityPlan p;
  p.headroom = capacity_headroom(in.memory);
  p.state_slots = in.state_slots;
  p.state_slot_bytes = in.state_slot_bytes;
  p.window_slots = in.window_slots;
  p.window_slot_bytes = in.window_slot_bytes;
  // NOTE: the window's bytes are counted with the per-sequence state: "- {} state" below.
  const size_t state = size_t(in.state_slots) * in.state_slot_bytes + size_t(in.window_slots) * in.window_slot_bytes;
  const size_t used = in.weights + in.workspace + state + p.headroom;
  const size_t avail = in.memory > used ? in.memory - used : 0;
  p.pages_fit = int64_t(avail / in.page_bytes);
  const int64_t min_pages = pages_for_tokens(in.max_context);
  if (in.kv_capacity > 0) {
    p.pages = pages_for_tokens(in.kv_capacity);
    if (p.pages < min_pages)
      fail("--kv-capacity {} tokens cannot hold one --max-context {} sequence", in.kv_capacity, in.max_context);
    if (p.pages > p.pages_fit)
      fail("--kv-capacity {} tokens needs {} of KV but only {} is available ({} memory - {} weights "
           "- {} workspace - {} state - {} headroom)",
           in.kv_capacity, format_bytes(size_t(p.pages) * in.page_bytes),
           format_bytes(size_t(p.pages_fit) * in.page_bytes), format_bytes(in.memory),
           format_bytes(in.weights), format_bytes(in.workspace), format_bytes(state), format_bytes(p.headroom));
  } else {
    p.automatic = true;
    p.pages = p.pages_fit;
    if (in.auto_cap_tokens > 0) p.pages = std::min<int64_t>(p.pages, pages_for_tokens(in.auto_cap_tokens));
    if (p.pages < min_pages)
      fail("not enough memory for one --max-context {} sequence: {} of KV available ({} memory - {} "
           "weights - {} workspace - {} state - {} headroom), {} needed; lower --max-context or use a smaller "
           "--kv-dtype",
           in.max_context, format_bytes(size_t(p.pages_fit) * in.page_bytes), format_bytes(in.memory),
           format_bytes(in.weights), format_bytes(in.workspace), format_bytes(state), format_bytes(p.headroom),
           format_bytes(size_t(min_pages) * in.page_bytes));
  }
  p.tokens = p.pages * kPageSize;
  p.max_context = in.max_context;
  p.kv_bytes = size_t(p.pages) * in.page_bytes;
  p.runtime_bytes = in.weights + in.workspace + state + p.kv_bytes;
  p.free_bytes = in.memory > p.runtime_bytes ? in.memory - p.runtime_bytes : 0;
  return p;
}

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return v < 0 ? "-" + s : s;
}

std::string format_bytes(size_t b) {
  const double gib = double(b) / double(1ull << 30);
  if (gib >= 1.0) return fmt::format("{:.2f} GiB", gib);
  return fmt::format("{:.1f} MiB", double(b) / double(1ull << 20));
}

std::string capacity_line(const CapacityPlan& p, const KvFormat& f, const KvWindow& w) {
  std::string state =
      p.state_slots > 0 ? fmt::format(" | state {} x {}", p.state_slots, format_bytes(p.state_slot_bytes)) : "";
  if (p.window_slots > 0) state += fmt::format(" | window {} x {}", p.window_slots, format_bytes(p.window_slot_bytes));
  const std::string exact = w.on() ? fmt::format(" + exact sink {} / recent {}", w.sink, w.recent) : "";
  std::string fits;
  if (p.max_context > 0) {
    // Pages are whole: a sequence of max_context tokens takes pages_for_tokens(max_context) of them.
    const int64_t n = p.pages / pages_for_tokens(p.max_context);
    fits = fmt::format(" | max-context {} fits {} sequence{}", with_commas(p.max_context), with_commas(n),
                       n == 1 ? "" : "s");
  }
  return fmt::format("capacity | KV {} tokens, {}{}, {} | pages {}/{}{}{} | runtime {} | free {}",
                     with_commas(p.tokens), f.name, exact, p.automatic ? "auto" : "explicit",
                     with_commas(p.pages), with_commas(p.pages_fit), fits, state, format_bytes(p.runtime_bytes),
                     format_bytes(p.free_bytes));
}

size_t parse_bytes(const std::string& s, const std::string& what) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) fail("{}: '{}' is not a size (examples: 24GiB, 512MiB, 1000000)", what, s);
  double v;
  try {
    v = std::stod(s.substr(0, i));
  } catch (...) {
    fail("{}: '{}' is not a size", what, s);
  }
  std::string unit = s.substr(i);
  for (char& ch : unit) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  double mul;
  if (unit.empty() || unit == "b") mul = 1;
  else if (unit == "k" || unit == "kib") mul = 1024.0;
  else if (unit == "kb") mul = 1e3;
  else if (unit == "m" || unit == "mib") mul = 1024.0 * 1024;
  else if (unit == "mb") mul = 1e6;
  else if (unit == "g" || unit == "gib") mul = 1024.0 * 1024 * 1024;
  else if (unit == "gb") mul = 1e9;
  else if (unit == "t" || unit == "tib") mul = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "tb") mul = 1e12;
  else fail("{}: unknown unit '{}' in '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", what, s.substr(i), s);
  double bytes = v * mul;
  if (!(bytes > 0) || bytes > 1e18) fail("{}: '{}' is out of range", what, s);
  return size_t(std::llround(bytes));
}

}  // namespace ninfer
