// Philox4x32-10 counter-based generator and the Gumbel noise the sampler adds to logits.
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) with the
// standard Random123 constants. A draw is a pure function of (key, counter), so the GPU can
// compute the noise of any (request, token, vocab id) independently, in any thread order.
//
// Sampler layout:
//   key     = (seed & 0xffffffff, seed >> 32)                  -- the request's 64-bit seed
//   counter = (token_index & 0xffffffff, token_index >> 32, vocab_id, 0)
//   bits    = word 0 of the Philox4x32-10 output block
// The other three output words are unused: one block per (token, id) keeps the mapping trivial
// for a kernel (thread = id) and the noise independent of how ids are grouped.
//
// From bits x to a uniform u in the open interval (0, 1): conceptually u = (x + 0.5) * 2^-32,
// never 0 or 1. To keep full precision in both tails the float computation works on the
// distance to the nearer end, w = min(u, 1 - u) = (2y + 1) * 2^-33 with y = x (top bit clear,
// u < 1/2) or y = ~x (top bit set, u > 1/2); 2y + 1 < 2^32 is converted to float with one
// round-to-nearest and scaled by 2^-33 exactly. Then the standard exponential variate
//   E = -log(u) = -log(w)        (u < 1/2)
//             = -log1p(-w)       (u > 1/2, accurate even when u is within 2^-33 of 1)
// and the Gumbel variate g = -log(E). All of it uses det_math.h, so host and device agree bit
// for bit. Range: E in [1.16e-10, 22.87]; g in [-3.12999463, 22.8738575] over all 2^32 inputs
// (exhaustive run), inside kGumbelMin / kGumbelMax.
#pragma once

#include <cstdint>

#include "step/det_math.h"

namespace memra {

struct PhiloxBlock {
  uint32_t w[4];
};

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;  // multipliers
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // Weyl key increments (golden ratio, sqrt 3 - 1)
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

MEMRA_HD inline PhiloxBlock philox4x32_10(PhiloxBlock ctr, uint32_t key0, uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kPhiloxW0;
      key1 += kPhiloxW1;
    }
    uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * ctr.w[0];
    uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * ctr.w[2];
    ctr = PhiloxBlock{{static_cast<uint32_t>(p1 >> 32) ^ ctr.w[1] ^ key0, static_cast<uint32_t>(p1),
                       static_cast<uint32_t>(p0 >> 32) ^ ctr.w[3] ^ key1, static_cast<uint32_t>(p0)}};
  }
  return ctr;
}

// The 32 random bits for vocab id `vocab_id` of token `token_index` of the request seeded `seed`.
MEMRA_HD inline uint32_t sampling_bits(uint64_t seed, uint64_t token_index, uint32_t vocab_id) {
  PhiloxBlock ctr{{static_cast<uint32_t>(token_index), static_cast<uint32_t>(token_index >> 32), vocab_id, 0u}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)).w[0];
}

// The uniform u = (x + 0.5) * 2^-32 as a float. Loses precision near 1 (rounds to the nearest
// float); the sampler does not use it, it uses exp1_from_bits(), which does not.
MEMRA_HD inline float uniform_from_bits(uint32_t x) {
  if ((x >> 31) == 0) return det::mul_rn(det::u32_to_float_rn(2u * x + 1u), 0x1p-33f);
  float w = det::mul_rn(det::u32_to_float_rn(2u * ~x + 1u), 0x1p-33f);
  return det::sub_rn(1.0f, w);
}

// Standard exponential variate E = -log(u), u = (x + 0.5) * 2^-32 (see the file comment).
MEMRA_HD inline float exp1_from_bits(uint32_t x) {
  bool upper = (x >> 31) != 0;
  uint32_t y = upper ? ~x : x;                                          // y < 2^31
  float w = det::mul_rn(det::u32_to_float_rn(2u * y + 1u), 0x1p-33f);   // min(u, 1 - u), in (0, 1/2]
  float l = upper ? det::log1p(-w) : det::log(w);
  return -l;
}

// Bounds on every value gumbel_from_bits() can return (actual range above, with margin).
// The sampler uses them to skip ids that cannot win; tests check them at the extreme inputs.
inline constexpr float kGumbelMin = -4.0f;
inline constexpr float kGumbelMax = 24.0f;

// Gumbel(0, 1) variate g = -log(-log(u)).
MEMRA_HD inline float gumbel_from_bits(uint32_t x) { return -det::log(exp1_from_bits(x)); }

MEMRA_HD inline float gumbel_noise(uint64_t seed, uint64_t token_index, uint32_t vocab_id) {
  return gumbel_from_bits(sampling_bits(seed, token_index, vocab_id));
}

}  // namespace memra
