// The model shapes `memra synth` can write: every registered architecture's released sizes
// (declared in model/<arch>.cpp), internal to src/synth.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/arch.h"

namespace memra::synth {

// One (architecture, shape) pair: the shape's hyperparameters and the architecture's traits.
struct ModelShape : ArchShape {
  const Arch* arch = nullptr;

  const char* arch_name() const { return arch->name; }
  const ArchTraits& traits() const { return arch->traits; }
  bool hybrid() const { return arch->traits.hybrid; }
  bool moe() const { return n_expert > 0; }
  bool full_attention(int64_t layer) const { return (layer + 1) % full_attention_interval == 0; }
};

// The shape of (arch, shape). Throws memra::Error listing the valid archs, or the valid shapes
// of that arch.
ModelShape find_shape(std::string_view arch, std::string_view shape);

// All shapes: the architectures in registered_archs() order, each's shapes in its table order.
std::vector<ModelShape> all_shapes();

}  // namespace memra::synth
