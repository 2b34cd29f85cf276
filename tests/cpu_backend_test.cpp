// The CPU backend's options: CpuOptions::threads (MEMRA_THREADS) sets the OpenMP team of its
// ops, and its results never depend on it.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace memra {
namespace {

TEST(CpuBackend, ThreadsOptionSetsTheTeam) {
  EXPECT_EQ(CpuBackend(CpuOptions{1}).threads(), 1);
  EXPECT_EQ(CpuBackend(CpuOptions{3}).threads(), 3);
  EXPECT_EQ(CpuBackend(CpuOptions{}).threads(), omp_get_max_threads());  // 0: every core
}

// A matmul large enough to run in parallel gives the same bits on one thread and on three.
TEST(CpuBackend, ResultsDoNotDependOnThreads) {
  const int64_t n_in = 256, n_out = 300, rows = 3;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> weights(static_cast<size_t>(n_in * n_out)), x(static_cast<size_t>(n_in * rows));
  for (float& v : weights) v = dist(rng);
  for (float& v : x) v = dist(rng);
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 3}) {
    CpuBackend be(CpuOptions{threads});
    WeightRef w;
    w.type = GgmlType::F32;
    w.n_in = n_in;
    w.n_out = n_out;
    w.row_bytes = static_cast<size_t>(n_in) * sizeof(float);
    w.mat_bytes = w.row_bytes * static_cast<size_t>(n_out);
    w.name = "w";
    be.upload_matrix(w, weights.data());
    std::vector<float> out(static_cast<size_t>(n_out * rows));
    be.matmul(w, x.data(), out.data(), rows, 0, false);
    outs.push_back(out);
  }
  EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace memra
