#include "kv/e8.h"

#include <cmath>

#include "kv/codecs/common.h"  // fp-contract off

namespace ninfer::e8 {

float nearest_d8_box(const float* u, int lo, int hi, int* z) {
  float dist = 0.0f;
  int parity = 0;
  float best_extra = INFINITY;
  int fix_i = 0, fix_to = 0;
  for (int i = 0; i < 8; ++i) {
    const float v = u[i];
    float r = std::nearbyint(v);
    r = std::fmin(std::fmax(r, float(lo)), float(hi));
    const int ri = int(r);
    z[i] = ri;
    parity ^= ri & 1;
    const float e = v - r;
    dist = dist + e * e;
    // The second-best value of this coordinate: the other neighbour of v, kept in range.
    int alt = v >= r ? ri + 1 : ri - 1;
    if (alt > hi) alt = ri - 1;
    if (alt < lo) alt = ri + 1;
    const float ea = v - float(alt);
    const float extra = ea * ea - e * e;
    if (extra < best_extra) {
      best_extra = extra;
      fix_i = i;
      fix_to = alt;
    }
  }
  if (parity) {
    z[fix_i] = fix_to;
    dist = dist + best_extra;
  }
  return dist;
}

void nearest_e8(const float* x, float* y) {
  constexpr int kBig = 1 << 23;
  int z0[8], z1[8];
  float u1[8];
  for (int i = 0; i < 8; ++i) u1[i] = x[i] - 0.5f;
  const float d0 = nearest_d8_box(x, -kBig, kBig, z0);
  const float d1 = nearest_d8_box(u1, -kBig, kBig, z1);
  for (int i = 0; i < 8; ++i) y[i] = d1 < d0 ? float(z1[i]) + 0.5f : float(z0[i]);
}

bool is_e8_doubled(const int* y2) {
  int odd = 0, sum = 0;
  for (int i = 0; i < 8; ++i) {
    odd += y2[i] & 1;
    sum += y2[i];
  }
  return (odd == 0 || odd == 8) && sum % 4 == 0;
}

}  // namespace ninfer::e8
