// Normalized Sylvester Hadamard transform H_n (n a power of two), natural order:
// H_n[i][j] = (-1)^popcount(i & j) / sqrt(n). Symmetric and its own inverse.
// Fixed operation order (radix-2 butterflies, stride 1 first, then one multiply by
// 1/sqrt(n) at the end) so a GPU version can reproduce it bit for bit.
#pragma once

namespace ninfer {

// x: [n], n a power of two.
void hadamard_inplace(float* x, int n);

}  // namespace ninfer
