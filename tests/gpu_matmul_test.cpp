// CUDA matmuls against the CPU reference on real shapes, every device weight type, and the
// exactness contract: a row's result is bit-identical whatever else shares the launch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "quant/quant.h"
#include "runtime/step_plan.h"

namespace memra {
namespace {

struct HostWeight {
  WeightRef ref;
  std::vector<uint8_t> bytes;
};

HostWeight make_weight(GgmlType type, int64_t n_in, int64_t n_out, uint64_t seed) {
  HostWeight h;
  h.ref.type = type;
  h.ref.n_in = n_in;
  h.ref.n_out = n_out;
  h.ref.row_bytes = quant::row_bytes(type, n_in);
  h.ref.mat_bytes = h.ref.row_bytes * n_out;
  h.ref.name = std::string("test.") + quant::type_name(type);
  h.bytes.resize(h.ref.mat_bytes);
  auto vals = test::normal_floats(static_cast<size_t>(n_in), 0.05f, seed);
  for (int64_t r = 0; r < n_out; ++r) {
    for (int64_t i = 0; i < n_in; ++i) vals[i] = vals[(i * 7 + r * 13 + 1) % n_in] * (i % 5 == r % 5 ? -1.3f : 0.9f);
    quant::quantize_row(type, vals.data(), h.bytes.data() + r * h.ref.row_bytes, n_in);
  }
  return h;
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

bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

const GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                           GgmlType::Q6_K, GgmlType::BF16, GgmlType::F16,  GgmlType::F32};

TEST(GpuMatmul, MatchesCpuOnRealShapes) {
  MEMRA_GPU_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  // (n_in, n_out) from Qwen3.5-9B: attn_qkv / ffn_down rows, cut in n_out to keep the CPU fast.
  const std::pair<int64_t, int64_t> shapes[] = {{4096, 768}, {12288, 256}, {2048, 96}};
  for (GgmlType t : kTypes) {
    for (auto [n_in, n_out] : shapes) {
      HostWeight w = make_weight(t, n_in, n_out, 11);
      for (int64_t rows : {1, 3, 8, 17}) {
        auto x = test::normal_floats(static_cast<size_t>(rows * n_in), 1.0f, 100 + rows);
        auto want = run_matmul(*cpu, w, x, rows);
        auto got = run_matmul(*gpu, w, x, rows);
        // Quantized weights run against 8-bit activations (per-32 scales): ~0.5% relative error
        // of a dot product; float weights are float32 sums vs the CPU's float64.
        const double tol = is_float(t) ? 1e-5 : 2e-2;
        EXPECT_LE(test::rel_err(got, want), tol) << quant::type_name(t) << " " << n_in << "x" << n_out << " rows " << rows;
      }
    }
  }
}

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

TEST(GpuMatmul, RowsAreBitIdenticalWhateverTheBatch) {
  MEMRA_GPU_OR_SKIP(gpu);
  const int64_t n_in = 4096, n_out = 512, n_rows = 64;
  for (GgmlType t : kTypes) {
    HostWeight w = make_weight(t, n_in, n_out, 21);
    auto x = test::normal_floats(static_cast<size_t>(n_rows * n_in), 1.0f, 22);
    auto all = run_matmul(*gpu, w, x, n_rows);
    for (int64_t batch : {1, 2, 5, 9, 16, 33}) {
      for (int64_t r0 = 0; r0 + batch <= n_rows; r0 += batch * 3 + 1) {
        std::vector<float> xs(x.begin() + r0 * n_in, x.begin() + (r0 + batch) * n_in);
        auto part = run_matmul(*gpu, w, xs, batch);
        ASSERT_EQ(0, std::memcmp(part.data(), all.data() + r0 * n_out, part.size() * sizeof(float)))
            << quant::type_name(t) << " rows " << r0 << ".." << r0 + batch << " differ from the 64-row launch";
      }
    }
  }
}

}  // namespace
}  // namespace memra

namespace memra {
namespace {

// Fused launches (several projections of one input; the SwiGLU pair) give exactly the bits of
// separate matmuls (+ silu_mul).
TEST(GpuMatmul, FusedLaunchesMatchSeparateOnes) {
  MEMRA_GPU_OR_SKIP(gpu);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q6_K, GgmlType::Q8_0}) {
    const int64_t n_in = 2048, rows = 3;
    HostWeight a = make_weight(t, n_in, 256, 31), b = make_weight(t, n_in, 64, 32), c = make_weight(t, n_in, 8, 33);
    WeightRef wa = a.ref, wb = b.ref, wc = c.ref;
    gpu->upload_matrix(wa, a.bytes.data());
    gpu->upload_matrix(wb, b.bytes.data());
    gpu->upload_matrix(wc, c.bytes.data());
    auto x = test::normal_floats(rows * n_in, 1.0f, 34);
    test::DevFloats dx(*gpu, x), oa(*gpu, rows * 256), ob(*gpu, rows * 64), oc(*gpu, rows * 8);
    test::DevFloats sa(*gpu, rows * 256), sb(*gpu, rows * 64), sc(*gpu, rows * 8);
    gpu->reset_scratch();
    const Backend::MatmulOut outs[3] = {{&wa, oa.get()}, {&wb, ob.get()}, {&wc, oc.get()}};
    gpu->matmul_multi(dx.get(), rows, outs, 3);
    gpu->matmul(wa, dx.get(), sa.get(), rows, 0, false);
    gpu->matmul(wb, dx.get(), sb.get(), rows, 0, false);
    gpu->matmul(wc, dx.get(), sc.get(), rows, 0, false);
    EXPECT_EQ(oa.download(), sa.download()) << quant::type_name(t);
    EXPECT_EQ(ob.download(), sb.download()) << quant::type_name(t);
    EXPECT_EQ(oc.download(), sc.download()) << quant::type_name(t);

    HostWeight g = make_weight(t, n_in, 512, 35), u = make_weight(t, n_in, 512, 36);
    WeightRef wg = g.ref, wu = u.ref;
    gpu->upload_matrix(wg, g.bytes.data());
    gpu->upload_matrix(wu, u.bytes.data());
    test::DevFloats act(*gpu, rows * 512), gg(*gpu, rows * 512), uu(*gpu, rows * 512), ref(*gpu, rows * 512);
    gpu->reset_scratch();
    gpu->swiglu(wg, wu, dx.get(), act.get(), rows);
    gpu->matmul(wg, dx.get(), gg.get(), rows, 0, false);
    gpu->matmul(wu, dx.get(), uu.get(), rows, 0, false);
    gpu->silu_mul(gg.get(), uu.get(), ref.get(), rows * 512);
    auto fused = act.download(), plain = ref.download();
    EXPECT_EQ(0, std::memcmp(fused.data(), plain.data(), fused.size() * 4)) << "swiglu " << quant::type_name(t);
  }
}

}  // namespace
}  // namespace memra

namespace memra {
namespace {

// A CUDA backend with MEMRA_CUDA_SPLITK set (the inexact comparison tier), or null.
std::unique_ptr<Backend> gpu_with_splitk(int warps) {
  test::ScopedEnv knob("MEMRA_CUDA_SPLITK", std::to_string(warps).c_str());
  return test::make_gpu_backend();
}

// The split-K tier computes the same block terms in another summation order: within float32
// rounding of the exact kernel (relative 1e-5 over a launch), for every quantized type, the
// projections of a multi launch and the SwiGLU pair, at the small batches it serves.
TEST(GpuMatmulSplitK, CloseToTheExactKernel) {
  MEMRA_GPU_OR_SKIP(exact);
  for (int warps : {2, 4}) {
    auto split = gpu_with_splitk(warps);
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
      // The last shape leaves chunks uneven or empty: 65 blocks of 32, or 9 super-blocks of 256.
      const int64_t odd_n_in = quant::type_info(t).block_elems == 256 ? 2304 : 2080;
      for (auto [n_in, n_out] : {std::pair<int64_t, int64_t>{4096, 512}, {12288, 96}, {odd_n_in, 64}}) {
        HostWeight w = make_weight(t, n_in, n_out, 41);
        for (int64_t rows : {1, 2, 5, 8, 11}) {
          auto x = test::normal_floats(static_cast<size_t>(rows * n_in), 1.0f, 42 + rows);
          const auto want = run_matmul(*exact, w, x, rows), got = run_matmul(*split, w, x, rows);
          EXPECT_LE(test::rel_err(got, want), 1e-5)
              << "split " << warps << " " << quant::type_name(t) << " " << n_in << "x" << n_out << " rows " << rows;
        }
      }
      const int64_t n_in = 2048, rows = 3;
      HostWeight g = make_weight(t, n_in, 512, 45), u = make_weight(t, n_in, 512, 46);
      auto x = test::normal_floats(rows * n_in, 1.0f, 47);
      std::vector<float> acts[2];
      Backend* bes[2] = {exact.get(), split.get()};
      for (int k = 0; k < 2; ++k) {
        WeightRef wg = g.ref, wu = u.ref;
        bes[k]->upload_matrix(wg, g.bytes.data());
        bes[k]->upload_matrix(wu, u.bytes.data());
        test::DevFloats dx(*bes[k], x), act(*bes[k], rows * 512);
        bes[k]->reset_scratch();
        bes[k]->swiglu(wg, wu, dx.get(), act.get(), rows);
        acts[k] = act.download();
      }
      EXPECT_LE(test::rel_err(acts[1], acts[0]), 1e-5) << "split " << warps << " swiglu " << quant::type_name(t);
    }
  }
}

}  // namespace
}  // namespace memra
