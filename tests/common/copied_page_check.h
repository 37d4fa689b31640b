// Shared by the CPU and GPU tests of Backend::copy_kv_pages: the logits of one decode step
// (token 777 after 64 prompt tokens) over block table [0, 1], and of the same step over
// [4, 2] after copying page 0 to page 4. Placement never changes results, so a correct copy
// gives bitwise equal logits; a wrong layer stride, side or length does not.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "kv/format.h"

namespace ninfer::test {

struct CopiedPageRun {
  std::vector<float> original, copied;
};

inline CopiedPageRun run_copied_page_check(Backend& be, const KvFormat& fmt) {
  be.init_kv(fmt, 6);
  std::vector<int32_t> t;
  for (int i = 0; i < 64; ++i) t.push_back(int32_t(3 + (i * 131) % 8000));
  const int32_t x = 777;
  std::vector<float> prompt_logits;
  CopiedPageRun r;
  const int32_t bt_a[2] = {0, 1}, bt_b[2] = {4, 2};
  SeqChunk fill{t.data(), 64, 0, bt_a, 2, false};
  be.forward({&fill, 1}, prompt_logits);
  SeqChunk step_a{&x, 1, 64, bt_a, 2, false};
  be.forward({&step_a, 1}, r.original);
  const int32_t src[1] = {0}, dst[1] = {4};
  be.copy_kv_pages(src, dst);
  SeqChunk step_b{&x, 1, 64, bt_b, 2, false};
  be.forward({&step_b, 1}, r.copied);
  return r;
}

}  // namespace ninfer::test
