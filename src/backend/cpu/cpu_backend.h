// The CPU reference backend: float32 storage, float64 accumulation, one obvious loop per op.
// OpenMP splits work over independent outputs only, so results never depend on thread count
// (CpuOptions::threads, MEMRA_THREADS).
#pragma once

#include <cmath>
#include <cstddef>
#include <memory>
#include <new>
#include <vector>

#include "backend/backend.h"
#include "backend/options.h"

namespace memra {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuOptions& options = {});
  ~CpuBackend() override;
  int threads() const { return threads_; }
  std::string name() const override { return "cpu"; }
  bool is_cpu() const override { return true; }

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  const void* upload_weight(const void* host, size_t bytes) override;
  void to_device(void* dst, const void* src, size_t bytes) override;
  void to_host(void* dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* dst, size_t bytes) override;
  void synchronize() override {}
  float* scratch(size_t n_floats) override;
  void reset_scratch() override;
  size_t scratch_mark() const override;
  void scratch_release(size_t mark) override;
  GgmlType kv_type() const override { return GgmlType::F32; }

  void embed(const WeightRef& table, float* out) override;
  uint64_t rms_norm(const float* x, const VecRef& w, float* out, int64_t rows, int64_t dim, float eps) override;
  void matmul(const WeightRef& w, MatmulInput x, float* out, int64_t rows, int64_t mat,
              bool accumulate) override;
  void silu_mul(const float* gate, const float* up, float* out, int64_t n) override;
  void gather_rows(const float* x, const int32_t* src_rows, int64_t n, int64_t cols, float* out) override;

  void qk_norm_rope(float* q, float* k, const VecRef& q_norm, const VecRef& k_norm, const AttnShape& s,
                    float eps) override;
  void attention(int layer, const float* q, const float* k, const float* v, float* out,
                 const AttnShape& s) override;
  void sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim,
                        int64_t gate_row_stride, int gate_head_stride) override;

  void conv1d_silu(int layer, const float* x, const VecRef& w, float* out, int channels, int kernel) override;
  void deltanet(int layer, const float* mixed, const float* z, const float* beta_raw, const float* alpha_raw,
                const VecRef& conv_w, const VecRef& ssm_a, const VecRef& dt_bias, const VecRef& norm_w, float* y,
                const GdnShape& s, float eps) override;
  // The pieces deltanet() composes (public for tests).
  void gated_delta_rule(int layer, const float* conv_out, const float* beta_raw, const float* alpha_raw,
                        const VecRef& ssm_a, const VecRef& dt_bias, float* out, const GdnShape& s);
  void gated_rms_norm(const float* o, const VecRef& w, const float* z, float* out, int64_t rows, int n_heads,
                      int d, float eps);

  void moe_ffn(const MoeWeights& m, MatmulInput x, float* out, int64_t rows, int64_t hidden) override;

 private:
  // Scratch arena: blocks are never moved, so pointers stay valid for the whole step.
  // Blocks come from aligned new[]: they must go back through the aligned delete[].
  struct AlignedDelete {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  struct Block { std::unique_ptr<float[], AlignedDelete> data; size_t size; size_t used; };
  std::vector<Block> blocks_;
  size_t block_index_ = 0;
  int threads_ = 1;  // every parallel region's team size
};

// Shared helpers of the CPU ops.
namespace cpu {
// Below this many inner-loop steps (multiply-adds or elements) an op runs on one thread.
// A parallel region costs microseconds when the cores are free, but with more runnable
// threads than cores (two engines, or ctest -j) every spinning barrier can wait a whole
// scheduler slice: the tiny MoE fixtures open thousands of regions per token, and once
// took over 600 s instead of 0.5 s that way. Results never depend on it (see above).
inline constexpr int64_t kParallelMinWork = int64_t{1} << 16;
inline bool worth_parallel(int64_t work) { return work >= kParallelMinWork; }
// Sum of a[i]*b[i] in float64, in index order split over four fixed lanes.
double dot(const float* a, const float* b, int64_t n);
inline double silu(double x) { return x / (1.0 + std::exp(-x)); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
// 1 / sqrt(mean(x^2) + eps) in float64.
double rms_scale(const float* x, int64_t n, double eps);
}  // namespace cpu

}  // namespace memra
