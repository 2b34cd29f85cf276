// CPU row-wise ops (the CUDA twin: k_rowwise.cu): embedding lookup, RMSNorm, SwiGLU product,
// attention output gate, row gather. Each output row depends only on its own input row.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "quant/quant.h"
#include "step/step_plan.h"

namespace memra {

void CpuBackend::embed(const WeightRef& table, float* out) {
  const StepPlan& p = *plan_;
  const int64_t rows = p.n_rows();
  for (int64_t r = 0; r < rows; ++r) {
    int32_t t = p.tokens[r];
    MEMRA_ASSERT(t >= 0 && t < table.n_out, "token {} outside the embedding table", t);
    const uint8_t* src = static_cast<const uint8_t*>(table.data) + table.row_bytes * static_cast<size_t>(t);
    quant::dequantize_row(table.type, src, out + r * table.n_in, table.n_in);
  }
}

uint64_t CpuBackend::rms_norm(const float* x, const VecRef& w, float* out, int64_t rows, int64_t dim, float eps) {
  MEMRA_ASSERT(w.n == dim, "rms_norm weight {} != dim {}", w.n, dim);
#pragma omp parallel for num_threads(threads_) schedule(static) if (cpu::worth_parallel(rows * dim) && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double scale = cpu::rms_scale(xr, dim, eps);
    for (int64_t i = 0; i < dim; ++i) out[r * dim + i] = static_cast<float>(xr[i] * scale * w.data[i]);
  }
  return 0;  // the matmuls read the floats themselves
}

void CpuBackend::silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(cpu::silu(gate[i]) * up[i]);
}

void CpuBackend::gather_rows(const float* x, const int32_t* src_rows, int64_t n, int64_t cols, float* out) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * cols, x + static_cast<int64_t>(src_rows[i]) * cols, cols * sizeof(float));
}

void CpuBackend::sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim,
                                  int64_t gate_row_stride, int gate_head_stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < n_head; ++h)
      for (int i = 0; i < head_dim; ++i) {
        float& o = out[(r * n_head + h) * head_dim + i];
        o = static_cast<float>(o * cpu::sigmoid(gate[r * gate_row_stride + h * gate_head_stride + i]));
      }
}

}  // namespace memra
