// The E8 lattice and its nearest-point search (Conway & Sloane, "Fast quantizing and decoding
// algorithms for lattice quantizers and codes", 1982).
//   D8 = { z in Z^8 : sum(z) even },   E8 = D8 u (D8 + 1/2 * 1).
// Nearest point of D8 to u: round every coordinate (half to even); if the sum is odd, move the
// coordinate whose rounding cost the least extra error to its other neighbour. The box form
// below restricts every coordinate to [lo, hi], which is the same rule with per-coordinate
// clamping; it is exact for the truncated lattice D8 n [lo, hi]^8 because the cost separates
// by coordinate and changing one coordinate by one flips the parity.
// Nearest point of E8: the nearer of the D8 answer for u and the D8 answer for u - 1/2 (plus
// 1/2); a tie keeps the integer coset.
// All arithmetic is fp32 in index order without FMA, so a GPU port can match it bit for bit.
#pragma once
#include <cstdint>

namespace ninfer::e8 {

// Nearest point z of D8 n [lo, hi]^8 to u (lo < hi integers). Returns |u - z|^2 (fp32, index
// order). Ties: rounding half to even; among equal parity-fix costs the lowest index moves;
// an exact-integer coordinate moves up (unless at hi).
// u: [8]; z: [8]
float nearest_d8_box(const float* u, int lo, int hi, int* z);

// Nearest point y of E8 to x (unbounded: |x_i| < 2^22). x: [8]; y: [8]
void nearest_e8(const float* x, float* y);

// True when y (doubled: 2*y as integers) is an E8 point: all even or all odd, sum(y) even.
bool is_e8_doubled(const int* y2);

}  // namespace ninfer::e8
