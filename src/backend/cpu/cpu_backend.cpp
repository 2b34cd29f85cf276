// CPU backend: construction, memory, scratch, and the helpers the ops share. The ops live beside
// their CUDA twins' names: cpu_rowwise.cpp (k_rowwise.cu), cpu_matmul.cpp (k_matmul.cu),
// cpu_attention.cpp (k_attention*.cu), cpu_deltanet.cpp (k_deltanet.cu), cpu_moe.cpp (k_moe.cu).
#include "backend/cpu/cpu_backend.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include <omp.h>


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

}  // namespace memra
