// The architecture registry.
#include "model/arch.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace memra {

namespace {
std::vector<const Arch*>& registry() {
  static std::vector<const Arch*> archs;
  return archs;
}
}  // namespace

ArchRegistrar::ArchRegistrar(const Arch& arch) {
  MEMRA_ASSERT(find_arch(arch.name) == nullptr, "architecture {} registered twice", arch.name);
  registry().push_back(&arch);
}

const Arch* find_arch(std::string_view name) {
  for (const Arch* a : registry())
    if (name == a->name) return a;
  return nullptr;
}

std::vector<const Arch*> registered_archs() {
  std::vector<const Arch*> archs = registry();
  std::sort(archs.begin(), archs.end(), [](const Arch* a, const Arch* b) {
    if (a->traits.hybrid != b->traits.hybrid) return a->traits.hybrid;
    return std::strcmp(a->name, b->name) < 0;
  });
  return archs;
}

std::string arch_names() {
  std::string names;
  for (const Arch* a : registered_archs()) names += (names.empty() ? "" : ", ") + std::string(a->name);
  return names;
}

}  // namespace memra
