#include "synth/shapes.h"

#include <string>

#include "common/error.h"

namespace memra::synth {

std::vector<ModelShape> all_shapes() {
  std::vector<ModelShape> all;
  for (const Arch* a : registered_archs())
    for (const ArchShape& s : a->shapes) all.push_back(ModelShape{s, a});
  return all;
}

ModelShape find_shape(std::string_view arch, std::string_view shape) {
  const Arch* a = find_arch(arch);
  if (!a) fail("unknown architecture '{}': valid architectures are {}", arch, arch_names());
  std::string arch_shapes;
  for (const ArchShape& s : a->shapes) {
    if (shape == s.name) return ModelShape{s, a};
    arch_shapes += arch_shapes.empty() ? "" : ", ";
    arch_shapes += s.name;
  }
  fail("unknown shape '{}' for architecture {}: valid shapes are {}", shape, arch, arch_shapes);
}

}  // namespace memra::synth
