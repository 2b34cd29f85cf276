// The CUDA mixture-of-experts FFN's exactness contract: a row's result does not depend on which
// other rows share the step, nor on what they route to. (Against the CPU: gpu_ops_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "quant/quant.h"

namespace memra {
namespace {

using test::HostWeight;
using test::make_weight;

struct MoeCase {
  HostWeight router, gate, up, down, gate_sh, up_sh, down_sh, sh_gate;
  MoeWeights w;
};

// 32 experts of 256 values, top 4, a shared expert of 256 with its sigmoid gate; hidden 512.
MoeCase make_case(GgmlType type, bool shared) {
  const int64_t hidden = 512, n_ff = 256, n_sh = 256, n_expert = 32;
  MoeCase c;
  c.router = make_weight(GgmlType::F32, hidden, n_expert, 1, 0.2f, 1);
  c.gate = make_weight(type, hidden, n_ff, n_expert, 0.05f, 2);
  c.up = make_weight(type, hidden, n_ff, n_expert, 0.05f, 3);
  c.down = make_weight(type, n_ff, hidden, n_expert, 0.05f, 4);
  c.w.n_expert = static_cast<int>(n_expert);
  c.w.n_used = 4;
  c.w.norm_topk = true;
  if (shared) {
    c.gate_sh = make_weight(type, hidden, n_sh, 1, 0.05f, 5);
    c.up_sh = make_weight(type, hidden, n_sh, 1, 0.05f, 6);
    c.down_sh = make_weight(type, n_sh, hidden, 1, 0.05f, 7);
    c.sh_gate = make_weight(GgmlType::F32, hidden, 1, 1, 0.1f, 8);
  }
  return c;
}

// Uploads the case's weights to `be` (each backend gets its own WeightRefs).
MoeWeights upload(Backend& be, MoeCase& c) {
  MoeWeights w = c.w;
  auto up = [&](const HostWeight& h, WeightRef& dst) { dst = test::upload(be, h); };
  up(c.router, w.router);
  up(c.gate, w.gate_exps);
  up(c.up, w.up_exps);
  up(c.down, w.down_exps);
  if (!c.gate_sh.bytes.empty()) {
    up(c.gate_sh, w.gate_shexp);
    up(c.up_sh, w.up_shexp);
    up(c.down_sh, w.down_shexp);
    up(c.sh_gate, w.shexp_gate);
  }
  return w;
}

std::vector<float> run(Backend& be, const MoeWeights& w, const std::vector<float>& x, const std::vector<float>& base,
                       int64_t rows) {
  const int64_t hidden = w.router.n_in;
  test::DevFloats dx(be, x), out(be, base);
  be.reset_scratch();
  be.moe_ffn(w, dx.get(), out.get(), rows, hidden);
  return out.download();
}

TEST(GpuMoe, RowsAreBitIdenticalWhateverTheBatch) {
  MEMRA_GPU_OR_SKIP(gpu);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_K}) {
    MoeCase c = make_case(t, true);
    const MoeWeights w = upload(*gpu, c);
    // 80 rows run the shared expert as its own launches, at most 64 in the grouped ones
    // (CudaBackend::moe_ffn): both give a row the same bits.
    const int64_t rows = 80, hidden = 512;
    auto x = test::normal_floats(static_cast<size_t>(rows * hidden), 1.0f, 50);
    std::vector<float> base(static_cast<size_t>(rows * hidden), 0.0f);
    const auto all = run(*gpu, w, x, base, rows);
    for (int64_t batch : {1, 3, 7, 64}) {
      for (int64_t r0 = 0; r0 + batch <= rows; r0 += batch + 11) {
        std::vector<float> xs(x.begin() + r0 * hidden, x.begin() + (r0 + batch) * hidden);
        std::vector<float> b0(static_cast<size_t>(batch * hidden), 0.0f);
        const auto part = run(*gpu, w, xs, b0, batch);
        ASSERT_EQ(0, std::memcmp(part.data(), all.data() + r0 * hidden, part.size() * sizeof(float)))
            << quant::type_name(t) << " rows " << r0 << ".." << r0 + batch << " differ from the 80-row step";
      }
    }
  }
}

TEST(GpuMoe, AStepOfMoreSelectionsThanTheRoutingStagesAtOnceGivesEachRowItsBits) {
  // 600 rows x top 4 = 2,400 selections: the routing places them in two chunks (k_moe.cu stages
  // 2,048 at a time; 32 experts, so groups span both chunks); steps of 60 rows take one chunk.
  MEMRA_GPU_OR_SKIP(gpu);
  MoeCase c = make_case(GgmlType::Q4_0, false);
  const MoeWeights w = upload(*gpu, c);
  const int64_t rows = 600, hidden = 512, part = 60;
  auto x = test::normal_floats(static_cast<size_t>(rows * hidden), 1.0f, 51);
  const std::vector<float> base(static_cast<size_t>(rows * hidden), 0.0f);
  const auto all = run(*gpu, w, x, base, rows);
  for (int64_t r0 = 0; r0 < rows; r0 += part) {
    std::vector<float> xs(x.begin() + r0 * hidden, x.begin() + (r0 + part) * hidden);
    const std::vector<float> b0(static_cast<size_t>(part * hidden), 0.0f);
    const auto got = run(*gpu, w, xs, b0, part);
    ASSERT_EQ(0, std::memcmp(got.data(), all.data() + r0 * hidden, got.size() * sizeof(float)))
        << "rows " << r0 << ".." << r0 + part << " differ from the 600-row step";
  }
}

TEST(GpuMoe, RoutingTiesGoToTheLowerExpertLikeTheCpu) {
  // 63 experts whose router rows repeat every 21: each logit value belongs to 3 experts (e, e + 21,
  // e + 42, bit-identical logits on either backend), so the top 8 (three values' 9 experts) cut a
  // tie group: both backends must keep its two lowest ids. Float weights: the outputs agree to
  // ~1e-4 when the selections do and differ by O(1) when they do not. Rows whose distinct top
  // values are within 2% (the GPU's logits carry the f16 rounding of x) are not compared.
  MEMRA_GPU_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  const int64_t hidden = 256, n_ff = 64, n_expert = 63, n_distinct = 21, rows = 40;
  HostWeight distinct = make_weight(GgmlType::F32, hidden, n_distinct, 1, 0.3f, 11);
  HostWeight router = distinct;
  router.ref.n_out = n_expert;
  router.ref.mat_bytes = router.ref.row_bytes * n_expert;
  router.bytes.clear();
  for (int rep = 0; rep < 3; ++rep) router.bytes.insert(router.bytes.end(), distinct.bytes.begin(), distinct.bytes.end());
  MoeCase c;
  c.router = router;
  c.gate = make_weight(GgmlType::F32, hidden, n_ff, n_expert, 0.05f, 12);
  c.up = make_weight(GgmlType::F32, hidden, n_ff, n_expert, 0.05f, 13);
  c.down = make_weight(GgmlType::F32, n_ff, hidden, n_expert, 0.05f, 14);
  c.w.n_expert = static_cast<int>(n_expert);
  c.w.n_used = 8;
  c.w.norm_topk = true;
  const MoeWeights wg = upload(*gpu, c), wc = upload(*cpu, c);
  const auto x = test::normal_floats(static_cast<size_t>(rows * hidden), 1.0f, 15);
  const std::vector<float> base(static_cast<size_t>(rows * hidden), 0.0f);
  const auto got = run(*gpu, wg, x, base, rows), want = run(*cpu, wc, x, base, rows);
  int compared = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> l(static_cast<size_t>(n_distinct));
    for (int64_t e = 0; e < n_distinct; ++e)
      l[e] = quant::dot_row(GgmlType::F32, distinct.bytes.data() + e * distinct.ref.row_bytes, &x[r * hidden], hidden);
    std::sort(l.begin(), l.end(), std::greater<>());
    bool close = false;
    for (int i = 0; i < 3; ++i) close = close || std::exp(l[i + 1] - l[i]) > 0.98;
    if (close) continue;
    ++compared;
    double err = 0, mag = 0;
    for (int64_t j = 0; j < hidden; ++j) {
      err = std::max(err, std::fabs(static_cast<double>(got[r * hidden + j]) - want[r * hidden + j]));
      mag = std::max(mag, std::fabs(static_cast<double>(want[r * hidden + j])));
    }
    EXPECT_LE(err, 1e-4 * mag) << "row " << r << ": the GPU routed differently from the CPU";
  }
  EXPECT_GE(compared, rows / 2) << "too few rows far from a near-tie to test";
  // A row alone is routed by the one-row form (k_moe.cu: one warp, its own top-k walk and
  // grouping, over 63 experts: two lanes' strides end short): every row's bits as in the batch,
  // ties included.
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> xr(x.begin() + r * hidden, x.begin() + (r + 1) * hidden);
    const std::vector<float> b0(static_cast<size_t>(hidden), 0.0f);
    const auto alone = run(*gpu, wg, xr, b0, 1);
    ASSERT_EQ(0, std::memcmp(alone.data(), got.data() + r * hidden, alone.size() * sizeof(float)))
        << "row " << r << " alone differs from the 40-row step";
  }
}

}  // namespace
}  // namespace memra
