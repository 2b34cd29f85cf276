// Deterministic inputs and hashing shared by the quant tests (independent of the standard
// library's distributions, so golden values hold across toolchains).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace memra::test {

// splitmix64: a tiny counter-based generator; the golden generator script mirrors it exactly.
struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  // Standard normal (Box-Muller).
  float normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

inline std::vector<float> normal_vector(uint64_t seed, size_t n, float sigma = 1.0f) {
  SplitMix64 g(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = g.normal() * sigma;
  return v;
}

// FNV-1a over raw bytes.
inline uint64_t fnv1a(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace memra::test
