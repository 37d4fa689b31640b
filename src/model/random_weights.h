// Random weights of a real model shape, for speed runs where the values do not matter:
// uniform with standard deviation 0.02 (as initialisers use), norms 1.0 (0.0 for families that
// store norm weights as w - 1). A counter-based hash per tensor, so the same seed gives the same
// bytes on any machine, whether written to a file (`ninfer make-random-checkpoint`) or made in
// memory (`ninfer bench --random-weights`, for models whose files would not fit the disk).
#pragma once
#include <cstdint>
#include <memory>

#include "model/config.h"
#include "model/safetensors.h"

namespace ninfer {

// The random bf16 value of element i of a tensor whose seed is `tensor_seed`.
uint16_t random_bf16(uint64_t tensor_seed, uint64_t i, float scale);

// Fills dst[0, n) with tensor `index`'s values (a norm: every element `norm_value`), in parallel.
void fill_random_tensor(uint16_t* dst, size_t n, uint64_t seed, size_t index, bool norm, uint16_t norm_value);

// Whether a tensor of list_weights() is a norm (filled with the norm value).
bool is_norm_tensor(const std::string& name);

// The bf16 bits norm weight `name` of config c is filled with: 1.0, or 0.0 for w - 1 storage
// (Family::norm_offset_one), except a DeltaNet's gated norm, which multiplies by w as stored.
uint16_t norm_fill_value(const ModelConfig& c, const std::string& name);

// Every tensor config c binds (list_weights order), bf16, random, held in memory.
std::unique_ptr<TensorStore> random_tensor_store(const ModelConfig& c, uint64_t seed);

}  // namespace ninfer
