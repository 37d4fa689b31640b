// `rk2v4-e8`: K with a 16-bit E8 code per 8 dims and an fp16 scale per 64-group, rotated by
// H_D; V as the `rk4v4-e8` V (32-bit E8 lattice code, rotated H_64; rk4v4_e8.cpp).
//
// The K codebook ("E8P-W", after QuIP#'s E8P, with whole orbits): 2^16 - 256 points of the
// shifted lattice E8 - 1/4*1,
//     y = sgn (.) a + t/4 * 1,   t in {+1, -1},
// where a runs over 255 ordered "abs patterns" of the half-integer coset D8 + 1/2 (entries in
// {1/2, 3/2, 5/2}): all permutations of the 8 leaders below (the whole permutation orbits of
// D8+1/2 with |a|^2 <= 10, 227 patterns, plus the orbit (5/2,5/2,1/2^6), 28 patterns), and sgn
// runs over the 128 sign vectors with #negatives = p(a) mod 2 (so sgn (.) a stays in
// D8 + 1/2). Every coordinate is nonzero, so 7 sign bits are free and the 8th is implied.
// Measured on i.i.d. Gaussian rows with one rms scale it has normalized MSE 0.0887 (the 65,536
// smallest E8 points: 0.0880; QuIP#'s partial-orbit E8P: 0.0887; 2-bit Lloyd-Max: 0.1175);
// with the two scale candidates below, 0.0881 (docs/BENCHMARKS.md).
//
//   leader (desc., x2)  |a|^2  p   extra = sum_k a_k b_k - P8/2 (b sorted desc., P prefix sums)
//   0  1 1 1 1 1 1 1 1    2    0   0
//   1  3 1 1 1 1 1 1 1    4    1   P1
//   2  3 3 1 1 1 1 1 1    6    0   P2
//   3  3 3 3 1 1 1 1 1    8    1   P3
//   4  5 1 1 1 1 1 1 1    8    0   2 P1
//   5  3 3 3 3 1 1 1 1   10    0   P4
//   6  5 3 1 1 1 1 1 1   10    1   P1 + P2
//   7  5 5 1 1 1 1 1 1   14    0   2 P2
//
// Code (uint16, little-endian): bits 0..7 = abs-pattern index (patterns ordered by leader,
// then by the base-3 key sum_i ((a_i*2 - 1)/2) 3^i ascending; index 255 is never written),
// bits 8..14 = signs of coordinates 0..6 (1 = negative), bit 15 = shift (0: +1/4, 1: -1/4).
// The sign of coordinate 7 is negative iff (popcount(bits 8..14) + p(a)) is odd.
//
// Row layout (K side), D = head_dim:
//   bytes [0, D/4)            codes: block b (values 8b..8b+7) as uint16 at byte 2b
//   bytes [D/4, D/4 + D/32)   scales: fp16 little-endian, group g at byte D/4 + 2g
// Encode (per 64-group of the prepared row x; NaN/Inf and rotation as in common.h):
//   two scale candidates, s = fp16(sqrt(tree_sumsq64(x_g) * (1/64)) * 0.952381) (rms / 1.05)
//   and s = fp16(amax(x_g) / 2.75) (the extreme value lands on the outermost coordinate);
//   per candidate and block: u_i = x_i / s (s == 0 -> u = 0), code = the nearest codeword to
//   u, found by the structured search below (exact: equals brute force over all 65,280
//   codewords); err = ((sum of the 8 block distances, in block order) * s) * s. Keep the
//   candidate with the least err (the rms one on ties) and store its s and codes.
// Decode: y_i = (sgn_i * a_i * 2 + (t ? -1 : 1)) / 4, x_i = y_i * s; as integers 4y_i is odd
//   in [-11, 11]: an int8 expansion with the group scale s/4. The decoder is one 256-entry
//   table (1 KiB: 8 nibbles per pattern), a popcount and sign/shift arithmetic.
//
// Structured encoder (per shift t; nearest point = min over t of |w|^2 - P8 + cost_L):
//   w_i = u_i - t/4, b_i = |w_i|, n_i = (w_i < 0), n2 = sum w_i^2 (index order)
//   rank r_i = #{j: b_j > b_i or (b_j == b_i and j < i)}; sorted b by rank; P1..P4, P8
//   prefix sums in rank order; for each leader L: cost_L = |a_L|^2 - 2 extra_L
//   + (popcount(n) + p_L odd ? 2 b_(rank 7) : 0)   (flip the sign of the smallest |w|)
//   best L = first minimum; D_t = (n2 - P8) + cost_L; keep t = +1 unless D_{-1} < D_{+1}.
//   The codeword puts leader value k at the coordinate of rank k with the sign of w (the
//   rank-7 coordinate flipped on a parity mismatch). Sorted matching is optimal for each
//   orbit (rearrangement inequality), and the cheapest parity fix is the smallest product.
// Cost per 8-dim block: 8 divisions, then per shift 8 sub + 8 abs + 15 (n2) + 28 compares
// and 28 adds (ranks) + 8 scatter + 7 adds (prefix) + 8 x 4 (leaders) + 8 (argmin) ~ 150
// flops/int ops, ~300 for both shifts, + ~40 to pack: about 350 simple operations and one
// 6.5 KB table lookup per block and scale candidate (700 for the two), vs 65,536 x 16 flops
// for brute force.
#include "kv/codecs/rk2v4_e8.h"

#include <array>
#include <bit>
#include <cmath>

#include "kv/codecs/codecs.h"
#include "kv/codecs/common.h"
#include "kv/codecs/sides.h"

namespace ninfer::codecs {

namespace e8p16 {
namespace {

constexpr int kLeaders = 8;
// Leaders as doubled values, descending; their |a|^2 (real units) and sign parity.
constexpr int kLeader[kLeaders][8] = {
    {1, 1, 1, 1, 1, 1, 1, 1}, {3, 1, 1, 1, 1, 1, 1, 1}, {3, 3, 1, 1, 1, 1, 1, 1},
    {3, 3, 3, 1, 1, 1, 1, 1}, {5, 1, 1, 1, 1, 1, 1, 1}, {3, 3, 3, 3, 1, 1, 1, 1},
    {5, 3, 1, 1, 1, 1, 1, 1}, {5, 5, 1, 1, 1, 1, 1, 1}};
constexpr float kLeaderNorm2[kLeaders] = {2, 4, 6, 8, 8, 10, 10, 14};
constexpr int kLeaderParity[kLeaders] = {0, 1, 0, 1, 0, 0, 1, 0};
// extra_L = c1 P1 + c2 P2 + c3 P3 + c4 P4
constexpr float kExtraCoef[kLeaders][4] = {{0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0},
                                           {2, 0, 0, 0}, {0, 0, 0, 1}, {1, 1, 0, 0}, {0, 2, 0, 0}};
constexpr int kKeys = 6561;  // 3^8

// Leader of the ordered abs pattern with base-3 key `key` (digit i = (a_i*2 - 1)/2), or -1.
constexpr int leader_of_key(int key) {
  int v[8];
  for (int i = 0; i < 8; ++i, key /= 3) v[i] = 2 * (key % 3) + 1;
  for (int i = 0; i < 8; ++i)  // insertion sort, descending
    for (int j = i; j > 0 && v[j] > v[j - 1]; --j) {
      int t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  for (int l = 0; l < kLeaders; ++l) {
    bool eq = true;
    for (int i = 0; i < 8; ++i) eq = eq && v[i] == kLeader[l][i];
    if (eq) return l;
  }
  return -1;
}

struct Tables {
  std::array<uint32_t, 256> abs{};
  std::array<uint8_t, 256> parity{};
  std::array<uint8_t, kKeys> index{};  // pattern index of a key, 255 if not in the codebook
};

constexpr Tables make_tables() {
  Tables t;
  std::array<int8_t, kKeys> leader{};
  for (int k = 0; k < kKeys; ++k) leader[k] = int8_t(leader_of_key(k));
  for (int k = 0; k < kKeys; ++k) t.index[k] = 255;
  int n = 0;
  for (int l = 0; l < kLeaders; ++l) {
    for (int k = 0; k < kKeys; ++k) {
      if (leader[k] != l) continue;
      uint32_t word = 0;
      for (int i = 0, key = k; i < 8; ++i, key /= 3) word |= uint32_t(2 * (key % 3) + 1) << (4 * i);
      t.abs[n] = word;
      t.parity[n] = uint8_t(kLeaderParity[l]);
      t.index[k] = uint8_t(n);
      ++n;
    }
  }
  // n == 255 here (checked below); index 255 decodes as pattern 0 but is never written.
  t.abs[255] = t.abs[0];
  t.parity[255] = t.parity[0];
  return t;
}

constexpr Tables kTables = make_tables();
constexpr int count_patterns() {
  int n = 0;
  for (int k = 0; k < kKeys; ++k) n += kTables.index[k] != 255;
  return n;
}
static_assert(count_patterns() == kPatterns, "E8P-W has 227 + 28 abs patterns");

struct ShiftResult {
  float dist;  // |w - y|^2 up to fp32 rounding
  int leader;
  int rank[8];
  bool neg[8];
  bool mismatch;
};

ShiftResult search_shift(const float* u, float shift) {
  ShiftResult r;
  float w[8], b[8], sorted[8];
  float n2 = 0.0f;
  int negs = 0;
  for (int i = 0; i < 8; ++i) {
    w[i] = u[i] - shift;
    b[i] = std::fabs(w[i]);
    r.neg[i] = w[i] < 0.0f;
    negs += r.neg[i];
    n2 = n2 + w[i] * w[i];
  }
  for (int i = 0; i < 8; ++i) r.rank[i] = 0;
  for (int i = 0; i < 8; ++i)
    for (int j = i + 1; j < 8; ++j) {
      if (b[j] > b[i]) ++r.rank[i];  // j before i
      else ++r.rank[j];              // ties: the lower index i comes first
    }
  for (int i = 0; i < 8; ++i) sorted[r.rank[i]] = b[i];
  const float p1 = sorted[0], p2 = p1 + sorted[1], p3 = p2 + sorted[2], p4 = p3 + sorted[3];
  const float p8 = ((p4 + sorted[4]) + sorted[5] + sorted[6]) + sorted[7];
  const float flip = 2.0f * sorted[7];
  float best = INFINITY;
  r.leader = 0;
  r.mismatch = false;
  for (int l = 0; l < kLeaders; ++l) {
    const float* c = kExtraCoef[l];
    const float extra = c[0] * p1 + c[1] * p2 + c[2] * p3 + c[3] * p4;
    const bool mis = ((negs + kLeaderParity[l]) & 1) != 0;
    const float cost = (kLeaderNorm2[l] - 2.0f * extra) + (mis ? flip : 0.0f);
    if (cost < best) {
      best = cost;
      r.leader = l;
      r.mismatch = mis;
    }
  }
  r.dist = (n2 - p8) + best;
  return r;
}

}  // namespace

uint32_t abs_pattern(int idx) { return kTables.abs[idx & 0xFF]; }

uint16_t encode_block(const float* u, float* dist) {
  const ShiftResult rp = search_shift(u, 0.25f);   // t = +1 (bit 15 = 0)
  const ShiftResult rm = search_shift(u, -0.25f);  // t = -1 (bit 15 = 1)
  const bool minus = rm.dist < rp.dist;
  const ShiftResult& r = minus ? rm : rp;
  if (dist) *dist = r.dist;
  int key = 0, pow3 = 1;
  unsigned signs = 0;
  for (int i = 0; i < 8; ++i, pow3 *= 3) {
    key += (kLeader[r.leader][r.rank[i]] - 1) / 2 * pow3;
    const bool neg = r.neg[i] != (r.mismatch && r.rank[i] == 7);
    if (i < 7) signs |= unsigned(neg) << i;
  }
  return uint16_t(kTables.index[key] | (signs << 8) | (unsigned(minus) << 15));
}

void decode_block_q4(uint16_t code, int* q) {
  const int idx = code & 0xFF;
  const uint32_t a = kTables.abs[idx];
  const unsigned signs = (code >> 8) & 0x7F;
  const unsigned neg7 = (unsigned(std::popcount(signs)) + kTables.parity[idx]) & 1;
  const int t = (code >> 15) ? -1 : 1;
  for (int i = 0; i < 8; ++i) {
    const int v = int((a >> (4 * i)) & 0xF);
    const bool neg = i < 7 ? (signs >> i) & 1 : neg7;
    q[i] = (neg ? -2 * v : 2 * v) + t;
  }
}

void decode_block(uint16_t code, float* y) {
  int q[8];
  decode_block_q4(code, q);
  for (int i = 0; i < 8; ++i) y[i] = float(q[i]) * 0.25f;
}

namespace {

// search_shift for the 8 blocks of a group at once, the blocks as SIMD lanes: every sum and
// comparison is the per-block one in the same order, so the results are bit for bit
// encode_block's (tests/kv/test_e8_codes.cpp).
struct GroupShift {
  float dist[8];
  uint32_t leader[8], mismatch[8], neg[8][8], rank[8][8];  // [coordinate][block]
};

void search_shift_group(const float (&u)[8][8], float shift, GroupShift& r) {
  float w[8][8], b[8][8], sorted[8][8];
  float n2[8];
  uint32_t negs[8];
  for (int k = 0; k < 8; ++k) n2[k] = 0.0f, negs[k] = 0;
  for (int i = 0; i < 8; ++i) {
    NINFER_BLOCK_LANES
    for (int k = 0; k < 8; ++k) {
      w[i][k] = u[i][k] - shift;
      b[i][k] = std::fabs(w[i][k]);
      r.neg[i][k] = w[i][k] < 0.0f;
      negs[k] += r.neg[i][k];
      n2[k] = n2[k] + w[i][k] * w[i][k];
      r.rank[i][k] = 0;
    }
  }
  for (int i = 0; i < 8; ++i)
    for (int j = i + 1; j < 8; ++j) {
      NINFER_BLOCK_LANES
      for (int k = 0; k < 8; ++k) {
        const uint32_t before = b[j][k] > b[i][k];  // j before i; ties: the lower index i first
        r.rank[i][k] += before;
        r.rank[j][k] += 1 - before;
      }
    }
  for (int q = 0; q < 8; ++q) {
    NINFER_BLOCK_LANES
    for (int k = 0; k < 8; ++k) {
      float v = 0.0f;
      for (int i = 0; i < 8; ++i) v = select_f32(r.rank[i][k] == uint32_t(q), b[i][k], v);
      sorted[q][k] = v;
    }
  }
  float best[8];
  NINFER_BLOCK_LANES
  for (int k = 0; k < 8; ++k) best[k] = INFINITY, r.leader[k] = 0, r.mismatch[k] = 0;
  for (int l = 0; l < kLeaders; ++l) {
    const float* c = kExtraCoef[l];
    NINFER_BLOCK_LANES
    for (int k = 0; k < 8; ++k) {
      const float p1 = sorted[0][k], p2 = p1 + sorted[1][k], p3 = p2 + sorted[2][k], p4 = p3 + sorted[3][k];
      const float extra = c[0] * p1 + c[1] * p2 + c[2] * p3 + c[3] * p4;
      const uint32_t mis = (negs[k] + uint32_t(kLeaderParity[l])) & 1u;
      const float flip = 2.0f * sorted[7][k];
      const float cost = (kLeaderNorm2[l] - 2.0f * extra) + select_f32(mis != 0, flip, 0.0f);
      const bool better = cost < best[k];
      best[k] = select_f32(better, cost, best[k]);
      r.leader[k] = select_u32(better, uint32_t(l), r.leader[k]);
      r.mismatch[k] = select_u32(better, mis, r.mismatch[k]);
    }
  }
  NINFER_BLOCK_LANES
  for (int k = 0; k < 8; ++k) {
    const float p1 = sorted[0][k], p2 = p1 + sorted[1][k], p3 = p2 + sorted[2][k], p4 = p3 + sorted[3][k];
    const float p8 = ((p4 + sorted[4][k]) + sorted[5][k] + sorted[6][k]) + sorted[7][k];
    r.dist[k] = (n2[k] - p8) + best[k];
  }
}

}  // namespace

NINFER_HOT_LOOP float encode_group(const float* x, float s, uint16_t codes[8]) {
  float u[8][8];  // [coordinate][block]
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 8; ++k) u[i][k] = s > 0.0f ? x[8 * k + i] / s : 0.0f;
  GroupShift rp, rm;
  search_shift_group(u, 0.25f, rp);   // t = +1 (bit 15 = 0)
  search_shift_group(u, -0.25f, rm);  // t = -1 (bit 15 = 1)
  float err = 0.0f;
  for (int k = 0; k < 8; ++k) {
    const bool minus = rm.dist[k] < rp.dist[k];
    const GroupShift& r = minus ? rm : rp;
    int key = 0, pow3 = 1;
    unsigned signs = 0;
    for (int i = 0; i < 8; ++i, pow3 *= 3) {
      const uint32_t rank = r.rank[i][k];
      key += (kLeader[r.leader[k]][rank] - 1) / 2 * pow3;
      const bool neg = (r.neg[i][k] != 0) != (r.mismatch[k] != 0 && rank == 7);
      if (i < 7) signs |= unsigned(neg) << i;
    }
    codes[k] = uint16_t(kTables.index[key] | (signs << 8) | (unsigned(minus) << 15));
    err = err + r.dist[k];
  }
  return err;
}

uint16_t encode_block_brute(const float* u) {
  double best = INFINITY;
  uint16_t best_code = 0;
  for (uint32_t c = 0; c < 65536; ++c) {
    if (!is_canonical(uint16_t(c))) continue;
    int q[8];
    decode_block_q4(uint16_t(c), q);
    double d = 0;
    for (int i = 0; i < 8; ++i) {
      const double e = double(u[i]) - 0.25 * q[i];
      d += e * e;
    }
    if (d < best) {
      best = d;
      best_code = uint16_t(c);
    }
  }
  return best_code;
}

}  // namespace e8p16

namespace {

constexpr KvPlane kPlanes[] = {{"e8p codes (u16 per 8)", DType::U8, 8, 2, 0},
                               {"scales", DType::F16, 64, 1, 0}};
size_t k_bytes(int d) { return planes_bytes(kPlanes, d); }

NINFER_HOT_LOOP void k_encode(const float* raw, int d, uint8_t* out) {
  float x[kMaxHeadDim];
  prepare_row(raw, d, KvRotation::HadamardHead, x);
  uint8_t* scales = out + d / 4;
  for (int g = 0; g < d; g += 64) {
    const float rms = std::sqrt(tree_sumsq64(x + g) * (1.0f / 64.0f));
    const float raw_scales[2] = {rms * e8p16::kRmsMul, amax(x + g, 64) / e8p16::kAmaxDiv};
    // best_scale_codes(x + g, raw_scales, 2, e8p16::encode_block, best_codes), a group at a time
    uint16_t best_codes[8] = {}, codes[8];  // replaced: every err is finite
    uint16_t best_bits = 0;
    float best_err = INFINITY;
    for (const float raw : raw_scales) {
      uint16_t sbits;
      const float s = fp16_scale(raw, &sbits);
      const float err = (e8p16::encode_group(x + g, s, codes) * s) * s;
      if (err < best_err) {
        best_err = err;
        best_bits = sbits;
        for (int b = 0; b < 8; ++b) best_codes[b] = codes[b];
      }
    }
    store_u16(scales + g / 32, best_bits);
    for (int b = 0; b < 8; ++b) store_u16(out + (g + 8 * b) / 4, best_codes[b]);
  }
}

// e8p16::decode_block inlined and branch-free (the CPU attention's inner loop): per block one
// abs-pattern lookup and a popcount; per value q = +-2a + t with the sign applied as
// (v ^ -neg) + neg.
NINFER_HOT_LOOP void k_decode(const uint8_t* in, int d, float* out) {
  const uint8_t* scales = in + d / 4;
  for (int g = 0; g < d; g += 64) {
    const float s = f16_to_f32(load_u16(scales + g / 32));
    for (int b = g; b < g + 64; b += 8) {
      const uint32_t code = load_u16(in + b / 4);
      const uint32_t idx = code & 0xFF, signs7 = (code >> 8) & 0x7F;
      const uint32_t a = e8p16::kTables.abs[idx];
      const uint32_t neg7 = (uint32_t(std::popcount(signs7)) + e8p16::kTables.parity[idx]) & 1;
      const uint32_t signs = signs7 | (neg7 << 7);
      const int t = 1 - 2 * int(code >> 15);
      NINFER_BLOCK_LANES
      for (int i = 0; i < 8; ++i) {
        const int v = 2 * int(nibble(a, i)), neg = int((signs >> i) & 1);
        const int q = (v ^ -neg) + neg + t;
        out[b + i] = (float(q) * 0.25f) * s;
      }
    }
  }
}

}  // namespace

constinit const KvFormat kRk2v4E8Format{
    "rk2v4-e8", "K: E8 code 16 bits/8 dims (E8P-W) + fp16 scale per 64, rotated H_D; V as rk4v4-e8", 64,
    {KvRotation::HadamardHead, k_bytes, k_encode, k_decode, kPlanes},
    {KvRotation::Hadamard64, e8l32_bytes, e8l32_encode<KvRotation::Hadamard64>, e8l32_decode, kE8L32Planes}};

}  // namespace ninfer::codecs
