// CPU matmul (the CUDA twin: k_matmul.cu): float64 dot products of dequantized weight rows with
// the float activations, rounded to float once.
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "quant/quant.h"

namespace memra {

void CpuBackend::matmul(const WeightRef& w, MatmulInput in, float* out, int64_t rows, int64_t mat,
                        bool accumulate) {
  const float* x = in.x;
  MEMRA_ASSERT(w.valid() && mat >= 0 && mat < w.n_mat, "matmul on {} matrix {}", w.name, mat);
  const uint8_t* base = static_cast<const uint8_t*>(w.data) + w.mat_bytes * static_cast<size_t>(mat);
  const int64_t n_in = w.n_in, n_out = w.n_out;
  // One weight row is decoded once and used for every activation row: each output element is
  // the same float64 dot product whatever the number of rows.
#pragma omp parallel num_threads(threads_) if (cpu::worth_parallel(n_out * n_in * rows))
  {
    std::vector<float> wrow(static_cast<size_t>(n_in));
#pragma omp for schedule(static)
    for (int64_t j = 0; j < n_out; ++j) {
      quant::dequantize_row(w.type, base + w.row_bytes * static_cast<size_t>(j), wrow.data(), n_in);
      for (int64_t r = 0; r < rows; ++r) {
        float v = static_cast<float>(cpu::dot(wrow.data(), x + r * n_in, n_in));
        out[r * n_out + j] = accumulate ? out[r * n_out + j] + v : v;
      }
    }
  }
}

}  // namespace memra
