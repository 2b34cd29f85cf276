// The tensor-core matmul (matmul_q8_mma, k_matmul_mma.cu) against the GEMV (matmul_q8 on slices
// of at most 8 rows): every output must be the same float bits, for every device type, shapes
// that are and are not tile multiples, row counts around the tile size, accumulate on and off,
// and through the launchers that dispatch to it. Also a CPU-reference tolerance check and a
// throughput print (no assertion on speed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "quant/quant.h"
#ifdef MEMRA_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/weight_layout.h"
#endif

namespace memra {
namespace {

#ifdef MEMRA_HAVE_CUDA

const GgmlType kMmaTypes[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

struct Matrix {
  WeightRef ref;
  std::vector<uint8_t> bytes;  // GGUF rows
};

// Rows of N(0, 0.05) values, each row a different permutation and sign pattern of one draw, so
// block scales and codes vary across rows and blocks.
Matrix make_matrix(GgmlType type, int64_t n_in, int64_t n_out, uint64_t seed) {
  Matrix m;
  m.ref.type = type;
  m.ref.n_in = n_in;
  m.ref.n_out = n_out;
  m.ref.row_bytes = quant::row_bytes(type, n_in);
  m.ref.mat_bytes = m.ref.row_bytes * static_cast<size_t>(n_out);
  m.ref.name = std::string("mma.") + quant::type_name(type);
  m.bytes.resize(m.ref.mat_bytes);
  const auto base = test::normal_floats(static_cast<size_t>(n_in), 0.05f, seed);
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; ++r) {
    for (int64_t i = 0; i < n_in; ++i)
      row[i] = base[(i * 5 + r * 11 + 3) % n_in] * ((i + r) % 7 == 0 ? -1.7f : 1.0f + 0.01f * static_cast<float>(r % 13));
    quant::quantize_row(type, row.data(), m.bytes.data() + r * m.ref.row_bytes, n_in);
  }
  return m;
}

// Device memory owned through the backend.
struct DevBuf {
  Backend& be;
  void* p;
  DevBuf(Backend& b, size_t bytes) : be(b), p(b.alloc(std::max<size_t>(bytes, 256))) {}
  ~DevBuf() { be.free(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

// 8-bit activations of `rows` rows of x (n_in wide), made by quantize_q8.
struct DevAct {
  DevBuf x, q, d, s;
  cuda::Q8Act act;
  DevAct(Backend& be, const std::vector<float>& xh, int64_t rows, int64_t n_in)
      : x(be, xh.size() * 4),
        q(be, static_cast<size_t>(rows * cuda::n_slots(n_in / 32) * 32)),
        d(be, static_cast<size_t>(rows * cuda::n_slots(n_in / 32)) * 4),
        s(be, static_cast<size_t>(rows * cuda::n_slots(n_in / 32)) * 4) {
    be.to_device(x.p, xh.data(), xh.size() * 4);
    act.q = q.as<int8_t>();
    act.d = d.as<float>();
    act.s = s.as<int32_t>();
    act.rows = rows;
    act.cols = n_in;
    act.slots = cuda::n_slots(n_in / 32);
    cuda::quantize_q8(x.as<float>(), act, static_cast<cuda::CudaBackend&>(be).stream());
  }
};

// Rows [r0, r0 + n) of an activation set.
cuda::Q8Act rows_of(const cuda::Q8Act& a, int64_t r0, int64_t n) {
  cuda::Q8Act s = a;
  s.q += r0 * a.slots * 32;
  s.d += r0 * a.slots;
  s.s += r0 * a.slots;
  s.rows = n;
  return s;
}

// The GEMV's result for rows [0, rows): matmul_q8 on slices of at most 8 rows (below the
// dispatch threshold), into out (rows x n_out floats, prefilled by the caller).
void gemv_reference(const cuda::DevWeight& w, const cuda::Q8Act& a, int64_t rows, float* out, bool acc,
                    cudaStream_t stream) {
  for (int64_t r0 = 0; r0 < rows; r0 += 8)
    cuda::matmul_q8(w, 0, rows_of(a, r0, std::min<int64_t>(8, rows - r0)), out + r0 * w.n_out, w.n_out, acc, stream);
}

// Compares two host copies bit for bit; describes the first difference.
::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want, int64_t n_out) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  if (std::memcmp(got.data(), want.data(), got.size() * 4) == 0) return ::testing::AssertionSuccess();
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a != b && bad++ == 0) first = i;
  }
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " outputs differ; first at row "
                                       << first / n_out << " output " << first % n_out << ": mma " << got[first]
                                       << " vs gemv " << want[first];
}

struct Uploaded {
  WeightRef ref;
  const cuda::DevWeight* dev;
};

Uploaded upload(Backend& be, Matrix& m) {
  Uploaded u{m.ref, nullptr};
  be.upload_matrix(u.ref, m.bytes.data());
  u.dev = &static_cast<cuda::CudaBackend&>(be).dev_weight(u.ref);
  return u;
}

TEST(GpuMatmulMma, BitIdenticalToGemv) {
  MEMRA_GPU_OR_SKIP(gpu);
  cudaStream_t stream = static_cast<cuda::CudaBackend&>(*gpu).stream();
  // (n_in, n_out): 9B shapes, an output count that is no tile multiple, the tiny fixtures' 128-wide
  // rows (4 blocks: most chunks empty), and a small one that splits over a cluster.
  const std::pair<int64_t, int64_t> shapes[] = {{4096, 4096}, {12288, 512}, {4096, 1000}, {128, 64}, {2048, 96}};
  const int64_t row_counts[] = {16, 17, 64, 100, 512};
  const int64_t max_rows = 512;
  for (auto [n_in, n_out] : shapes) {
    const auto xh = test::normal_floats(static_cast<size_t>(max_rows * n_in), 1.0f, 7 + n_in + n_out);
    DevAct act(*gpu, xh, max_rows, n_in);
    const auto base = test::normal_floats(static_cast<size_t>(max_rows * n_out), 2.0f, 9 + n_out);
    for (GgmlType t : kMmaTypes) {
      if (n_in % quant::type_info(t).block_elems != 0) continue;  // K-quants: whole 256-element super-blocks
      Matrix m = make_matrix(t, n_in, n_out, 100 + static_cast<uint64_t>(t));
      Uploaded w = upload(*gpu, m);
      for (bool acc : {false, true}) {
        // Unwritten outputs would keep NaN (no accumulate) and fail the comparison.
        std::vector<float> init = acc ? base : std::vector<float>(base.size(), NAN);
        DevBuf ref(*gpu, init.size() * 4), out(*gpu, init.size() * 4);
        gpu->to_device(ref.p, init.data(), init.size() * 4);
        gemv_reference(*w.dev, act.act, max_rows, ref.as<float>(), acc, stream);
        std::vector<float> want(init.size());
        gpu->to_host(want.data(), ref.p, want.size() * 4);
        for (int64_t rows : row_counts) {
          gpu->to_device(out.p, init.data(), init.size() * 4);
          cuda::matmul_q8_mma(*w.dev, 0, rows_of(act.act, 0, rows), out.as<float>(), n_out, acc, stream);
          std::vector<float> got(static_cast<size_t>(rows * n_out));
          gpu->to_host(got.data(), out.p, got.size() * 4);
          std::vector<float> w_rows(want.begin(), want.begin() + rows * n_out);
          EXPECT_TRUE(same_bits(got, w_rows, n_out)) << quant::type_name(t) << " " << n_in << "x" << n_out << " rows "
                                                     << rows << (acc ? " accumulate" : "");
          // Rows past `rows` must be untouched.
          std::vector<float> rest(static_cast<size_t>((max_rows - rows) * n_out));
          gpu->to_host(rest.data(), out.as<float>() + rows * n_out, rest.size() * 4);
          EXPECT_EQ(0, std::memcmp(rest.data(), init.data() + rows * n_out, rest.size() * 4))
              << quant::type_name(t) << " " << n_in << "x" << n_out << " rows " << rows << ": wrote past the last row";
        }
      }
    }
  }
}

// Launches with rows >= the threshold take the tensor-core path through the public launchers
// (matmul_q8, the backend's matmul / fused multi-projection / SwiGLU); the bits must not change.
TEST(GpuMatmulMma, DispatchKeepsTheGemvBits) {
  MEMRA_GPU_OR_SKIP(gpu);
  cudaStream_t stream = static_cast<cuda::CudaBackend&>(*gpu).stream();
  const int64_t n_in = 2048, n_out = 384, rows = 40;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q6_K, GgmlType::Q4_K}) {
    Matrix mg = make_matrix(t, n_in, n_out, 51), mu = make_matrix(t, n_in, n_out, 52);
    Uploaded g = upload(*gpu, mg), u = upload(*gpu, mu);
    const auto xh = test::normal_floats(static_cast<size_t>(rows * n_in), 1.0f, 53);
    DevAct act(*gpu, xh, rows, n_in);
    const size_t n = static_cast<size_t>(rows * n_out);
    DevBuf want_g(*gpu, n * 4), want_u(*gpu, n * 4), got(*gpu, n * 4);
    gemv_reference(*g.dev, act.act, rows, want_g.as<float>(), false, stream);
    gemv_reference(*u.dev, act.act, rows, want_u.as<float>(), false, stream);
    std::vector<float> wg(n), wu(n), h(n);
    gpu->to_host(wg.data(), want_g.p, n * 4);
    gpu->to_host(wu.data(), want_u.p, n * 4);

    cuda::matmul_q8(*g.dev, 0, act.act, got.as<float>(), n_out, false, stream);
    gpu->to_host(h.data(), got.p, n * 4);
    EXPECT_TRUE(same_bits(h, wg, n_out)) << "matmul_q8 " << quant::type_name(t);

    test::DevFloats x(*gpu, xh), o1(*gpu, n), o2(*gpu, n), act_out(*gpu, n), ref_act(*gpu, n);
    gpu->reset_scratch();
    const Backend::MatmulOut outs[2] = {{&g.ref, o1.get()}, {&u.ref, o2.get()}};
    gpu->matmul_multi(x.get(), rows, outs, 2);
    EXPECT_TRUE(same_bits(o1.download(), wg, n_out)) << "matmul_multi gate " << quant::type_name(t);
    EXPECT_TRUE(same_bits(o2.download(), wu, n_out)) << "matmul_multi up " << quant::type_name(t);

    gpu->swiglu(g.ref, u.ref, x.get(), act_out.get(), rows);
    gpu->silu_mul(want_g.as<float>(), want_u.as<float>(), ref_act.get(), static_cast<int64_t>(n));
    EXPECT_TRUE(same_bits(act_out.download(), ref_act.download(), n_out)) << "swiglu " << quant::type_name(t);
  }
}

TEST(GpuMatmulMma, MatchesCpuReference) {
  MEMRA_GPU_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  cudaStream_t stream = static_cast<cuda::CudaBackend&>(*gpu).stream();
  const std::pair<int64_t, int64_t> shapes[] = {{4096, 256}, {12288, 128}, {256, 200}};
  const int64_t rows = 33;
  for (GgmlType t : kMmaTypes) {
    for (auto [n_in, n_out] : shapes) {
      Matrix m = make_matrix(t, n_in, n_out, 77);
      const auto xh = test::normal_floats(static_cast<size_t>(rows * n_in), 1.0f, 78);
      WeightRef cw = m.ref;
      cpu->upload_matrix(cw, m.bytes.data());
      test::DevFloats cx(*cpu, xh), cout(*cpu, static_cast<size_t>(rows * n_out));
      cpu->matmul(cw, cx.get(), cout.get(), rows, 0, false);
      const auto want = cout.download();

      Uploaded w = upload(*gpu, m);
      DevAct act(*gpu, xh, rows, n_in);
      DevBuf out(*gpu, want.size() * 4);
      cuda::matmul_q8_mma(*w.dev, 0, act.act, out.as<float>(), n_out, false, stream);
      std::vector<float> got(want.size());
      gpu->to_host(got.data(), out.p, got.size() * 4);
      // 8-bit activations with per-32 scales: about 0.5% relative error of a dot product.
      EXPECT_LE(test::rel_err(got, want), 2e-2) << quant::type_name(t) << " " << n_in << "x" << n_out;
    }
  }
}

// Prints TMAC/s (multiply-accumulates per second) for 512 rows x 4096 x 12288, tensor cores vs
// the GEMV; CUDA events, median of 10. Informational: no assertion on speed.
TEST(GpuMatmulMma, Throughput) {
  MEMRA_GPU_OR_SKIP(gpu);
  cudaStream_t stream = static_cast<cuda::CudaBackend&>(*gpu).stream();
  const int64_t rows = 512, n_in = 4096, n_out = 12288;
  const double macs = static_cast<double>(rows) * n_in * n_out;
  const auto xh = test::normal_floats(static_cast<size_t>(rows * n_in), 1.0f, 91);
  DevAct act(*gpu, xh, rows, n_in);
  DevBuf out(*gpu, static_cast<size_t>(rows * n_out) * 4);
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  auto median_ms = [&](auto&& launch, int reps) {
    launch();  // warm-up (and one-time setup)
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) {
      cudaEventRecord(e0, stream);
      launch();
      cudaEventRecord(e1, stream);
      cudaEventSynchronize(e1);
      float v = 0;
      cudaEventElapsedTime(&v, e0, e1);
      ms.push_back(v);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q6_K}) {
    Matrix m = make_matrix(t, n_in, n_out, 92);
    Uploaded w = upload(*gpu, m);
    const float mma = median_ms([&] { cuda::matmul_q8_mma(*w.dev, 0, act.act, out.as<float>(), n_out, false, stream); }, 10);
    const float gemv = median_ms([&] { gemv_reference(*w.dev, act.act, rows, out.as<float>(), false, stream); }, 3);
    std::printf("[ mma      ] %s %lldx%lldx%lld: tensor cores %.3f ms = %.1f TMAC/s; GEMV (8-row slices) %.3f ms = %.2f "
                "TMAC/s\n",
                quant::type_name(t), static_cast<long long>(rows), static_cast<long long>(n_in),
                static_cast<long long>(n_out), mma, macs / (mma * 1e-3) / 1e12, gemv, macs / (gemv * 1e-3) / 1e12);
    EXPECT_GT(mma, 0.0f);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

#else  // no CUDA in this build: the tests report SKIPPED through MEMRA_GPU_OR_SKIP

TEST(GpuMatmulMma, BitIdenticalToGemv) { MEMRA_GPU_OR_SKIP(gpu); }
TEST(GpuMatmulMma, DispatchKeepsTheGemvBits) { MEMRA_GPU_OR_SKIP(gpu); }
TEST(GpuMatmulMma, MatchesCpuReference) { MEMRA_GPU_OR_SKIP(gpu); }
TEST(GpuMatmulMma, Throughput) { MEMRA_GPU_OR_SKIP(gpu); }

#endif

}  // namespace
}  // namespace memra
