// Hand-built blocks of every decodable type: the bytes are packed here from the format
// description (element -> byte/bit placement), independently of src/quant, and the decoded
// floats must equal the format's formula exactly. Scales are chosen so every product is exact in
// float, so the expected values do not depend on the order of float operations.
//
// Two kinds of check per type:
// - Pattern: distinct codes per position (every nibble / bit field differs from its neighbours
//   and from the element 16 / 32 / 64 / 128 positions away), all extreme codes, negative scales.
// - Probe: for every element e, a block whose codes are all one value except e; only y[e] may
//   change. A swapped nibble, shifted bit field or off-by-one group fails this.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "common/error.h"
#include "quant/quant.h"

namespace memra::quant {
namespace {

// f16 bit patterns of a few exact values.
constexpr uint16_t kF16_1 = 0x3C00, kF16_0_5 = 0x3800, kF16_0_25 = 0x3400, kF16_2 = 0x4000, kF16_M0_5 = 0xB800,
                   kF16_M2 = 0xC000, kF16_1_5 = 0x3E00, kF16_0_125 = 0x3000, kF16_M0_125 = 0xB000;

float f16v(uint16_t h) {  // value of the constants above, without using the code under test
  switch (h) {
    case kF16_1: return 1.0f;
    case kF16_0_5: return 0.5f;
    case kF16_0_25: return 0.25f;
    case kF16_2: return 2.0f;
    case kF16_M0_5: return -0.5f;
    case kF16_M2: return -2.0f;
    case kF16_1_5: return 1.5f;
    case kF16_0_125: return 0.125f;
    case kF16_M0_125: return -0.125f;
  }
  ADD_FAILURE() << "no value for f16 constant " << h;
  return 0.0f;
}

void put16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v & 0xFF);
  b[off + 1] = static_cast<uint8_t>(v >> 8);
}

// Logical content of one block: super-block / block scale bits, integer sub-block scales and
// mins as stored, and each element's stored code.
struct Logical {
  uint16_t d = kF16_1, dmin = kF16_1;
  std::vector<int> scale, min, q;
};

// One decodable type: its geometry, the spec-level packer and the value formula.
struct Format {
  GgmlType type;
  int elems, bytes, n_sub;
  int code_lo, code_hi, scale_lo, scale_hi, min_hi;
  std::function<std::vector<uint8_t>(const Logical&)> pack;
  std::function<float(const Logical&, int e)> value;
};

// ---- packers, written from the placement rules ----

std::vector<uint8_t> pack_legacy4(const Logical& L, bool has_m, bool five) {
  // d [, m] [, qh u32] then 16 bytes: element j < 16 low nibble of byte j, element j + 16 high.
  const int qh_off = has_m ? 4 : 2, qs_off = qh_off + (five ? 4 : 0);
  std::vector<uint8_t> b(qs_off + 16, 0);
  put16(b, 0, L.d);
  if (has_m) put16(b, 2, L.dmin);
  for (int e = 0; e < 32; ++e) {
    b[qs_off + e % 16] |= static_cast<uint8_t>((L.q[e] & 15) << (e < 16 ? 0 : 4));
    if (five) b[qh_off + e / 8] |= static_cast<uint8_t>(((L.q[e] >> 4) & 1) << (e % 8));  // bit e of LE u32
  }
  return b;
}

std::vector<uint8_t> pack_q8_0(const Logical& L) {
  std::vector<uint8_t> b(34, 0);
  put16(b, 0, L.d);
  for (int e = 0; e < 32; ++e) b[2 + e] = static_cast<uint8_t>(static_cast<int8_t>(L.q[e]));
  return b;
}

// Q2_K / Q3_K 2-bit fields: element e in byte (e / 128) * 32 + e % 32 at bit 2 * ((e / 32) % 4).
void put2(std::vector<uint8_t>& b, size_t off, int e, int v) {
  b[off + (e / 128) * 32 + e % 32] |= static_cast<uint8_t>((v & 3) << (2 * ((e / 32) % 4)));
}

std::vector<uint8_t> pack_q2_k(const Logical& L) {
  std::vector<uint8_t> b(84, 0);  // scales[16], qs[64], d, dmin
  for (int s = 0; s < 16; ++s) b[s] = static_cast<uint8_t>(L.scale[s] | (L.min[s] << 4));
  for (int e = 0; e < 256; ++e) put2(b, 16, e, L.q[e]);
  put16(b, 80, L.d);
  put16(b, 82, L.dmin);
  return b;
}

std::vector<uint8_t> pack_q3_k(const Logical& L) {
  std::vector<uint8_t> b(110, 0);  // hmask[32], qs[64], scales[12], d
  for (int e = 0; e < 256; ++e) {
    b[e % 32] |= static_cast<uint8_t>(((L.q[e] >> 2) & 1) << (e / 32));
    put2(b, 32, e, L.q[e]);
  }
  for (int s = 0; s < 16; ++s) {
    const int u = L.scale[s];  // stored 6-bit value (scale + 32)
    b[96 + s % 8] |= static_cast<uint8_t>((u & 15) << (s < 8 ? 0 : 4));
    b[96 + 8 + s % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (s / 4)));
  }
  put16(b, 108, L.d);
  return b;
}

// 12-byte 6-bit scale/min packing of Q4_K / Q5_K.
void put_scales_k4(std::vector<uint8_t>& b, size_t off, const Logical& L) {
  for (int s = 0; s < 8; ++s) {
    const int sc = L.scale[s], mn = L.min[s];
    if (s < 4) {
      b[off + s] |= static_cast<uint8_t>(sc);
      b[off + s + 4] |= static_cast<uint8_t>(mn);
    } else {
      b[off + s + 4] |= static_cast<uint8_t>((sc & 15) | ((mn & 15) << 4));
      b[off + s - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
      b[off + s] |= static_cast<uint8_t>((mn >> 4) << 6);
    }
  }
}

std::vector<uint8_t> pack_q4_k(const Logical& L, bool five) {
  std::vector<uint8_t> b(five ? 176 : 144, 0);  // d, dmin, scales[12], [qh[32]], qs[128]
  put16(b, 0, L.d);
  put16(b, 2, L.dmin);
  put_scales_k4(b, 4, L);
  const size_t qs = five ? 48 : 16;
  for (int e = 0; e < 256; ++e) {
    b[qs + (e / 64) * 32 + e % 32] |= static_cast<uint8_t>((L.q[e] & 15) << (4 * ((e / 32) % 2)));
    if (five) b[16 + e % 32] |= static_cast<uint8_t>(((L.q[e] >> 4) & 1) << (e / 32));
  }
  return b;
}

std::vector<uint8_t> pack_q6_k(const Logical& L) {
  std::vector<uint8_t> b(210, 0);  // ql[128], qh[64], scales[16] (int8), d
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128;
    b[h * 64 + r % 64] |= static_cast<uint8_t>((L.q[e] & 15) << (4 * (r / 64)));
    b[128 + h * 32 + r % 32] |= static_cast<uint8_t>((L.q[e] >> 4) << (2 * (r / 32)));
  }
  for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(L.scale[s]));
  put16(b, 208, L.d);
  return b;
}

std::vector<Format> formats() {
  using L = const Logical&;
  return {
      {GgmlType::Q4_0, 32, 18, 0, 0, 15, 0, 0, 0, [](L l) { return pack_legacy4(l, false, false); },
       [](L l, int e) { return static_cast<float>(l.q[e] - 8) * f16v(l.d); }},
      {GgmlType::Q4_1, 32, 20, 0, 0, 15, 0, 0, 0, [](L l) { return pack_legacy4(l, true, false); },
       [](L l, int e) { return static_cast<float>(l.q[e]) * f16v(l.d) + f16v(l.dmin); }},
      {GgmlType::Q5_0, 32, 22, 0, 0, 31, 0, 0, 0, [](L l) { return pack_legacy4(l, false, true); },
       [](L l, int e) { return static_cast<float>(l.q[e] - 16) * f16v(l.d); }},
      {GgmlType::Q5_1, 32, 24, 0, 0, 31, 0, 0, 0, [](L l) { return pack_legacy4(l, true, true); },
       [](L l, int e) { return static_cast<float>(l.q[e]) * f16v(l.d) + f16v(l.dmin); }},
      {GgmlType::Q8_0, 32, 34, 0, -128, 127, 0, 0, 0, pack_q8_0,
       [](L l, int e) { return static_cast<float>(l.q[e]) * f16v(l.d); }},
      {GgmlType::Q2_K, 256, 84, 16, 0, 3, 0, 15, 15, pack_q2_k,
       [](L l, int e) {
         return f16v(l.d) * static_cast<float>(l.scale[e / 16] * l.q[e]) - f16v(l.dmin) * static_cast<float>(l.min[e / 16]);
       }},
      {GgmlType::Q3_K, 256, 110, 16, 0, 7, 0, 63, 0, pack_q3_k,
       [](L l, int e) { return f16v(l.d) * static_cast<float>((l.scale[e / 16] - 32) * (l.q[e] - 4)); }},
      {GgmlType::Q4_K, 256, 144, 8, 0, 15, 0, 63, 63, [](L l) { return pack_q4_k(l, false); },
       [](L l, int e) {
         return f16v(l.d) * static_cast<float>(l.scale[e / 32] * l.q[e]) - f16v(l.dmin) * static_cast<float>(l.min[e / 32]);
       }},
      {GgmlType::Q5_K, 256, 176, 8, 0, 31, 0, 63, 63, [](L l) { return pack_q4_k(l, true); },
       [](L l, int e) {
         return f16v(l.d) * static_cast<float>(l.scale[e / 32] * l.q[e]) - f16v(l.dmin) * static_cast<float>(l.min[e / 32]);
       }},
      {GgmlType::Q6_K, 256, 210, 16, 0, 63, -128, 127, 0, pack_q6_k,
       [](L l, int e) { return f16v(l.d) * static_cast<float>(l.scale[e / 16] * (l.q[e] - 32)); }},
  };
}

std::vector<float> decode(GgmlType type, const std::vector<uint8_t>& bytes, int n) {
  std::vector<float> y(static_cast<size_t>(n), -12345.0f);
  dequantize_row(type, bytes.data(), y.data(), n);
  return y;
}

// Codes that differ between neighbours and between elements 16 / 32 / 64 / 128 apart: a stride
// coprime to the code range plus a per-group offset. The sequence still hits lo and hi.
int pattern_code(const Format& f, int e) {
  const int range = f.code_hi - f.code_lo + 1;
  const int stride = range == 4 ? 1 : (range == 8 ? 3 : 7);
  return f.code_lo + (e * stride + (e / 16) + 3 * (e / 64)) % range;
}

Logical pattern_block(const Format& f, uint16_t d, uint16_t dmin) {
  Logical l;
  l.d = d;
  l.dmin = dmin;
  for (int s = 0; s < f.n_sub; ++s) {
    // Distinct scales that include both ends of the range.
    const int srange = f.scale_hi - f.scale_lo + 1;
    l.scale.push_back(s == 0 ? f.scale_lo : s == 1 ? f.scale_hi : f.scale_lo + (s * 11 + 5) % srange);
    l.min.push_back(f.min_hi ? (s == 2 ? f.min_hi : (s * 5 + 1) % (f.min_hi + 1)) : 0);
  }
  for (int e = 0; e < f.elems; ++e) l.q.push_back(pattern_code(f, e));
  return l;
}

void expect_decodes(const Format& f, const Logical& l, const char* what) {
  const std::vector<uint8_t> bytes = f.pack(l);
  ASSERT_EQ(static_cast<int>(bytes.size()), f.bytes);
  const std::vector<float> y = decode(f.type, bytes, f.elems);
  for (int e = 0; e < f.elems; ++e)
    ASSERT_EQ(y[e], f.value(l, e)) << type_name(f.type) << " " << what << ": element " << e << " code " << l.q[e];
}

TEST(QuantDecode, PatternBlocksDecodeExactly) {
  for (const Format& f : formats()) {
    SCOPED_TRACE(type_name(f.type));
    expect_decodes(f, pattern_block(f, kF16_0_5, kF16_0_25), "pattern");
    expect_decodes(f, pattern_block(f, kF16_M0_5, kF16_2), "negative d");
    expect_decodes(f, pattern_block(f, kF16_1_5, kF16_M0_125), "negative dmin / m");
    expect_decodes(f, pattern_block(f, kF16_0_125, kF16_M2), "small d");
  }
}

TEST(QuantDecode, ExtremeCodesAndScales) {
  for (const Format& f : formats()) {
    SCOPED_TRACE(type_name(f.type));
    for (int code : {f.code_lo, f.code_hi}) {
      Logical l = pattern_block(f, kF16_M2, kF16_0_5);
      for (auto& q : l.q) q = code;
      for (auto& s : l.scale) s = f.scale_hi;
      for (auto& m : l.min) m = f.min_hi;
      expect_decodes(f, l, "all codes at an extreme, scales at max");
      for (auto& s : l.scale) s = f.scale_lo;
      expect_decodes(f, l, "all codes at an extreme, scales at min");
    }
  }
}

// Spot values written out by hand, as a check on the formula lambdas themselves.
TEST(QuantDecode, HandComputedValues) {
  auto fm = formats();
  auto find = [&](GgmlType t) -> const Format& {
    for (auto& f : fm)
      if (f.type == t) return f;
    throw std::logic_error("format missing");
  };
  {  // Q4_0, d = -0.5: code 0 -> 4, code 15 -> -3.5
    const Format& f = find(GgmlType::Q4_0);
    Logical l = pattern_block(f, kF16_M0_5, 0);
    l.q[0] = 0;
    l.q[16] = 15;
    const auto y = decode(f.type, f.pack(l), 32);
    EXPECT_EQ(y[0], 4.0f);
    EXPECT_EQ(y[16], -3.5f);
  }
  {  // Q8_0, d = 0.5: -128 -> -64, 127 -> 63.5
    const Format& f = find(GgmlType::Q8_0);
    Logical l = pattern_block(f, kF16_0_5, 0);
    l.q[3] = -128;
    l.q[31] = 127;
    const auto y = decode(f.type, f.pack(l), 32);
    EXPECT_EQ(y[3], -64.0f);
    EXPECT_EQ(y[31], 63.5f);
  }
  {  // Q4_K, d = 0.5, dmin = 0.25, sub-block 5 scale 63 min 63: code 15 -> 0.5*63*15 - 0.25*63
    const Format& f = find(GgmlType::Q4_K);
    Logical l = pattern_block(f, kF16_0_5, kF16_0_25);
    l.scale[5] = 63;
    l.min[5] = 63;
    l.q[5 * 32 + 7] = 15;
    const auto y = decode(f.type, f.pack(l), 256);
    EXPECT_EQ(y[5 * 32 + 7], 472.5f - 15.75f);
  }
  {  // Q6_K, d = 2, scale -128, code 0 -> 2 * -128 * -32
    const Format& f = find(GgmlType::Q6_K);
    Logical l = pattern_block(f, kF16_2, 0);
    l.scale[15] = -128;
    l.q[255] = 0;
    const auto y = decode(f.type, f.pack(l), 256);
    EXPECT_EQ(y[255], 8192.0f);
  }
  {  // Q3_K, d = 0.5, stored scale 0 (= -32), code 0 (= -4) -> 64; stored 63 (= 31), code 7 (= 3) -> 46.5
    const Format& f = find(GgmlType::Q3_K);
    Logical l = pattern_block(f, kF16_0_5, 0);
    l.scale[9] = 0;
    l.q[9 * 16 + 1] = 0;
    l.scale[14] = 63;
    l.q[14 * 16 + 2] = 7;
    const auto y = decode(f.type, f.pack(l), 256);
    EXPECT_EQ(y[9 * 16 + 1], 64.0f);
    EXPECT_EQ(y[14 * 16 + 2], 46.5f);
  }
}

TEST(QuantDecode, SingleElementProbesHitOnlyTheirPosition) {
  for (const Format& f : formats()) {
    SCOPED_TRACE(type_name(f.type));
    Logical base = pattern_block(f, kF16_0_5, kF16_0_25);
    for (auto& s : base.scale) s = f.scale_hi;  // non-zero everywhere so a code change shows
    const int c0 = f.code_lo + 1, c1 = f.code_hi;
    for (auto& q : base.q) q = c0;
    const std::vector<float> y0 = decode(f.type, f.pack(base), f.elems);
    for (int e = 0; e < f.elems; ++e) {
      Logical l = base;
      l.q[e] = c1;
      const std::vector<float> y = decode(f.type, f.pack(l), f.elems);
      for (int k = 0; k < f.elems; ++k) {
        if (k == e)
          ASSERT_EQ(y[k], f.value(l, k)) << "probe " << e;
        else
          ASSERT_EQ(y[k], y0[k]) << "probe at " << e << " changed element " << k;
      }
    }
    // Each sub-block scale (and min) affects exactly its own elements.
    for (int s = 0; s < f.n_sub; ++s) {
      Logical l = base;
      l.scale[s] = f.scale_lo + 1;
      if (f.min_hi) l.min[s] = f.min_hi;
      const std::vector<float> y = decode(f.type, f.pack(l), f.elems);
      const int sub = f.elems / f.n_sub;
      for (int k = 0; k < f.elems; ++k) {
        if (k / sub == s)
          ASSERT_EQ(y[k], f.value(l, k)) << "scale probe " << s << " element " << k;
        else
          ASSERT_EQ(y[k], y0[k]) << "scale probe " << s << " changed element " << k;
      }
    }
  }
}

TEST(QuantDecode, MultiBlockRowsDecodeEachBlock) {
  for (const Format& f : formats()) {
    SCOPED_TRACE(type_name(f.type));
    const Logical a = pattern_block(f, kF16_0_5, kF16_0_25);
    Logical b = pattern_block(f, kF16_M2, kF16_1);
    std::reverse(b.q.begin(), b.q.end());
    std::vector<uint8_t> bytes = f.pack(a);
    const std::vector<uint8_t> bb = f.pack(b);
    bytes.insert(bytes.end(), bb.begin(), bb.end());
    const std::vector<float> y = decode(f.type, bytes, 2 * f.elems);
    for (int e = 0; e < f.elems; ++e) {
      ASSERT_EQ(y[e], f.value(a, e)) << e;
      ASSERT_EQ(y[f.elems + e], f.value(b, e)) << e;
    }
  }
}

TEST(QuantDecode, PlainFloatRows) {
  const float f32[3] = {1.5f, -0.0f, 3.0e38f};
  float y[3];
  dequantize_row(GgmlType::F32, f32, y, 3);
  EXPECT_EQ(std::memcmp(f32, y, sizeof y), 0);
  const uint16_t f16[4] = {0x3C00, 0xC000, 0x0001, 0x7C00};
  float z[4];
  dequantize_row(GgmlType::F16, f16, z, 4);
  EXPECT_EQ(z[0], 1.0f);
  EXPECT_EQ(z[1], -2.0f);
  EXPECT_EQ(z[2], 0x1p-24f);
  EXPECT_TRUE(std::isinf(z[3]));
  const uint16_t bf16[3] = {0x3F80, 0xC040, 0x4120};
  dequantize_row(GgmlType::BF16, bf16, z, 3);
  EXPECT_EQ(z[0], 1.0f);
  EXPECT_EQ(z[1], -3.0f);
  EXPECT_EQ(z[2], 10.0f);
}

TEST(QuantDecode, UnalignedSourceBytes) {
  // GGUF data is only guaranteed to be aligned to the file's alignment, and a row of 18-byte
  // blocks puts blocks at odd multiples of 2: decoding must not care about alignment at all.
  for (const Format& f : formats()) {
    const std::vector<uint8_t> bytes = f.pack(pattern_block(f, kF16_0_5, kF16_0_25));
    std::vector<uint8_t> shifted(bytes.size() + 1, 0);
    std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
    std::vector<float> y(static_cast<size_t>(f.elems));
    dequantize_row(f.type, shifted.data() + 1, y.data(), f.elems);
    EXPECT_EQ(y, decode(f.type, bytes, f.elems)) << type_name(f.type);
  }
}


TEST(QuantDecode, LosslessTranscodesKeepEveryValueBitForBit) {
  // Q3_K -> Q6_K, Q5_0 and IQ4_NL -> Q8_0 (what the CUDA backend runs them as): any bytes (every code,
  // scale and hmask pattern; d finite: random bits would hold NaNs, whose payloads need not agree)
  // decode to the same floats before and after, and the other types have no such form.
  std::mt19937 rng(20261204);
  for (const auto& [from, to] : {std::pair{GgmlType::Q3_K, GgmlType::Q6_K}, std::pair{GgmlType::Q5_0, GgmlType::Q8_0},
                                 std::pair{GgmlType::IQ4_NL, GgmlType::Q8_0}}) {
    ASSERT_EQ(lossless_wider_type(from), to);
    const int64_t n = 8 * 256;
    std::vector<uint8_t> src(row_bytes(from, n)), dst(row_bytes(to, n));
    for (int round = 0; round < 20; ++round) {
      for (auto& b : src) b = static_cast<uint8_t>(rng());
      const size_t bb = type_info(from).block_bytes, d_at = from == GgmlType::Q3_K ? 108 : 0;
      for (size_t blk = 0; blk < src.size() / bb; ++blk) {  // d: a finite f16, sometimes subnormal or negative
        const uint16_t d = static_cast<uint16_t>((rng() & 0x83FF) | (round % 4 == 0 ? 0 : (1 + rng() % 29) << 10));
        std::memcpy(src.data() + blk * bb + d_at, &d, 2);
      }
      transcode_row(from, to, src.data(), dst.data(), n);
      std::vector<float> a(n), b(n);
      dequantize_row(from, src.data(), a.data(), n);
      dequantize_row(to, dst.data(), b.data(), n);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * n), 0) << type_name(from) << " round " << round;
    }
  }
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::F16, GgmlType::BF16, GgmlType::F32})
    EXPECT_FALSE(lossless_wider_type(t).has_value()) << type_name(t);
}

TEST(QuantDecode, Iq4XsAsQ8_0RoundsOnlyTheBlockScales) {
  // IQ4_XS -> Q8_0 (what the CUDA backend runs it as): every value is the file's value with its
  // sub-block scale d * (scale - 32) rounded to f16, so within 2^-11 of it relatively, and exactly
  // it where the scale is an f16 already (d a power of two). d's exponent field 1..24 keeps
  // d * (scale - 32) inside f16's normal range (past 65504 it would be infinite, as the values
  // widened to f16 would be).
  ASSERT_EQ(rounded_wider_type(GgmlType::IQ4_XS), GgmlType::Q8_0);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q3_K, GgmlType::Q5_0, GgmlType::IQ4_NL, GgmlType::Q4_1, GgmlType::F16})
    EXPECT_FALSE(rounded_wider_type(t).has_value()) << type_name(t);
  std::mt19937 rng(20261205);
  const int64_t n = 8 * 256;
  std::vector<uint8_t> src(row_bytes(GgmlType::IQ4_XS, n)), dst(row_bytes(GgmlType::Q8_0, n));
  int exact_blocks = 0;
  for (int round = 0; round < 20; ++round) {
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    for (size_t blk = 0; blk < src.size() / 136; ++blk) {
      const uint16_t mant = round % 4 == 0 ? 0 : static_cast<uint16_t>(rng() & 0x3FF);
      const uint16_t d = static_cast<uint16_t>((rng() & 0x8000) | (1 + rng() % 24) << 10 | mant);
      std::memcpy(src.data() + blk * 136, &d, 2);
    }
    transcode_row(GgmlType::IQ4_XS, GgmlType::Q8_0, src.data(), dst.data(), n);
    std::vector<float> a(n), b(n);
    dequantize_row(GgmlType::IQ4_XS, src.data(), a.data(), n);
    dequantize_row(GgmlType::Q8_0, dst.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_LE(std::fabs(static_cast<double>(b[i]) - a[i]), std::ldexp(std::fabs(static_cast<double>(a[i])), -11))
          << "round " << round << " element " << i << " " << a[i] << " vs " << b[i];
    if (round % 4 == 0) {
      ASSERT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * n), 0) << "round " << round;
      ++exact_blocks;
    }
  }
  EXPECT_EQ(exact_blocks, 5);
}

}  // namespace
}  // namespace memra::quant
