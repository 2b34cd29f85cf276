// CPU backend: memory, scratch, and the row-wise ops.
#include "backend/cpu/cpu_backend.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include <omp.h>

#include "common/error.h"
#include "quant/quant.h"
#include "step/step_plan.h"

namespace memra {

std::unique_ptr<Backend> make_cpu_backend(const CpuOptions& options) { return std::make_unique<CpuBackend>(options); }

CpuBackend::CpuBackend(const CpuOptions& options)
    : threads_(options.threads > 0 ? options.threads : omp_get_max_threads()) {}
CpuBackend::~CpuBackend() = default;

namespace cpu {

double dot(const float* a, const float* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<double>(a[i]) * b[i];
    s1 += static_cast<double>(a[i + 1]) * b[i + 1];
    s2 += static_cast<double>(a[i + 2]) * b[i + 2];
    s3 += static_cast<double>(a[i + 3]) * b[i + 3];
  }
  for (; i < n; ++i) s0 += static_cast<double>(a[i]) * b[i];
  return (s0 + s1) + (s2 + s3);
}

double rms_scale(const float* x, int64_t n, double eps) {
  double ss = dot(x, x, n);
  return 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
}

}  // namespace cpu

// ---- memory ----

void* CpuBackend::alloc(size_t bytes) {
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return p;
}
void CpuBackend::free(void* p) { std::free(p); }
const void* CpuBackend::upload_weight(const void* host, size_t) { return host; }
void CpuBackend::to_device(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::copy(void* dst, const void* src, size_t bytes) { std::memmove(dst, src, bytes); }
void CpuBackend::zero(void* dst, size_t bytes) { std::memset(dst, 0, bytes); }

float* CpuBackend::scratch(size_t n) {
  n = (std::max<size_t>(n, 1) + 15) / 16 * 16;  // keep 64-byte alignment between allocations
  while (block_index_ < blocks_.size()) {
    Block& b = blocks_[block_index_];
    if (b.size - b.used >= n) {
      float* p = b.data.get() + b.used;
      b.used += n;
      return p;
    }
    ++block_index_;
  }
  size_t size = std::max<size_t>(n, size_t{1} << 22);
  blocks_.push_back(Block{std::unique_ptr<float[], AlignedDelete>(new (std::align_val_t{64}) float[size]), size, n});
  block_index_ = blocks_.size() - 1;
  return blocks_.back().data.get();
}

void CpuBackend::reset_scratch() {
  for (auto& b : blocks_) b.used = 0;
  block_index_ = 0;
}

// A mark is (block index, used floats in it) packed into one integer.
size_t CpuBackend::scratch_mark() const {
  size_t used = block_index_ < blocks_.size() ? blocks_[block_index_].used : 0;
  return (block_index_ << 40) | used;
}

void CpuBackend::scratch_release(size_t mark) {
  size_t index = mark >> 40, used = mark & ((size_t{1} << 40) - 1);
  for (size_t i = index + 1; i < blocks_.size(); ++i) blocks_[i].used = 0;
  if (index < blocks_.size()) blocks_[index].used = used;
  block_index_ = index;
}

// ---- row-wise ops ----

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

void CpuBackend::silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(cpu::silu(gate[i]) * up[i]);
}

void CpuBackend::gather_rows(const float* x, const int32_t* src_rows, int64_t n, int64_t cols, float* out) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * cols, x + static_cast<int64_t>(src_rows[i]) * cols, cols * sizeof(float));
}

}  // namespace memra
