// Row-level entry points: pick the codec of a type, check the request, run the row kernel.
#include <array>
#include <string>

#include "common/error.h"
#include "quant/codec.h"
#include "quant/quant.h"

namespace memra::quant {
namespace {

using detail::RowCodec;

std::array<RowCodec, kGgmlTypeCount> build_codecs() {
  std::array<RowCodec, kGgmlTypeCount> t{};
  auto set = [&](GgmlType type, RowCodec c) { t[static_cast<uint32_t>(type)] = c; };
  set(GgmlType::F32, detail::codec_f32());
  set(GgmlType::F16, detail::codec_f16());
  set(GgmlType::BF16, detail::codec_bf16());
  set(GgmlType::Q4_0, detail::codec_q4_0());
  set(GgmlType::Q4_1, detail::codec_q4_1());
  set(GgmlType::Q5_0, detail::codec_q5_0());
  set(GgmlType::Q5_1, detail::codec_q5_1());
  set(GgmlType::Q8_0, detail::codec_q8_0());
  set(GgmlType::Q2_K, detail::codec_q2_k());
  set(GgmlType::Q3_K, detail::codec_q3_k());
  set(GgmlType::Q4_K, detail::codec_q4_k());
  set(GgmlType::Q5_K, detail::codec_q5_k());
  set(GgmlType::Q6_K, detail::codec_q6_k());
  set(GgmlType::IQ4_NL, detail::codec_iq4_nl());
  set(GgmlType::IQ4_XS, detail::codec_iq4_xs());
  return t;
}

const std::array<RowCodec, kGgmlTypeCount>& codecs() {
  static const auto table = build_codecs();
  return table;
}

// Comma-separated names of the types with the given capability, in id order.
std::string supported_list(bool encode) {
  std::string out;
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
    const TypeInfo* info = type_info(id);
    if (!info || !(encode ? info->encodable : info->decodable)) continue;
    if (!out.empty()) out += ", ";
    out += info->name;
  }
  return out;
}

// The codec of `type` for decoding (encode = false) or encoding; throws for unsupported types.
const RowCodec& codec_for(GgmlType type, bool encode, int64_t n) {
  const auto id = static_cast<uint32_t>(type);
  const TypeInfo* info = type_info(id);
  if (!info) fail("tensor type id {} is unknown to memra (supported: {})", id, supported_list(encode));
  const RowCodec& c = codecs()[id];
  const bool ok = encode ? (info->encodable && c.quant) : (info->decodable && c.dequant);
  if (!ok) {
    if (encode) fail("cannot write tensor type {}: memra encodes only {}", info->name, supported_list(true));
    fail("tensor type {} is not supported by memra (supported: {})", info->name, supported_list(false));
  }
  MEMRA_ASSERT(c.block_elems == info->block_elems, "codec of {} disagrees with the type table", info->name);
  MEMRA_ASSERT(n >= 0 && n % info->block_elems == 0, "row of {} elements is not a whole number of {} blocks", n,
               info->name);
  return c;
}

}  // namespace

namespace detail {
void fail_non_finite(const char* type_name, float value) {
  fail("cannot quantize {} to {}: the integer block formats need finite values", value, type_name);
}
}  // namespace detail

std::string decodable_type_names() { return supported_list(false); }

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const RowCodec& c = codec_for(type, false, n);
  c.dequant(static_cast<const uint8_t*>(src), dst, n / c.block_elems);
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  const RowCodec& c = codec_for(type, true, n);
  c.quant(src, static_cast<uint8_t*>(dst), n / c.block_elems);
}

void dequantize_rows(GgmlType type, const void* src, float* dst, int64_t n_rows, int64_t n_cols) {
  const RowCodec& c = codec_for(type, false, n_cols);
  MEMRA_ASSERT(n_rows >= 0, "negative row count {}", n_rows);
  const size_t stride = row_bytes(type, n_cols);
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t r = 0; r < n_rows; ++r) c.dequant(p + r * stride, dst + r * n_cols, n_cols / c.block_elems);
}

double dot_row(GgmlType type, const void* row, const float* x, int64_t n) {
  const RowCodec& c = codec_for(type, false, n);
  return c.dot(static_cast<const uint8_t*>(row), x, n / c.block_elems);
}

}  // namespace memra::quant
