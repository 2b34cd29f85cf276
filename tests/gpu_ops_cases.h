// The op table of gpu_ops_test.cpp: each tolerance with its derivation, the model shapes, and
// the cases (op, shape, type, rows, value range, bound, state compared, where it runs). Included
// by gpu_ops_test.cpp alone (the driver and the op runners live there).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/backend.h"
#include "common/ggml_type.h"

namespace memra::gpu_ops_test {
namespace {

// ---- tolerances (each bound's derivation) ----

// Matmul, every element: |gpu - cpu| <= 2^-10 * sum_k |w_jk x_rk| (matmul_order.h: the f16
// rounding of the activations, relative 2^-11 per element, plus float accumulation). The float
// weight types also multiply the activations' low parts (~2^-22 each): 2^-16 leaves float
// accumulation over up to a few hundred blocks.
const double kMatmulQuant = std::ldexp(1.0, -10);
// IQ4_XS runs as Q8_0 with its block scales rounded to f16 (quant.h rounded_wider_type): one more
// 2^-11 relative a product on top of the activations' 2^-11 and the accumulation's share.
const double kMatmulRoundedScales = 1.5 * std::ldexp(1.0, -10);
const double kMatmulFloat = std::ldexp(1.0, -16);
// RMSNorm, every element, relative: the sum of squares takes at most ~45 float roundings in the
// kernel's order (2^-24 each), halved by the square root, plus the rsqrt and two products.
constexpr double kNormTol = 1e-5;
// silu(g) * u and x * sigmoid(g), relative: expf (2 ulp), one add, one divide and one product in
// float against float64 rounded once: ~4.5 ulp; 2^-20 (8 ulp) bounds it.
const double kElemTol = std::ldexp(1.0, -20);
// qk_norm_rope, per head, relative L2: the norm as above (1e-5); the rope angle is pos * inv_freq
// in float on the GPU (double on the CPU): at most pos * 2^-23 rad on the fastest pairs, a share
// of the head: 2e-7 per position.
constexpr double kRopeTol = 1e-5, kRopeTolPerPos = 2e-7;
// Attention, per (row, head), relative L2. The f16 cache rounds every K/V element to 11
// significant bits: on N(0,1) inputs that moves a head's output by <= ~5e-4 in a float64
// simulation at 1..4096 keys; float accumulation and softmax add well under 1e-4.
constexpr double kAttnTol = 2e-3;
// The 8-bit cache rounds each element to 1/254 of its 32-block's max|x|: 0.55-1.3% relative L2 in
// a float64 simulation of these shapes (worst of 35 draws). A wrong scale or block gives ~1.
constexpr double kAttnTolQ8 = 4e-2;
// Gated DeltaNet, relative L2 over a tensor, and its worst element <= 10 x tol x rms (kElemFactor
// in gpu_ops_compare.h). Measured with the kernels' float32 arithmetic replayed on the host: ~7e-8
// (conv), ~2e-7 (core, decode and 100-row prefill alike: the decay exp(g) < 1 keeps the carried
// error from growing). 25-50x room.
constexpr double kConvTol = 2e-6;     // 4-tap float fma chain + SiLU vs float64
constexpr double kDecodeTol = 5e-6;   // one token through the core
constexpr double kCarriedTol = 1e-5;  // up to 300 tokens with the state carried in float32
// The bf16 state (MEMRA_SSM_STATE; case type BF16): both backends round it after every token, the
// GPU from its float32 value, the CPU from its float64 one rounded to float32; where those straddle
// a bf16 rounding point the stored elements differ by one bf16 step (2^-8 relative), and the
// outputs of later tokens with them. Outputs and the states' relative L2: kBf16StateTol (measured
// in the emulation: outputs <= 4.4e-6, states 3e-7 to 2.6e-5; a rounding that is not to nearest
// even, or skipped on one side, gives ~2e-3). Each state element within four bf16 steps of the
// CPU's (flips compounded over the tokens reach 2 steps) plus 2e-3 x rms (near-zero elements carry
// the absolute differences that flips spread through the delta rule: measured 1.2e-4 x rms); a
// worst-element bound in rms units, as TensorL2 has, does not fit states whose elements reach many
// times their rms. (That the GPU rounds after every row, not once a step, is GpuDeltaNetPrefill's
// SplitsGiveTheBitsOfOneStep with bf16 states.)
constexpr double kBf16StateTol = 2e-4;
constexpr double kBf16StateSteps = 1.0 / 64;
constexpr double kBf16StateFloor = 2e-3;
// MoE, relative L2 of the FFN's contribution over the rows whose routing is clear: f16 activations
// at two matmul stages (~1e-3); float weights also see the activations' low parts.
constexpr double kMoeQuant = 5e-3, kMoeFloat = 1e-4;
// Rows whose k-th and (k+1)-th router probabilities are within this share may route differently
// (the GPU's router logits carry the f16 rounding of x): not compared.
constexpr double kMoeMargin = 0.02;
// Embedding rows: the device layout decodes every type to the reference decoder's bits
// (cuda_layout_test.cpp), F32 to its hi + lo form within 2^-21 of the block's largest value.
const double kEmbedF32 = std::ldexp(1.0, -21);

// ---- shapes ----

struct ModelShape {
  const char* name;
  int64_t hidden;
  int n_head, n_head_kv, head_dim, n_rot;
  bool gated;  // q rows interleave [q_h | gate_h]
  float theta;
  int n_k, n_v, d;  // Gated DeltaNet heads and head size
  GdnHeadMap map;
  GdnGateLayout gates;
  int n_expert, n_used;
  int64_t expert_ff, shared_ff;
};
constexpr auto kTiled = GdnHeadMap::Tiled, kGrouped = GdnHeadMap::Grouped;
constexpr auto kSep = GdnGateLayout::Separate, kBA = GdnGateLayout::GroupedBA;
// ../shared/shapes.md. MoE shapes beside dense ones carry their own expert widths.
const ModelShape k2B{"2b", 2048, 8, 2, 256, 64, true, 1e7f, 16, 16, 128, kTiled, kSep, 0, 0, 0, 0};
const ModelShape k9B{"9b", 4096, 16, 4, 256, 64, true, 1e7f, 16, 32, 128, kTiled, kSep, 0, 0, 0, 0};
const ModelShape k27B{"27b", 5120, 24, 4, 256, 64, true, 1e7f, 16, 48, 128, kTiled, kSep, 0, 0, 0, 0};
const ModelShape k35B{"35b-a3b", 2048, 16, 2, 256, 64, true, 1e7f, 16, 32, 128, kTiled, kSep, 256, 8, 512, 512};
const ModelShape kNext{"next-80b", 2048, 16, 2, 256, 64, true, 1e7f, 16, 32, 128, kGrouped, kBA, 512, 10, 512, 512};
// The tiny fixtures, the demo model's linear layers, plain Qwen3 attention, head sizes off the
// 128-column tile, and a small MoE (32 experts of 256, top 4, shared 256) the emulation can run.
const ModelShape kTiny{"tiny", 256, 4, 2, 64, 16, true, 1e7f, 2, 4, 32, kTiled, kSep, 0, 0, 0, 0};
const ModelShape kNextTiny{"next-tiny", 256, 4, 2, 64, 16, true, 1e7f, 2, 4, 32, kGrouped, kBA, 0, 0, 0, 0};
const ModelShape kDemo{"demo", 512, 8, 8, 64, 64, false, 1e4f, 4, 8, 64, kTiled, kSep, 0, 0, 0, 0};
const ModelShape kPlain{"qwen3-plain", 2048, 16, 8, 128, 128, false, 1e6f, 0, 0, 0, kTiled, kSep, 0, 0, 0, 0};
const ModelShape kD96{"d96", 512, 4, 2, 64, 16, true, 1e7f, 2, 2, 96, kGrouped, kBA, 0, 0, 0, 0};
const ModelShape kD256{"d256", 512, 4, 2, 64, 16, true, 1e7f, 1, 2, 256, kTiled, kSep, 0, 0, 0, 0};
const ModelShape kMoeSmall{"moe-small", 512, 4, 2, 64, 16, true, 1e7f, 2, 4, 32, kTiled, kSep, 32, 4, 256, 256};
const ModelShape kMoeNoShared{"moe-small-noshared", 512, 4, 2, 64, 16, true, 1e7f, 2, 4, 32, kTiled, kSep,
                              32, 4, 256, 0};

// ---- the table ----

enum class Op {
  RmsNorm, NormMatmul, Matmul, Swiglu, SiluMul, SigmoidGate, GatherRows, Embed,  // row-wise family
  QkNormRope, Attention,                                                          // full attention
  Conv, DeltaNet,                                                                 // Gated DeltaNet
  Moe, Argmax, Sample,
};
const char* op_name(Op op) {
  static const char* names[] = {"rms_norm", "norm+matmul", "matmul", "swiglu", "silu_mul", "sigmoid_gate",
                                "gather_rows", "embed", "qk_norm_rope", "attention", "conv1d_silu", "deltanet",
                                "moe_ffn", "argmax", "sample"};
  return names[static_cast<int>(op)];
}
enum class Family { RowWise, Matmul, Attention, DeltaNet, Moe, Sampling };
Family family(Op op) {
  switch (op) {
    case Op::NormMatmul: case Op::Matmul: case Op::Swiglu: return Family::Matmul;
    case Op::QkNormRope: case Op::Attention: return Family::Attention;
    case Op::Conv: case Op::DeltaNet: return Family::DeltaNet;
    case Op::Moe: return Family::Moe;
    case Op::Argmax: case Op::Sample: return Family::Sampling;
    default: return Family::RowWise;
  }
}

// Activation value ranges. Outliers: a few channels ~200x the rest (the massive activations of
// LLM residual streams) and one row 2^-30 smaller. RowScales: rows 2^-40 .. 2^32 apart (the f16
// form scales each row by its own power of two).
enum class Range { Normal, Outliers, RowScales };
const char* range_name(Range r) { return r == Range::Normal ? "N(0,1)" : r == Range::Outliers ? "outliers" : "row-scales"; }

enum Where : bool { kAll = false, kHw = true };  // kHw: on a GPU only

struct Case {
  Op op;
  const ModelShape* m;
  GgmlType type;       // weights, embedding table, KV cache (attention); F32 where none
  int64_t n_in, n_out;  // matmul-like ops: widths (real n_in; n_out cut where the CPU would be slow)
  // Rows: "1 3 13" runs one launch per count (row-wise and matmul ops); steps of sequences for
  // the per-sequence ops: "pos:rows pos:rows; rows rows; ..." (the first step creates each
  // sequence at pos with history, later steps give each sequence's rows, 0: not in the step).
  const char* rows;
  Range range;
  double tol;
  bool state;  // the KV cache / conv and recurrent state compared
  Where where;
};

constexpr auto Q4_0 = GgmlType::Q4_0, Q8_0 = GgmlType::Q8_0, Q4_K = GgmlType::Q4_K, Q5_K = GgmlType::Q5_K,
               Q6_K = GgmlType::Q6_K, F16 = GgmlType::F16, BF16 = GgmlType::BF16, F32 = GgmlType::F32,
               Q3_K = GgmlType::Q3_K, Q5_0 = GgmlType::Q5_0, IQ4_NL = GgmlType::IQ4_NL, IQ4_XS = GgmlType::IQ4_XS;
constexpr auto kN = Range::Normal, kOut = Range::Outliers, kRow = Range::RowScales;

// The emulation's matmul shapes cross 1, 2 and 8 k-segments (2, 5, 8 and 32 k-tiles: 1, 2, 2 and 8,
// matmul_order.h) with a partial row group; the GPU's are the models' projections.
#define MATMUL_CASES(T, TOL)                                                                   \
  {Op::Matmul, &k9B, T, 4096, 160, "1 3 13 70", kRow, TOL, false, kHw},                        \
  {Op::Matmul, &k9B, T, 12288, 48, "1 8 17 40", kOut, TOL, false, kHw},                        \
  {Op::Matmul, &k27B, T, 5120, 112, "1 5 33", kOut, TOL, false, kHw},                          \
  {Op::Matmul, &k27B, T, 17408, 40, "1 9", kN, TOL, false, kHw},                               \
  {Op::Matmul, &k2B, T, 6144, 100, "1 64", kRow, TOL, false, kHw},                             \
  {Op::Matmul, &kTiny, T, 512, 40, "1 3 13 70", kRow, TOL, false, kAll},                       \
  {Op::Matmul, &kTiny, T, 1280, 20, "1 3 13 70", kOut, TOL, false, kAll},                      \
  {Op::Matmul, &kTiny, T, 2048, 24, "1 3 13 70", kN, TOL, false, kAll},                        \
  {Op::Matmul, &kTiny, T, 8192, 16, "1 3 13 70", kRow, TOL, false, kAll}

const Case kCases[] = {
    // ---- row-wise ----
    // Row lengths: the models' hidden sizes, one not a multiple of 4 (scalar loads), the longest
    // held in registers (8192) and a longer one (read again each pass).
    {Op::RmsNorm, &k9B, F32, 4096, 0, "1 9", kOut, kNormTol, false, kHw},
    {Op::RmsNorm, &k27B, F32, 5120, 0, "3", kRow, kNormTol, false, kHw},
    {Op::RmsNorm, &k9B, F32, 8192, 0, "9", kN, kNormTol, false, kHw},
    {Op::RmsNorm, &k2B, F32, 2048, 0, "1 9", kOut, kNormTol, false, kAll},
    {Op::RmsNorm, &kTiny, F32, 512, 0, "9", kRow, kNormTol, false, kAll},
    {Op::RmsNorm, &kTiny, F32, 1002, 0, "9", kN, kNormTol, false, kAll},
    {Op::RmsNorm, &kTiny, F32, 9000, 0, "9", kN, kNormTol, false, kAll},
    {Op::SiluMul, &k9B, F32, 12288, 0, "1 7", kOut, kElemTol, false, kAll},
    {Op::SiluMul, &kTiny, F32, 1001, 0, "3", kN, kElemTol, false, kAll},
    {Op::SigmoidGate, &k9B, F32, 0, 0, "1 5", kN, kElemTol, false, kAll},
    {Op::SigmoidGate, &k27B, F32, 0, 0, "3", kOut, kElemTol, false, kAll},
    {Op::SigmoidGate, &kPlain, F32, 0, 0, "2", kN, kElemTol, false, kAll},  // ungated layout: gate rows of their own
    {Op::GatherRows, &k9B, F32, 4096, 0, "1 6", kN, 0, false, kAll},
    {Op::Embed, &k9B, Q4_0, 4096, 4099, "1 7", kN, 0, false, kHw},
    {Op::Embed, &k2B, Q8_0, 2048, 300, "5", kN, 0, false, kAll},
    {Op::Embed, &k2B, Q4_K, 2048, 300, "5", kN, 0, false, kAll},
    {Op::Embed, &k2B, Q5_K, 2048, 300, "5", kN, 0, false, kAll},
    {Op::Embed, &k2B, Q6_K, 2048, 300, "5", kN, 0, false, kAll},
    {Op::Embed, &k2B, F16, 2048, 300, "5", kN, 0, false, kAll},
    {Op::Embed, &k2B, BF16, 2048, 300, "5", kN, 0, false, kAll},
    {Op::Embed, &k2B, F32, 2048, 300, "5", kN, kEmbedF32, false, kAll},
    {Op::Embed, &kTiny, Q4_0, 96, 50, "3", kN, 0, false, kAll},  // a partial k-tile
    {Op::Embed, &kTiny, Q3_K, 512, 50, "3", kN, 0, false, kAll},  // run as Q6_K: the same values
    {Op::Embed, &kTiny, Q5_0, 96, 50, "3", kN, 0, false, kAll},   // run as Q8_0
    {Op::Embed, &kTiny, IQ4_NL, 96, 50, "3", kN, 0, false, kAll},  // run as Q8_0

    // ---- matmul: every weight type ----
    MATMUL_CASES(Q4_0, kMatmulQuant),
    MATMUL_CASES(Q8_0, kMatmulQuant),
    MATMUL_CASES(Q4_K, kMatmulQuant),
    MATMUL_CASES(Q5_K, kMatmulQuant),
    MATMUL_CASES(Q6_K, kMatmulQuant),
    MATMUL_CASES(F16, kMatmulFloat),
    MATMUL_CASES(BF16, kMatmulFloat),
    MATMUL_CASES(F32, kMatmulFloat),
    {Op::Matmul, &kTiny, Q4_0, 2304, 100, "3", kN, kMatmulQuant, false, kAll},   // partial k-tile
    {Op::Matmul, &kTiny, Q8_0, 96, 17, "2", kOut, kMatmulQuant, false, kAll},    // one partial tile
    {Op::Matmul, &k9B, Q6_K, 4096, 248320, "1", kN, kMatmulQuant, false, kHw},   // the output head
    // Types run as a wider one (Q3_K as Q6_K, Q5_0 / IQ4_NL / IQ4_XS as Q8_0) against the CPU's own
    // decode.
    {Op::Matmul, &k9B, Q3_K, 4096, 160, "1 13 70", kRow, kMatmulQuant, false, kHw},
    {Op::Matmul, &k9B, Q5_0, 12288, 48, "1 17", kOut, kMatmulQuant, false, kHw},
    {Op::Matmul, &kTiny, Q3_K, 1024, 40, "1 3 13", kRow, kMatmulQuant, false, kAll},
    {Op::Matmul, &kTiny, Q5_0, 800, 24, "1 3 13", kOut, kMatmulQuant, false, kAll},
    {Op::Matmul, &k9B, IQ4_NL, 4096, 48, "1 17", kRow, kMatmulQuant, false, kHw},
    {Op::Matmul, &kTiny, IQ4_NL, 800, 24, "1 3 13", kOut, kMatmulQuant, false, kAll},
    {Op::Matmul, &k9B, IQ4_XS, 4096, 48, "1 17", kOut, kMatmulRoundedScales, false, kHw},
    {Op::Matmul, &kTiny, IQ4_XS, 1024, 24, "1 3 13", kRow, kMatmulRoundedScales, false, kAll},
    // The norm's f16 form handed to the matmul (its token): the matmul bound still holds, the
    // norm's 1e-5 being far below the f16 rounding.
    {Op::NormMatmul, &k9B, Q4_0, 4096, 96, "1 9", kOut, kMatmulQuant, false, kHw},
    {Op::NormMatmul, &kTiny, Q4_K, 512, 64, "1 9", kOut, kMatmulQuant, false, kAll},
    {Op::NormMatmul, &kTiny, F16, 1002, 32, "4", kN, kMatmulFloat, false, kAll},
    // SwiGLU fused into the gate+up launch against matmul, matmul, silu_mul (bound: see run_swiglu).
    {Op::Swiglu, &k9B, Q4_0, 4096, 256, "1 13", kOut, kMatmulQuant, false, kHw},
    {Op::Swiglu, &k35B, Q4_K, 2048, 512, "1 20", kN, kMatmulQuant, false, kHw},
    {Op::Swiglu, &kTiny, Q6_K, 1024, 64, "3 20", kN, kMatmulQuant, false, kAll},
    {Op::Swiglu, &kTiny, Q8_0, 512, 48, "1", kOut, kMatmulQuant, false, kAll},
    {Op::Swiglu, &kTiny, BF16, 512, 40, "2", kN, kMatmulFloat, false, kAll},

    // ---- full attention ----
    // qk_norm_rope: one sequence per start position (a 3-row one: consecutive positions).
    {Op::QkNormRope, &k9B, F32, 0, 0, "0:1 1:1 7:3 255:1 256:1 1000:2 4096:1 8191:1 20000:1", kN, kRopeTol, false, kAll},
    {Op::QkNormRope, &k27B, F32, 0, 0, "0:1 5:4 32767:1", kN, kRopeTol, false, kAll},
    {Op::QkNormRope, &kTiny, F32, 0, 0, "0:1 1:1 7:3 255:1 8191:1 20000:1", kN, kRopeTol, false, kAll},
    {Op::QkNormRope, &kPlain, F32, 0, 0, "0:1 1:1 7:3 4096:1 20000:1", kN, kRopeTol, false, kAll},
    {Op::QkNormRope, &kNext, F32, 0, 0, "0:1 1000:2 20000:1", kN, kRopeTol, false, kAll},
    // Attention (kv_append, split attention, combine); the cache compared in the device's form.
    // Decode: key counts straddling the 128-key split and 256, alone and batched, two steps.
    {Op::Attention, &k9B, F16, 0, 0, "0:1 1:1 126:1 127:1 128:1 254:1 255:1 256:1 999:1 4095:1 2:1 33:1 500:1 2047:1 "
                                    "3000:1 129:1; 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1", kN, kAttnTol, true, kHw},
    {Op::Attention, &k9B, F16, 0, 0, "4095:1", kN, kAttnTol, true, kHw},
    {Op::Attention, &k9B, F16, 0, 0, "127:1", kN, kAttnTol, true, kHw},
    {Op::Attention, &k27B, F16, 0, 0, "0:1 128:1 1000:1 4095:1 255:1", kN, kAttnTol, true, kHw},
    {Op::Attention, &k2B, F16, 0, 0, "0:1 129:1 999:1", kN, kAttnTol, true, kHw},
    {Op::Attention, &kNext, F16, 0, 0, "1:1 256:1 999:1 4095:1", kN, kAttnTol, true, kHw},
    {Op::Attention, &kPlain, F16, 0, 0, "0:1 127:1 128:1 4095:1", kN, kAttnTol, true, kHw},
    {Op::Attention, &kTiny, F16, 0, 0, "0:1 1:1 127:1 128:1 300:1; 1 1 1 1 1", kN, kAttnTol, true, kAll},
    // Prefill chunks of 1, 7, 100, 300 rows on top of caches, from empty, mixed with decode rows.
    {Op::Attention, &k9B, F16, 0, 0, "1000:300", kN, kAttnTol, true, kHw},
    {Op::Attention, &k9B, F16, 0, 0, "1000:7 130:100 0:300", kN, kAttnTol, true, kHw},
    {Op::Attention, &k9B, F16, 0, 0, "257:7 1000:1 0:100 1000:1; 1 1 1 1", kN, kAttnTol, true, kHw},
    {Op::Attention, &k27B, F16, 0, 0, "1000:100 0:1", kN, kAttnTol, true, kHw},
    {Op::Attention, &k35B, F16, 0, 0, "130:300 257:7", kN, kAttnTol, true, kHw},
    {Op::Attention, &kPlain, F16, 0, 0, "1000:100 0:7", kN, kAttnTol, true, kHw},
    {Op::Attention, &kTiny, F16, 0, 0, "0:7 130:20 3:1; 1 1 1", kN, kAttnTol, true, kAll},
    // The 8-bit cache: its bytes exactly the block quantization of the CPU's rows.
    {Op::Attention, &k9B, Q8_0, 0, 0, "0:1 127:1 128:1 999:1 4095:1", kN, kAttnTolQ8, true, kHw},
    {Op::Attention, &k9B, Q8_0, 0, 0, "1000:100 130:300 0:7", kN, kAttnTolQ8, true, kHw},
    {Op::Attention, &k9B, Q8_0, 0, 0, "700:1 3:7", kN, kAttnTolQ8, true, kAll},
    {Op::Attention, &kTiny, Q8_0, 0, 0, "700:1 3:7; 1 1", kN, kAttnTolQ8, true, kAll},

    // ---- Gated DeltaNet (conv window and recurrent state compared) ----
    // Conv: fewer rows than the window (1, 2), exactly it (3), more (5); then one row each.
    {Op::Conv, &k9B, F32, 0, 0, "0:1 0:2 0:5 0:3; 1 1 1 1; 4 1 2 1", kN, kConvTol, true, kAll},
    {Op::Conv, &kTiny, F32, 0, 0, "0:1 0:2 0:5 0:3; 1 1 1 1; 4 1 2 1", kN, kConvTol, true, kAll},
    // Prompts longer than a chunk of the chunked kernel (32 rows): one, two and four chunks.
    {Op::Conv, &k9B, F32, 0, 0, "0:100 0:33 0:32 0:31; 1 1 1 1; 40 1 70 33", kN, kConvTol, true, kAll},
    {Op::Conv, &kTiny, F32, 0, 0, "0:100 0:33 0:32 0:31; 1 1 1 1; 40 1 70 33", kN, kConvTol, true, kAll},
    // Decode at B = 1, 3, 8.
    {Op::DeltaNet, &k9B, F32, 0, 0, "17:1", kN, kDecodeTol, true, kAll},
    {Op::DeltaNet, &k9B, F32, 0, 0, "0:1 17:1 1000:1 63:1 64:1 5:1 300:1 2:1", kN, kDecodeTol, true, kAll},
    {Op::DeltaNet, &k27B, F32, 0, 0, "0:1 17:1 1000:1", kN, kDecodeTol, true, kAll},
    {Op::DeltaNet, &k2B, F32, 0, 0, "0:1 17:1 1000:1", kN, kDecodeTol, true, kHw},
    {Op::DeltaNet, &kNext, F32, 0, 0, "0:1 17:1 1000:1", kN, kDecodeTol, true, kAll},
    {Op::DeltaNet, &kTiny, F32, 0, 0, "0:1 17:1 1000:1 63:1 64:1 5:1 300:1 2:1", kN, kDecodeTol, true, kAll},
    {Op::DeltaNet, &kDemo, F32, 0, 0, "0:1 17:1 1000:1", kN, kDecodeTol, true, kAll},
    {Op::DeltaNet, &kNextTiny, F32, 0, 0, "0:1 17:1 1000:1 63:1 64:1 5:1 300:1 2:1", kN, kDecodeTol, true, kAll},
    {Op::DeltaNet, &kD96, F32, 0, 0, "0:1 17:1 1000:1", kN, kDecodeTol, true, kAll},
    {Op::DeltaNet, &kD256, F32, 0, 0, "0:1 17:1 1000:1", kN, kDecodeTol, true, kAll},
    // Prefill: prompts at 0 and off it, around the 64 rows a chunked form would have used.
    {Op::DeltaNet, &k9B, F32, 0, 0, "0:100", kN, kCarriedTol, true, kAll},
    // bf16 recurrent states: decode (the fused kernel, several column tiles for d96), prompts (the
    // prompt form from 8 rows at d128).
    {Op::DeltaNet, &k9B, BF16, 0, 0, "0:1 17:1 1000:1 63:1 5:1 2:1", kN, kBf16StateTol, true, kAll},
    {Op::DeltaNet, &kD96, BF16, 0, 0, "0:1 17:1 1000:1", kN, kBf16StateTol, true, kAll},
    {Op::DeltaNet, &k9B, BF16, 0, 0, "0:63 0:64 37:100 5:3", kN, kBf16StateTol, true, kAll},
    {Op::DeltaNet, &kTiny, BF16, 0, 0, "0:2 0:7 37:100 5:300", kN, kBf16StateTol, true, kAll},
    {Op::DeltaNet, &k9B, F32, 0, 0, "0:63 0:64 0:65 37:100 31:40 5:300", kN, kCarriedTol, true, kAll},
    {Op::DeltaNet, &k27B, F32, 0, 0, "0:64 5:300", kN, kCarriedTol, true, kHw},
    {Op::DeltaNet, &kTiny, F32, 0, 0, "0:2 0:7 0:63 0:64 0:65 37:100 31:40 5:300", kN, kCarriedTol, true, kAll},
    {Op::DeltaNet, &kDemo, F32, 0, 0, "0:65 37:100", kN, kCarriedTol, true, kAll},
    {Op::DeltaNet, &kNextTiny, F32, 0, 0, "0:64 37:100 5:300", kN, kCarriedTol, true, kAll},
    {Op::DeltaNet, &kD96, F32, 0, 0, "0:7 31:40", kN, kCarriedTol, true, kAll},
    {Op::DeltaNet, &kD256, F32, 0, 0, "0:7 31:40", kN, kCarriedTol, true, kAll},
    // State carried across steps: three prompts prefilled together, decode steps, a mixed step.
    {Op::DeltaNet, &k9B, F32, 0, 0, "0:12 0:5 0:30; 1 1 1; 1 1 1; 1 1 1; 1 1 1; 1 1 1; 1 1 1; 3 1 2", kN, kCarriedTol,
     true, kAll},
    {Op::DeltaNet, &kNext, F32, 0, 0, "0:12 0:5 0:30; 1 1 1; 1 1 1; 3 1 2", kN, kCarriedTol, true, kHw},
    {Op::DeltaNet, &kTiny, F32, 0, 0, "0:12 0:5 0:30; 1 1 1; 1 1 1; 1 1 1; 1 1 1; 1 1 1; 1 1 1; 3 1 2", kN,
     kCarriedTol, true, kAll},

    // ---- mixture of experts (router, top-k, grouped expert matmuls, shared expert, combine) ----
    {Op::Moe, &k35B, Q4_0, 0, 0, "1 13 64", kN, kMoeQuant, false, kHw},  // 64: groups of more rows than the tile shape
    {Op::Moe, &k35B, Q4_K, 0, 0, "13", kN, kMoeQuant, false, kHw},
    {Op::Moe, &kNext, Q6_K, 0, 0, "7", kN, kMoeQuant, false, kHw},
    {Op::Moe, &kMoeSmall, Q4_0, 0, 0, "13", kN, kMoeQuant, false, kAll},
    {Op::Moe, &kMoeNoShared, Q6_K, 0, 0, "13", kN, kMoeQuant, false, kAll},
    {Op::Moe, &kMoeNoShared, Q8_0, 0, 0, "13", kN, kMoeQuant, false, kHw},
    {Op::Moe, &kMoeSmall, Q4_K, 0, 0, "13", kN, kMoeQuant, false, kAll},
    {Op::Moe, &kMoeSmall, F32, 0, 0, "13", kN, kMoeFloat, false, kAll},

    // ---- argmax and sampling (the token ids, bit for bit) ----
    // n_out: vocabulary; rows: batch sizes. Rows carry ties, -inf and NaN.
    {Op::Argmax, &k9B, F32, 0, 248320, "1 64", kN, 0, false, kHw},
    {Op::Argmax, &kTiny, F32, 0, 4099, "1 7", kN, 0, false, kAll},
    {Op::Sample, &k9B, F32, 0, 248320, "1 64", kN, 0, false, kHw},
    {Op::Sample, &kTiny, F32, 0, 1024, "7", kN, 0, false, kAll},
};
#undef MATMUL_CASES

}  // namespace
}  // namespace memra::gpu_ops_test
