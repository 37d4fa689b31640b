// The exact KV window (KIVI-style residual window, issue 30): the first `sink` tokens of every
// sequence (attention sinks) and its most recent tokens are attended with their bf16 values
// instead of the format's codes. Format- and backend-independent rules; the CPU backend
// implements them (backend/cpu), other backends refuse a window that is on.
//
// Storage. The compressed page pool is unchanged: every token is encoded into its page as
// always (from its bf16-rounded row while a window is on, so that a code does not depend on
// how the tokens were chunked). Besides it, each sequence holds one window slot of
// exact_pages() bf16 pages per attention layer, K and V, each page laid out as a compressed one
// ([n_kv_heads][kPageSize][head_dim], rows in the raw, unrotated basis):
//   pages [0, sink_pages)                       the sink: token p < sink at page p / kPageSize
//   pages [sink_pages, sink_pages + ring_pages) the recent ring: logical page b at
//                                               sink_pages + b % ring_pages
// Which keys are exact. For a query at position q (the sequence then holds n = q + 1 tokens)
// key k is exact iff k < sink or k >= boundary(n). boundary(n) is the first token of the first
// page that is not yet complete and older than the recent window: page b is compressed (read
// from the pool) once (b + 1) * kPageSize <= n - recent. So between `recent` and
// recent + kPageSize - 1 of the newest tokens are exact, and at most ring_pages() logical pages
// are ever in the window. recent == 0 means no recent window (every token past the sink is read
// compressed at once, as without a window). The rule depends on q only, so a chunked prefill
// attends exactly as token-by-token decoding does.
//
// Attention over a sequence = the compressed keys [sink, boundary) merged with the exact keys
// [0, sink) and [boundary, n) (one softmax; a GPU kernel can compute the two parts separately
// and merge them by log-sum-exp, like its split-K partials).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kv/page_table.h"

namespace ninfer {

struct KvWindow {
  int sink = 0;    // --kv-sink: first tokens kept exact
  int recent = 0;  // --kv-recent: newest tokens kept exact (0: none)

  bool on() const { return sink > 0 || recent > 0; }
  int sink_pages() const { return pages_for_tokens(sink); }
  // Logical pages that can be in the recent window at once: ceil(recent / kPageSize) + 1.
  int ring_pages() const { return recent > 0 ? pages_for_tokens(recent) + 1 : 0; }
  int exact_pages() const { return sink_pages() + ring_pages(); }
  // The first recent-window token of a sequence of n tokens (n when recent == 0).
  int64_t boundary(int64_t n) const {
    if (recent <= 0) return n;
    return std::max<int64_t>(0, n - recent) / kPageSize * kPageSize;
  }
  // Whether the query at position qpos reads key `key` (<= qpos) exactly.
  bool exact(int64_t key, int64_t qpos) const { return key < sink || (recent > 0 && key >= boundary(qpos + 1)); }
  // Window page index (within the slot) and slot row of an exact key that the window holds.
  int page_of(int64_t key) const {
    return key < sink ? int(key / kPageSize) : sink_pages() + int(key / kPageSize % ring_pages());
  }
  // Whether the window slot must hold `key` once the sequence holds n tokens.
  bool holds(int64_t key, int64_t n) const { return key < sink || (recent > 0 && key >= boundary(n)); }
  bool operator==(const KvWindow&) const = default;
};

// The largest --kv-sink / --kv-recent accepted (a window of 64K tokens is no longer small).
constexpr int kMaxKvWindow = 65536;

// Throws Error naming --kv-sink or --kv-recent when a value is negative or above kMaxKvWindow.
// A value of -1 means "the format's default" and is accepted.
void check_kv_window_flags(int sink, int recent);

// The window a format gets by default (measured, docs/BENCHMARKS.md "Model quality per format").
KvWindow default_kv_window(std::string_view format_name);

// The window for `format_name` from --kv-sink / --kv-recent (-1: the format's default).
KvWindow resolve_kv_window(std::string_view format_name, int sink_flag, int recent_flag);

// Bytes of one window slot: exact_pages() bf16 pages, K and V, over n_attention_layers layers
// of n_kv_heads heads of head_dim values.
size_t kv_window_slot_bytes(const KvWindow& w, int n_attention_layers, int n_kv_heads, int head_dim);

}  // namespace ninfer
