// Helpers for the GPU differential tests (CUDA op vs CPU op on the same inputs). Without a
// usable GPU every Gpu* test reports SKIPPED, never passed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/options.h"
#include "quant/float_convert.h"
#include "quant/quant.h"
#include "step/sequence_cache.h"
#include "test_util.h"
#ifdef MEMRA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace memra::test {

// The CUDA options the GPU tests start from: the test process's MEMRA_CUDA_* knobs, parsed once
// here as the command does (scripts/gpu-check.sh reruns the model tests with a speed-up switched
// on that way). Each test sets what it tests on top of them.
inline const CudaOptions& gpu_options() {
  static const CudaOptions options = engine_options_from_knobs().cuda;
  return options;
}

// The CUDA backend with `options`, or nullptr when this build or machine has none.
inline std::unique_ptr<Backend> make_gpu_backend(const CudaOptions& options = gpu_options()) {
#ifdef MEMRA_HAVE_CUDA
  if (cuda_device_available()) return make_cuda_backend(options);
#else
  (void)options;
#endif
  return nullptr;
}

// Whether the CUDA backend of this build is the CPU emulation (tests/cudasim, ~1000x slower than
// a GPU): tests shrink their shapes there.
inline bool emulated() {
#ifdef MEMRA_HAVE_CUDA
  return cuda_backend_emulated();
#else
  return false;
#endif
}

// KV rows of a sequence go through its block table (step/kv_blocks.h): row t of a layer is row
// t % kKvBlock of block t / kKvBlock, so rows of different blocks are not adjacent.
// Writes positions [pos0, pos0 + n) of `layer` (K, or V when `v`) from `rows` (n rows of the
// cache's row bytes, already in the cache's element type).
inline void write_kv_rows(Backend& be, SequenceCache& seq, int layer, int32_t pos0, int32_t n, bool v,
                          const void* rows) {
  for (int32_t i = 0; i < n;) {  // one copy a block's run of rows (adjacent)
    const int32_t run = std::min(kKvBlock - (pos0 + i) % kKvBlock, n - i);
    be.to_device(seq.kv_row(layer, pos0 + i, v), static_cast<const uint8_t*>(rows) + i * seq.kv_row_bytes,
                 seq.kv_row_bytes * static_cast<size_t>(run));
    i += run;
  }
}
// The bytes of positions [0, n) of `layer` (K, or V when `v`), in position order.
inline std::vector<uint8_t> read_kv_rows(Backend& be, const SequenceCache& seq, int layer, int32_t n, bool v) {
  std::vector<uint8_t> out(seq.kv_row_bytes * static_cast<size_t>(n));
  for (int32_t t = 0; t < n; t += kKvBlock)  // one block's rows are adjacent
    be.to_host(out.data() + t * seq.kv_row_bytes, seq.kv_row(layer, t, v),
               seq.kv_row_bytes * static_cast<size_t>(std::min(kKvBlock, n - t)));
  return out;
}

// A layer's recurrent state (seq.layers[layer].ssm) from floats, rounded to the cache's ssm_type
// (MEMRA_SSM_STATE: bf16 to nearest even, the state a step of that type leaves), and back, widened.
inline void write_ssm(Backend& be, SequenceCache& seq, int layer, const std::vector<float>& v) {
  if (seq.shape().ssm_type != GgmlType::BF16) return be.to_device(seq.layers[layer].ssm, v.data(), v.size() * 4);
  std::vector<uint16_t> b(v.size());
  for (size_t k = 0; k < v.size(); ++k) b[k] = quant::f32_to_bf16(v[k]);
  be.to_device(seq.layers[layer].ssm, b.data(), b.size() * 2);
}
inline std::vector<float> read_ssm(Backend& be, const SequenceCache& seq, int layer, size_t n) {
  std::vector<float> v(n);
  if (seq.shape().ssm_type != GgmlType::BF16) {
    be.to_host(v.data(), seq.layers[layer].ssm, n * 4);
    return v;
  }
  std::vector<uint16_t> b(n);
  be.to_host(b.data(), seq.layers[layer].ssm, n * 2);
  for (size_t k = 0; k < n; ++k) v[k] = quant::bf16_to_f32(b[k]);
  return v;
}

#define MEMRA_GPU_OR_SKIP(var)                                                   \
  auto var = ::memra::test::make_gpu_backend();                                  \
  if (!var) GTEST_SKIP() << "no usable CUDA GPU in this build or on this machine"

inline std::vector<float> random_floats(size_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> normal_floats(size_t n, float stddev, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// ||a - b|| / ||b|| over all elements; infinity if a has a non-finite value.
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// A weight matrix (or a stack of n_mat) in GGUF's layout, made on the host.
struct HostWeight {
  WeightRef ref;
  std::vector<uint8_t> bytes;
};

// Rows drawn cheaply from one pool of N(0, scale) values (shuffled, some negated), so a 35B
// expert stack or an output head takes seconds, not minutes.
inline HostWeight make_weight(GgmlType type, int64_t n_in, int64_t n_out, int64_t n_mat, float scale, uint64_t seed) {
  HostWeight h;
  h.ref.type = type;
  h.ref.n_in = n_in;
  h.ref.n_out = n_out;
  h.ref.n_mat = n_mat;
  h.ref.row_bytes = quant::row_bytes(type, n_in);
  h.ref.mat_bytes = h.ref.row_bytes * n_out;
  h.ref.name = std::string("test.") + quant::type_name(type);
  h.bytes.resize(h.ref.mat_bytes * n_mat);
  const auto pool = normal_floats(static_cast<size_t>(n_in) + 4099, scale, seed);
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out * n_mat; ++r) {
    const int64_t off = (r * 7919) % 4099;
    for (int64_t i = 0; i < n_in; ++i) row[i] = pool[off + (i * 7 + r * 13 + 1) % n_in] * (i % 5 == r % 5 ? -1.3f : 0.9f);
    quant::quantize_row(type, row.data(), h.bytes.data() + r * h.ref.row_bytes, n_in);
  }
  return h;
}

// The weight in `be`'s memory (each backend gets its own WeightRef).
inline WeightRef upload(Backend& be, const HostWeight& h) {
  WeightRef w = h.ref;
  be.upload_matrix(w, h.bytes.data());
  return w;
}

// A float buffer in a backend's memory, filled from / read back to host vectors.
class DevFloats {
 public:
  DevFloats(Backend& be, size_t n) : be_(be), n_(n), p_(static_cast<float*>(be.alloc(n * sizeof(float)))) {}
  DevFloats(Backend& be, const std::vector<float>& host) : DevFloats(be, host.size()) { upload(host); }
  ~DevFloats() { be_.free(p_); }
  DevFloats(const DevFloats&) = delete;
  DevFloats& operator=(const DevFloats&) = delete;
  void upload(const std::vector<float>& host) { be_.to_device(p_, host.data(), host.size() * sizeof(float)); }
  std::vector<float> download() const {
    std::vector<float> h(n_);
    be_.synchronize();
    be_.to_host(h.data(), p_, n_ * sizeof(float));
    return h;
  }
  float* get() const { return p_; }
  VecRef vec() const { return VecRef{p_, static_cast<int64_t>(n_)}; }

 private:
  Backend& be_;
  size_t n_;
  float* p_;
};

}  // namespace memra::test
