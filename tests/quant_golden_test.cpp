// Agreement with an independent reference: the golden hashes below were produced by gguf-py
// 0.19.0 (llama.cpp's Python package: gguf.quants.dequantize / gguf.quants.quantize) on the
// exact same pseudo-random inputs, generated here and in that script by the same splitmix64
// stream. Decode covers every decodable type on random block bytes (the f16 scale fields set
// to finite values so the sums are comparable; F16 / BF16 rows are raw random bits, NaNs and
// all). Encode covers the types gguf-py can quantize, whose quantizers follow ggml's reference
// C code: memra's output must be byte-identical.
//
// How a value was produced (so it can be regenerated):
//   decode: for type index i (order of kDecodeGolden), SplitMix64(1000 + i); fill
//     n_blocks * block_bytes bytes from successive next() values (8 little-endian bytes each),
//     then for each block and each f16 scale field r = next(), bits = (r & 0x8000) |
//     (0x2C00 + (r >> 16) % 0x1000); hash = FNV-1a of the decoded float32 bytes; sum = float64
//     sequential sum of the decoded values.
//   encode: for type index i, SplitMix64(2000 + i); 64 blocks of 32 floats, block b scaled by
//     2^((b % 8) - 4), x = ((next() >> 40) - 2^23) * 2^-23 * scale; blocks with b % 4 == 3 get
//     +scale at position 7 and -scale at 20 (a tie for the largest magnitude); block 5 is zero;
//     hash = FNV-1a of the encoded bytes.
// scripts/quant_goldens.py regenerates the decode rows with gguf-py (it reproduces every row
// below; the IQ4_NL / IQ4_XS rows came from it).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quant/quant.h"
#include "quant_test_util.h"

namespace memra::quant {
namespace {

struct DecodeGolden {
  GgmlType type;
  int n_blocks;
  uint64_t hash;
  double sum;  // NaN where the row contains NaNs
};

// clang-format off
const DecodeGolden kDecodeGolden[] = {
    {GgmlType::F16, 256, 0x1a4c24b5d2244dfaull, NAN},
    {GgmlType::BF16, 256, 0x934d15cbaede1b82ull, NAN},
    {GgmlType::Q4_0, 8, 0x6dfc51560be98f77ull, -30.0653076171875},
    {GgmlType::Q4_1, 8, 0x9aece5030b5b08f0ull, 114.086669921875},
    {GgmlType::Q5_0, 8, 0x96082b7fd54a22baull, -19.6146240234375},
    {GgmlType::Q5_1, 8, 0x1969bb622ddaf38aull, 150.95263671875},
    {GgmlType::Q8_0, 8, 0xb8c0b40055ba5accull, -958.3470458984375},
    {GgmlType::Q2_K, 8, 0xc321e1b4f36e434full, -197.369384765625},
    {GgmlType::Q3_K, 8, 0xe16d57cb4c8f6d15ull, 52.38812255859375},
    {GgmlType::Q4_K, 8, 0x95148512458abd40ull, 38177.94921875},
    {GgmlType::Q5_K, 8, 0xa1d14268a96c4e0bull, 12782.776733398438},
    {GgmlType::Q6_K, 8, 0xafa34ac564094e2full, -18619.887573242188},
    {GgmlType::IQ4_NL, 8, 0x449c6f97d493f547ull, 4.304931640625},
    {GgmlType::IQ4_XS, 8, 0xdf5b6098f3e25f52ull, -13029.427490234375},
};

struct EncodeGolden {
  GgmlType type;
  uint64_t hash;
};

const EncodeGolden kEncodeGolden[] = {
    {GgmlType::F16, 0xb0d4568e0653725bull},
    {GgmlType::BF16, 0xf9f21d0b50092ffdull},
    {GgmlType::Q4_0, 0xc3799578bfe18fe2ull},
    {GgmlType::Q4_1, 0xbaaf3178f7e9a64eull},
    {GgmlType::Q5_0, 0x9ccef7bb14c570f8ull},
    {GgmlType::Q5_1, 0x648300636ab3c032ull},
    {GgmlType::Q8_0, 0x29d403f1475cdc8aull},
};
// clang-format on

// Byte offsets of the f16 scale fields inside one block.
std::vector<size_t> f16_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: case GgmlType::IQ4_NL: case GgmlType::IQ4_XS:
      return {0};
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    default: return {};
  }
}

TEST(QuantGolden, DecodeMatchesGgufPyReference) {
  for (size_t i = 0; i < std::size(kDecodeGolden); ++i) {
    const DecodeGolden& g = kDecodeGolden[i];
    SCOPED_TRACE(type_name(g.type));
    const TypeInfo& info = type_info(g.type);
    test::SplitMix64 rng(1000 + i);
    std::vector<uint8_t> raw;
    const size_t n_bytes = static_cast<size_t>(g.n_blocks) * info.block_bytes;
    while (raw.size() < n_bytes) {
      const uint64_t r = rng.next();
      for (int k = 0; k < 8; ++k) raw.push_back(static_cast<uint8_t>(r >> (8 * k)));
    }
    raw.resize(n_bytes);
    for (int b = 0; b < g.n_blocks; ++b)
      for (size_t off : f16_fields(g.type)) {
        const uint64_t r = rng.next();
        const uint16_t h = static_cast<uint16_t>((r & 0x8000) | (0x2C00 + (r >> 16) % 0x1000));
        raw[b * info.block_bytes + off] = static_cast<uint8_t>(h & 0xFF);
        raw[b * info.block_bytes + off + 1] = static_cast<uint8_t>(h >> 8);
      }
    const int64_t n = g.n_blocks * info.block_elems;
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(g.type, raw.data(), y.data(), n);
    EXPECT_EQ(test::fnv1a(y.data(), y.size() * sizeof(float)), g.hash);
    if (!std::isnan(g.sum)) {
      double s = 0.0;
      for (float v : y) s += v;
      EXPECT_EQ(s, g.sum);
    }
  }
}

TEST(QuantGolden, EncodeMatchesGgufPyReferenceBitForBit) {
  for (size_t i = 0; i < std::size(kEncodeGolden); ++i) {
    const EncodeGolden& g = kEncodeGolden[i];
    SCOPED_TRACE(type_name(g.type));
    test::SplitMix64 rng(2000 + i);
    const int n_blocks = 64;
    std::vector<float> x(static_cast<size_t>(n_blocks) * 32);
    for (int b = 0; b < n_blocks; ++b) {
      const float scale = std::ldexp(1.0f, b % 8 - 4);
      for (int j = 0; j < 32; ++j) {
        const auto q = static_cast<int64_t>(rng.next() >> 40) - (int64_t{1} << 23);
        x[b * 32 + j] = static_cast<float>(static_cast<double>(q) * 0x1p-23 * scale);
      }
      if (b % 4 == 3) {
        x[b * 32 + 7] = scale;
        x[b * 32 + 20] = -scale;
      }
      if (b == 5) std::fill(x.begin() + b * 32, x.begin() + (b + 1) * 32, 0.0f);
    }
    std::vector<uint8_t> out(row_bytes(g.type, static_cast<int64_t>(x.size())));
    quantize_row(g.type, x.data(), out.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(test::fnv1a(out.data(), out.size()), g.hash);
  }
}

}  // namespace
}  // namespace memra::quant
