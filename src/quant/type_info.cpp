// Block geometry of every ggml type id (decode support is filled in by the format files).
#include <array>
#include <cctype>
#include <string>

#include "common/error.h"
#include "quant/quant.h"

namespace memra::quant {
namespace {

using enum GgmlType;

struct Entry {
  uint32_t id;
  TypeInfo info;
};

// Geometry from the GGUF format: elements per block and bytes per block. `decodable` and
// `encodable` list what this project implements on the CPU.
constexpr Entry kEntries[] = {
    {0, {"f32", 1, 4, true, true}},
    {1, {"f16", 1, 2, true, true}},
    {2, {"q4_0", 32, 18, true, true}},
    {3, {"q4_1", 32, 20, true, true}},
    {6, {"q5_0", 32, 22, true, true}},
    {7, {"q5_1", 32, 24, true, true}},
    {8, {"q8_0", 32, 34, true, true}},
    {9, {"q8_1", 32, 36, false, false}},
    {10, {"q2_k", 256, 84, true, true}},
    {11, {"q3_k", 256, 110, true, true}},
    {12, {"q4_k", 256, 144, true, true}},
    {13, {"q5_k", 256, 176, true, true}},
    {14, {"q6_k", 256, 210, true, true}},
    {15, {"q8_k", 256, 292, false, false}},
    {16, {"iq2_xxs", 256, 66, false, false}},
    {17, {"iq2_xs", 256, 74, false, false}},
    {18, {"iq3_xxs", 256, 98, false, false}},
    {19, {"iq1_s", 256, 50, false, false}},
    {20, {"iq4_nl", 32, 18, true, true}},
    {21, {"iq3_s", 256, 110, false, false}},
    {22, {"iq2_s", 256, 82, false, false}},
    {23, {"iq4_xs", 256, 136, true, true}},
    {24, {"i8", 1, 1, false, false}},
    {25, {"i16", 1, 2, false, false}},
    {26, {"i32", 1, 4, false, false}},
    {27, {"i64", 1, 8, false, false}},
    {28, {"f64", 1, 8, false, false}},
    {29, {"iq1_m", 256, 56, false, false}},
    {30, {"bf16", 1, 2, true, true}},
    {34, {"tq1_0", 256, 54, false, false}},
    {35, {"tq2_0", 256, 66, false, false}},
    {39, {"mxfp4", 32, 17, false, false}},
};

constexpr std::array<const TypeInfo*, kGgmlTypeCount> build_table() {
  std::array<const TypeInfo*, kGgmlTypeCount> t{};
  for (const auto& e : kEntries) t[e.id] = &e.info;
  return t;
}
constexpr auto kTable = build_table();

}  // namespace

const TypeInfo* type_info(uint32_t type_id) {
  return type_id < kGgmlTypeCount ? kTable[type_id] : nullptr;
}

const TypeInfo& type_info(GgmlType type) {
  const TypeInfo* info = type_info(static_cast<uint32_t>(type));
  MEMRA_ASSERT(info != nullptr, "unknown ggml type id {}", static_cast<uint32_t>(type));
  return *info;
}

const char* type_name(GgmlType type) {
  const TypeInfo* info = type_info(static_cast<uint32_t>(type));
  return info ? info->name : "unknown";
}

std::optional<GgmlType> parse_type_name(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& e : kEntries)
    if (lower == e.info.name) return static_cast<GgmlType>(e.id);
  return std::nullopt;
}

size_t row_bytes(GgmlType type, int64_t n) {
  const TypeInfo& info = type_info(type);
  MEMRA_ASSERT(n >= 0 && n % info.block_elems == 0, "row of {} elements is not a whole number of {} blocks",
               n, info.name);
  return static_cast<size_t>(n / info.block_elems) * info.block_bytes;
}

}  // namespace memra::quant
