// IEEE binary16 and bfloat16 conversions: exact values, special values, subnormals, rounding
// ties to even, overflow, and exhaustive round trips.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>

#include "quant/quant.h"

namespace memra::quant {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

TEST(QuantFloat, F16ToF32KnownValues) {
  EXPECT_EQ(bits(f16_to_f32(0x0000)), bits(0.0f));
  EXPECT_EQ(bits(f16_to_f32(0x8000)), bits(-0.0f));
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x3555), 0x1.554p-2f);  // 0.333251953125
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);      // largest finite
  EXPECT_EQ(f16_to_f32(0xFBFF), -65504.0f);
  EXPECT_EQ(f16_to_f32(0x0400), 0x1p-14f);      // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);      // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03FF), 1023 * 0x1p-24f);  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x8201), -513 * 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7C01)));  // signalling NaN stays a NaN, not infinity
  EXPECT_TRUE(std::isnan(f16_to_f32(0xFFFF)));
}

TEST(QuantFloat, F16ExhaustiveRoundTripAndOrder) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    ASSERT_EQ(std::isnan(f), nan) << std::hex << h;
    if (nan) {
      ASSERT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << std::hex << h;
      ASSERT_EQ(f32_to_f16(f) & 0x8000, h & 0x8000) << std::hex << h;
    } else {
      ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
    }
    // Positive finite codes are strictly increasing in value.
    if (h > 0 && h < 0x7C00) {
      ASSERT_LT(f16_to_f32(static_cast<uint16_t>(h - 1)), f) << std::hex << h;
    }
  }
}

TEST(QuantFloat, F32ToF16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3C00);              // tie, even below
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02);          // tie, even above
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);   // just above the tie
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f - 0x1p-22f), 0x3C00);   // just below the tie
  EXPECT_EQ(f32_to_f16(-(1.0f + 3 * 0x1p-11f)), 0xBC02);
  EXPECT_EQ(f32_to_f16(2047.0f + 0.5f), 0x6800);  // 2047.5 between 2047 (odd) and 2048: up
  // Every midpoint between adjacent positive finite f16 values rounds to the even code; one float
  // ulp either side rounds to the nearer code.
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    const float a = f16_to_f32(static_cast<uint16_t>(h)), b = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = a + (b - a) / 2;  // exact: f32 has 13 more mantissa bits than f16
    ASSERT_EQ(f32_to_f16(mid), (h & 1) ? h + 1 : h) << std::hex << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, a)), h) << std::hex << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, b)), h + 1) << std::hex << h;
    ASSERT_EQ(f32_to_f16(-mid), ((h & 1) ? h + 1 : h) | 0x8000) << std::hex << h;
  }
}

TEST(QuantFloat, F32ToF16OverflowAndSpecials) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7BFF);   // below the midpoint to 2^16
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);     // midpoint: ties to even = infinity
  EXPECT_EQ(f32_to_f16(1e10f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xFC00);
  EXPECT_EQ(f32_to_f16(FLT_MAX), 0x7C00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xFC00);
  const uint16_t qnan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(qnan & 0x7C00, 0x7C00);
  EXPECT_NE(qnan & 0x3FF, 0);
  // A NaN whose payload sits only in the low f32 mantissa bits must not become infinity.
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::bit_cast<float>(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::bit_cast<float>(0xFF800001u)))));
}

TEST(QuantFloat, F32ToF16Subnormals) {
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);                // tie between 0 and 1 ulp: even (0)
  EXPECT_EQ(f32_to_f16(0x1.000002p-25f), 0x0001);         // just above the tie
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);            // tie between 1 and 2: even (2)
  EXPECT_EQ(f32_to_f16(5 * 0x1p-25f), 0x0002);            // tie between 2 and 3: even (2)
  EXPECT_EQ(f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400);     // tie between 0x3FF and 0x400
  EXPECT_EQ(f32_to_f16(0x1p-14f - 0x1p-24f), 0x03FF);
  EXPECT_EQ(f32_to_f16(-3 * 0x1p-24f), 0x8003);
  EXPECT_EQ(f32_to_f16(1e-30f), 0x0000);
  EXPECT_EQ(f32_to_f16(-1e-30f), 0x8000);
  EXPECT_EQ(f32_to_f16(1e-40f), 0x0000);   // f32 subnormal input
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(QuantFloat, Bf16KnownValuesAndRounding) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC040), -3.0f);
  EXPECT_EQ(bf16_to_f32(0x0001), std::bit_cast<float>(0x00010000u));  // subnormal
  EXPECT_EQ(bf16_to_f32(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7FC0)));
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);              // tie, even below
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);          // tie, even above
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_EQ(f32_to_bf16(-(1.0f + 3 * 0x1p-8f)), 0xBF82);
  EXPECT_EQ(f32_to_bf16(FLT_MAX), 0x7F80);  // rounds up past the largest bf16: infinity
  EXPECT_EQ(f32_to_bf16(-FLT_MAX), 0xFF80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002);  // subnormal tie: even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00008000u)), 0x0000);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0xFFFF0001u)))));
}

TEST(QuantFloat, Bf16ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f)))) << std::hex << h;
    } else {
      ASSERT_EQ(f32_to_bf16(f), h) << std::hex << h;
    }
  }
}

}  // namespace
}  // namespace memra::quant
