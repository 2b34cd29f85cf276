// The CUDA matmul family's exactness contract: a row's result is bit-identical whatever else shares
// the launch, fused launches give the bits of separate ones, the norm's matmul form the bits of
// converting afresh. Against the CPU (every weight type, real shapes): gpu_ops_test.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "quant/quant.h"
#include "step/step_plan.h"

namespace memra {
namespace {

using test::HostWeight;
HostWeight make_weight(GgmlType type, int64_t n_in, int64_t n_out, uint64_t seed) {
  return test::make_weight(type, n_in, n_out, 1, 0.05f, seed);
}

std::vector<float> run_matmul(Backend& be, const HostWeight& hw, const std::vector<float>& x, int64_t rows,
                              const std::vector<float>* accumulate_into = nullptr) {
  WeightRef w = hw.ref;
  be.upload_matrix(w, hw.bytes.data());
  test::DevFloats dx(be, x);
  std::vector<float> init = accumulate_into ? *accumulate_into
                                            : std::vector<float>(static_cast<size_t>(rows * w.n_out), NAN);
  test::DevFloats out(be, init);
  be.reset_scratch();
  be.matmul(w, dx.get(), out.get(), rows, 0, accumulate_into != nullptr);
  return out.download();
}

const GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                           GgmlType::Q6_K, GgmlType::BF16, GgmlType::F16,  GgmlType::F32};

// The CPU emulation (tests/cudasim) is ~1000x slower than the GPU: small shapes there, real ones
// on hardware.
using test::emulated;

TEST(GpuMatmul, AccumulateAddsIntoOutput) {
  MEMRA_GPU_OR_SKIP(gpu);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::F16}) {
    HostWeight w = make_weight(t, 1024, 64, 5);
    auto x = test::normal_floats(3 * 1024, 1.0f, 6);
    auto base = test::normal_floats(3 * 64, 1.0f, 7);
    auto plain = run_matmul(*gpu, w, x, 3);
    auto acc = run_matmul(*gpu, w, x, 3, &base);
    int bad = 0, first = -1;
    for (size_t i = 0; i < acc.size(); ++i)
      if (!(acc[i] == base[i] + plain[i])) {
        if (first < 0) first = static_cast<int>(i);
        ++bad;
      }
    EXPECT_EQ(bad, 0) << quant::type_name(t) << ": " << bad << " of " << acc.size() << " differ, first at " << first
                      << " (plain " << plain[first < 0 ? 0 : first] << ", base " << base[first < 0 ? 0 : first]
                      << ", acc " << acc[first < 0 ? 0 : first] << ")";
  }
}

// The exactness contract at the op: a row's result is the same bits whatever else shares the
// launch, through every tile shape (1 to 8 n-tiles per CTA, one or several CTAs of rows).
TEST(GpuMatmul, RowsAreBitIdenticalWhateverTheBatch) {
  MEMRA_GPU_OR_SKIP(gpu);
  const int64_t n_in = emulated() ? 2048 : 4096, n_out = emulated() ? 48 : 512, n_rows = 70;
  for (GgmlType t : kTypes) {
    HostWeight w = make_weight(t, n_in, n_out, 21);
    auto x = test::normal_floats(static_cast<size_t>(n_rows * n_in), 1.0f, 22);
    auto all = run_matmul(*gpu, w, x, n_rows);
    for (int64_t batch : {1, 2, 5, 9, 16, 33, 64}) {
      for (int64_t r0 = 0; r0 + batch <= n_rows; r0 += batch * 3 + 1) {
        std::vector<float> xs(x.begin() + r0 * n_in, x.begin() + (r0 + batch) * n_in);
        auto part = run_matmul(*gpu, w, xs, batch);
        ASSERT_EQ(0, std::memcmp(part.data(), all.data() + r0 * n_out, part.size() * sizeof(float)))
            << quant::type_name(t) << " rows " << r0 << ".." << r0 + batch << " differ from the 70-row launch";
        if (emulated()) break;
      }
    }
  }
}

// The one-row streaming kernel split over P warps a unit (MEMRA_CUDA_STREAM_PARTS) gives the bits
// of one warp a unit, for plain and SwiGLU launches: 9 k-tiles make segments of 4 and 5 (rounds
// where some warps have no k-tile), a partial last row group, more sets than blocks.
TEST(GpuMatmul, SplitStreamingUnitsGiveTheBitsOfOneWarpAUnit) {
  MEMRA_GPU_OR_SKIP(gpu);
  gpu.reset();
  const int64_t n_out = emulated() ? 200 : 4100;
  // On the GPU also 8192 columns: 8 K segments, where a block has room for one warp a unit only.
  std::vector<int64_t> widths = {2304, emulated() ? 1024 : 4096};
  if (!emulated()) widths.push_back(8192);
  for (int64_t n_in : widths) {
    for (GgmlType t : kTypes) {
      HostWeight w = make_weight(t, n_in, n_out, 41), up = make_weight(t, n_in, n_out, 43);
      const auto x = test::normal_floats(static_cast<size_t>(n_in), 1.0f, 42);
      std::vector<float> plain1, swiglu1;
      for (int parts : {1, 2, 3, 4}) {
        CudaOptions o = test::gpu_options();
        o.stream_parts = parts;
        auto be = test::make_gpu_backend(o);
        auto plain = run_matmul(*be, w, x, 1);
        WeightRef wg = w.ref, wu = up.ref;
        be->upload_matrix(wg, w.bytes.data());
        be->upload_matrix(wu, up.bytes.data());
        test::DevFloats dx(*be, x), act(*be, n_out);
        be->reset_scratch();
        be->swiglu(wg, wu, dx.get(), act.get(), 1);
        auto sw = act.download();
        // Two projections of one input in one launch (fused projections stream only split).
        test::DevFloats o0(*be, n_out), o1(*be, n_out), s1(*be, n_out);
        be->reset_scratch();
        const Backend::MatmulOut outs[2] = {{&wg, o0.get()}, {&wu, o1.get()}};
        be->matmul_multi(dx.get(), 1, outs, 2);
        be->matmul(wu, dx.get(), s1.get(), 1, 0, false);
        EXPECT_EQ(o0.download(), plain) << quant::type_name(t) << " fused, " << parts << " warps a unit";
        EXPECT_EQ(o1.download(), s1.download()) << quant::type_name(t) << " fused, " << parts << " warps a unit";
        if (parts == 1) {
          plain1 = plain, swiglu1 = sw;
          continue;
        }
        EXPECT_EQ(0, std::memcmp(plain.data(), plain1.data(), plain.size() * 4))
            << quant::type_name(t) << " n_in " << n_in << ": " << parts << " warps a unit differ from one";
        EXPECT_EQ(0, std::memcmp(sw.data(), swiglu1.data(), sw.size() * 4))
            << "swiglu " << quant::type_name(t) << " n_in " << n_in << ": " << parts << " warps a unit differ from one";
      }
    }
  }
}

// Fused launches (several projections of one input; the SwiGLU pair) give exactly the bits of
// separate matmuls (+ silu_mul). The projections' row groups (16, 3, 1) leave row tiles that hold
// the end of one projection and the start of the next. One row takes the one-row forms: on a GPU
// the split streaming kernel (its warps find their projection by row group too), in the emulation
// (few SMs: the launch is not split, so it does not stream) the tiled kernel's ONE_ROW form.
TEST(GpuMatmul, FusedLaunchesMatchSeparateOnes) {
  MEMRA_GPU_OR_SKIP(gpu);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q6_K, GgmlType::Q8_0}) {
    const int64_t n_in = emulated() ? 1024 : 2048, n_ff = emulated() ? 64 : 512;
    for (int64_t rows : {1, 3, 20, 70}) {
      HostWeight a = make_weight(t, n_in, 256, 31), b = make_weight(t, n_in, 48, 32), c = make_weight(t, n_in, 8, 33);
      WeightRef wa = a.ref, wb = b.ref, wc = c.ref;
      gpu->upload_matrix(wa, a.bytes.data());
      gpu->upload_matrix(wb, b.bytes.data());
      gpu->upload_matrix(wc, c.bytes.data());
      auto x = test::normal_floats(rows * n_in, 1.0f, 34);
      test::DevFloats dx(*gpu, x), oa(*gpu, rows * 256), ob(*gpu, rows * 48), oc(*gpu, rows * 8);
      test::DevFloats sa(*gpu, rows * 256), sb(*gpu, rows * 48), sc(*gpu, rows * 8);
      gpu->reset_scratch();
      const Backend::MatmulOut outs[3] = {{&wa, oa.get()}, {&wb, ob.get()}, {&wc, oc.get()}};
      gpu->matmul_multi(dx.get(), rows, outs, 3);
      gpu->matmul(wa, dx.get(), sa.get(), rows, 0, false);
      gpu->matmul(wb, dx.get(), sb.get(), rows, 0, false);
      gpu->matmul(wc, dx.get(), sc.get(), rows, 0, false);
      EXPECT_EQ(oa.download(), sa.download()) << quant::type_name(t);
      EXPECT_EQ(ob.download(), sb.download()) << quant::type_name(t);
      EXPECT_EQ(oc.download(), sc.download()) << quant::type_name(t);

      HostWeight g = make_weight(t, n_in, n_ff, 35), u = make_weight(t, n_in, n_ff, 36);
      WeightRef wg = g.ref, wu = u.ref;
      gpu->upload_matrix(wg, g.bytes.data());
      gpu->upload_matrix(wu, u.bytes.data());
      test::DevFloats act(*gpu, rows * n_ff), gg(*gpu, rows * n_ff), uu(*gpu, rows * n_ff), ref(*gpu, rows * n_ff);
      gpu->reset_scratch();
      gpu->swiglu(wg, wu, dx.get(), act.get(), rows);
      gpu->matmul(wg, dx.get(), gg.get(), rows, 0, false);
      gpu->matmul(wu, dx.get(), uu.get(), rows, 0, false);
      gpu->silu_mul(gg.get(), uu.get(), ref.get(), rows * n_ff);
      auto fused = act.download(), plain = ref.download();
      EXPECT_EQ(0, std::memcmp(fused.data(), plain.data(), fused.size() * 4)) << "swiglu " << quant::type_name(t);
    }
  }
}

// The matmul form the RMSNorm writes beside its output (reused when the caller hands the norm's
// token to the matmul) has the bits of converting that output afresh.
TEST(GpuMatmul, NormTokenReuseMatchesConverting) {
  MEMRA_GPU_OR_SKIP(gpu);
  const int64_t n_in = emulated() ? 512 : 4096, n_out = 64;
  HostWeight a = make_weight(GgmlType::Q4_0, n_in, n_out, 41), g = make_weight(GgmlType::Q4_0, n_in, n_out, 42);
  WeightRef wa = a.ref, wg = g.ref;
  gpu->upload_matrix(wa, a.bytes.data());
  gpu->upload_matrix(wg, g.bytes.data());
  for (int64_t rows : {1, 9}) {
    auto x = test::normal_floats(static_cast<size_t>(rows * n_in), 3.0f, 43 + rows);
    auto nw = test::random_floats(static_cast<size_t>(n_in), 0.5f, 1.5f, 44);
    test::DevFloats dx(*gpu, x), dw(*gpu, nw), xn(*gpu, rows * n_in);
    test::DevFloats reused(*gpu, rows * n_out), converted(*gpu, rows * n_out);
    test::DevFloats act_reused(*gpu, rows * n_out), act_converted(*gpu, rows * n_out);
    gpu->reset_scratch();
    const uint64_t token = gpu->rms_norm(dx.get(), VecRef{dw.get(), n_in}, xn.get(), rows, n_in, 1e-6f);
    EXPECT_NE(token, 0u) << "the CUDA backend keeps the norm's matmul form";
    gpu->matmul(wa, MatmulInput(xn.get(), token), reused.get(), rows, 0, false);
    gpu->swiglu(wg, wa, MatmulInput(xn.get(), token), act_reused.get(), rows);
    gpu->matmul(wa, xn.get(), converted.get(), rows, 0, false);
    gpu->swiglu(wg, wa, xn.get(), act_converted.get(), rows);
    const auto r = reused.download(), c = converted.download();
    EXPECT_EQ(0, std::memcmp(r.data(), c.data(), r.size() * 4)) << rows << " rows";
    const auto ar = act_reused.download(), ac = act_converted.download();
    EXPECT_EQ(0, std::memcmp(ar.data(), ac.data(), ar.size() * 4)) << "swiglu, " << rows << " rows";
  }
}

// Each row's RMSNorm bits (output and matmul form) are the same alone as in a batch of 9: every
// block of a row reduces the whole row in an order fixed by the row length (k_rowwise.cu),
// whatever the launch shape. Lengths: a model's hidden size, one that is not a multiple of 4
// (scalar loads), the longest row held in registers (8192) and a longer one (read again for each
// pass). (Against the CPU: gpu_ops_test.cpp.)
TEST(GpuMatmul, NormRowsAreIndependentOfTheBatch) {
  MEMRA_GPU_OR_SKIP(gpu);
  std::vector<int64_t> dims = {emulated() ? 512 : 4096, 1002, 9000};
  if (!emulated()) dims.push_back(8192);
  for (int64_t dim : dims) {
    const int64_t rows = 9, n_out = 32;
    HostWeight a = make_weight(GgmlType::F32, dim, n_out, 51);  // any row length
    WeightRef wa = a.ref;
    gpu->upload_matrix(wa, a.bytes.data());
    auto x = test::normal_floats(static_cast<size_t>(rows * dim), 3.0f, 52);
    auto nw = test::random_floats(static_cast<size_t>(dim), 0.5f, 1.5f, 53);
    test::DevFloats dw(*gpu, nw);
    std::vector<float> y_batch, mm_batch;
    for (int64_t r0 : {int64_t{-1}, int64_t{0}, int64_t{4}, int64_t{8}}) {
      // r0 < 0: all rows in one launch; else row r0 alone.
      const int64_t n = r0 < 0 ? rows : 1, off = r0 < 0 ? 0 : r0;
      std::vector<float> xs(x.begin() + off * dim, x.begin() + (off + n) * dim);
      test::DevFloats dx(*gpu, xs), xn(*gpu, n * dim), mm(*gpu, n * n_out);
      gpu->reset_scratch();
      const uint64_t token = gpu->rms_norm(dx.get(), VecRef{dw.get(), dim}, xn.get(), n, dim, 1e-6f);
      gpu->matmul(wa, MatmulInput(xn.get(), token), mm.get(), n, 0, false);
      const auto y = xn.download(), m = mm.download();
      if (r0 < 0) {
        y_batch = y;
        mm_batch = m;
        continue;
      }
      EXPECT_EQ(0, std::memcmp(y.data(), y_batch.data() + off * dim, y.size() * 4)) << "dim " << dim << " row " << r0;
      EXPECT_EQ(0, std::memcmp(m.data(), mm_batch.data() + off * n_out, m.size() * 4))
          << "matmul of the norm's form, dim " << dim << " row " << r0;
    }
  }
}

}  // namespace
}  // namespace memra
