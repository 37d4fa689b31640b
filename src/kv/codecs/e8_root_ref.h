// Block-level API of the seed's E8-root gain-shape code (bit format: e8_root_ref.cpp).
#pragma once
#include <cstdint>

namespace ninfer::codecs::e8root {

// Root r (0..239) as doubled coordinates: +-2 at two dims (112 roots +-e_i+-e_j) or +-1 at all
// eight (128 roots (+-1/2)^8 with an even number of minus signs). out: [8]
void root_doubled(int r, int* out);
// Encodes a block x: [8] with group scale g; decodes with the same g. out: [8]
uint16_t encode_block(const float* x, float g);
void decode_block(uint16_t code, float g, float* out);

}  // namespace ninfer::codecs::e8root
