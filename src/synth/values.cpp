#include "synth/values.h"

#include <cmath>

namespace memra::synth {
namespace {

constexpr uint64_t kWeyl = 0x9E3779B97F4A7C15ull;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t element_hash(uint64_t key, uint64_t index) { return mix64(key + (index + 1) * kWeyl); }

// Irwin-Hall(4) of four 16-bit uniforms: mean 2, variance 4/12; rescaled to mean 0, variance 1.
inline float unit_normalish(uint64_t h) {
  const uint32_t sum = static_cast<uint32_t>(h & 0xFFFF) + static_cast<uint32_t>((h >> 16) & 0xFFFF) +
                       static_cast<uint32_t>((h >> 32) & 0xFFFF) + static_cast<uint32_t>(h >> 48);
  // (sum + 2) / 65536 is the sum of four uniforms on (0, 1) (half-step centred).
  constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3) / 2^16
  return (static_cast<float>(sum) + 2.0f - 131072.0f) * kScale;
}

// Uniform on [-1, 1) from the top 24 bits.
inline float unit_uniform_pm1(uint64_t h) {
  return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

}  // namespace

uint64_t tensor_key(uint64_t seed, std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a over the name
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return mix64(mix64(seed ^ 0x6D656D7261ull) ^ h);  // "memra": keeps seed 0 away from key 0
}

void fill_values(Init init, float scale, uint64_t key, uint64_t first, size_t count, float* out) {
  switch (init) {
    case Init::Embedding:
    case Init::Matrix:
    case Init::ResidualOut:
    case Init::SsmConv:
    case Init::Router:
      for (size_t i = 0; i < count; ++i) out[i] = scale * unit_normalish(element_hash(key, first + i));
      return;
    case Init::Norm:
    case Init::SsmNorm:
    case Init::SsmDtBias:
      // Norm-like: 1 + scale * U(-1, 1); dt bias: scale * U(-1, 1) (its `scale` carries the width,
      // offset 0, see plan.cpp).
      {
        const float offset = init == Init::SsmDtBias ? 0.0f : 1.0f;
        for (size_t i = 0; i < count; ++i) out[i] = offset + scale * unit_uniform_pm1(element_hash(key, first + i));
      }
      return;
    case Init::SsmA: {
      constexpr float kLog16 = 2.7725887f;
      for (size_t i = 0; i < count; ++i) {
        const float u = 0.5f * (unit_uniform_pm1(element_hash(key, first + i)) + 1.0f);  // [0, 1)
        out[i] = -std::exp(u * kLog16);
      }
      return;
    }
  }
}

}  // namespace memra::synth
