// CudaBackend: the Backend interface on one GPU. One stream; persistent allocations through
// cudaMalloc; a bump scratch arena reset every step (same addresses each step of the same shape,
// which is what lets a decode step be captured once as a CUDA graph and replayed).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device_step.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/op_profiler.h"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& options);
  ~CudaBackend() override;
  std::string name() const override;
  bool is_cpu() const override { return false; }

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  const void* upload_weight(const void* host, size_t bytes) override;
  void upload_matrix(WeightRef& w, const void* host) override;
  size_t matrix_device_bytes(GgmlType type, int64_t n_in, int64_t n_out, int64_t n_mat) const override;
  void check_fits(uint64_t bytes, const std::string& what) override;
  void to_device(void* dst, const void* src, size_t bytes) override;
  void to_host(void* dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* dst, size_t bytes) override;
  void synchronize() override;
  float* scratch(size_t n_floats) override;
  void reset_scratch() override;
  size_t scratch_mark() const override { return arena_used_; }
  void scratch_release(size_t mark) override { arena_used_ = mark; }
  std::string unsupported(const ModelDims& dims) const override;
  double measure_read_bandwidth() override;
  GgmlType kv_type() const override { return kv_type_; }

  void embed(const WeightRef& table, float* out) override;
  uint64_t rms_norm(const float* x, const VecRef& w, float* out, int64_t rows, int64_t dim, float eps) override;
  void matmul(const WeightRef& w, MatmulInput x, float* out, int64_t rows, int64_t mat, bool accumulate) override;
  void matmul_multi(MatmulInput x, int64_t rows, const MatmulOut* outs, int n_outs) override;
  void silu_mul(const float* gate, const float* up, float* out, int64_t n) override;
  void swiglu(const WeightRef& gate, const WeightRef& up, MatmulInput x, float* act, int64_t rows) override;
  void gather_rows(const float* x, const int32_t* src_rows, int64_t n, int64_t cols, float* out) override;

  void qk_norm_rope(float* q, float* k, const VecRef& q_norm, const VecRef& k_norm, const AttnShape& s,
                    float eps) override;
  void attention(int layer, const float* q, const float* k, const float* v, float* out, const AttnShape& s) override;
  void attention_block(int layer, float* q, float* k, const float* v, const VecRef& q_norm, const VecRef& k_norm,
                       float eps, const AttnGate& gate, float* out, const AttnShape& s) override;
  void sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim, int64_t gate_row_stride,
                        int gate_head_stride) override;

  void conv1d_silu(int layer, const float* x, const VecRef& w, float* out, int channels, int kernel) override;
  void deltanet(int layer, const float* mixed, const float* z, const float* beta_raw, const float* alpha_raw,
                const VecRef& conv_w, const VecRef& ssm_a, const VecRef& dt_bias, const VecRef& norm_w, float* y,
                const GdnShape& s, float eps) override;
  void moe_ffn(const MoeWeights& m, MatmulInput x, float* out, int64_t rows, int64_t hidden) override;

  void argmax(const float* logits, int64_t rows, int64_t n, int32_t* out_host) override;
  void sample(const float* logits, int64_t rows, int64_t n, const RowSampling* per_row, int32_t* out_host) override;

  bool graph_begin(uint64_t key) override;
  void graph_end() override;

  cudaStream_t stream() const { return stream_; }
  const DevWeight& dev_weight(const WeightRef& w) const;

 protected:
  void on_step(const StepPlan& plan) override;

 private:
  // The f16 form of x (rows x cols) for the matmuls: the one the last rms_norm wrote when x carries
  // its token, else converted now into step scratch.
  F16Act activation(MatmulInput x, int64_t rows, int64_t cols);
  const float* inv_freq(int n_rot, float theta);
  void check_kv_rows(const AttnShape& s) const;
  float* attention_work(const AttnShape& s);  // the split partials' scratch for this step

  cudaStream_t stream_ = nullptr;
  std::string device_name_;
  // weights: WeightRef.data -> device layout
  std::unordered_map<const void*, DevWeight> weights_;
  // scratch arena
  uint8_t* arena_ = nullptr;
  size_t arena_size_ = 0, arena_used_ = 0;
  // step tables
  DeviceStep step_;
  uint8_t* step_dev_ = nullptr;
  uint8_t* step_host_ = nullptr;  // pinned
  // upload_matrix's two pinned staging pieces (repacked on the host while the other one copies) and
  // the events that say when a piece's copy is done; grown to the largest piece so far.
  uint8_t* staging_[2] = {nullptr, nullptr};
  cudaEvent_t staged_[2] = {nullptr, nullptr};
  size_t staging_bytes_ = 0;
  uint8_t* staging_piece(int i, size_t bytes);
  size_t step_capacity_ = 0;
  cudaEvent_t step_event_ = nullptr;
  std::unordered_map<uint64_t, float*> inv_freq_;
  // recorded decode steps
  bool graphs_enabled_ = true;
  bool pdl_option_ = true;  // MEMRA_CUDA_PDL; a step uses it only up to kPdlMaxRows rows (on_step)
  // A recorded step and the DeviceStep its kernels were launched with (their arguments hold it):
  // a replay is only right for a step of the same DeviceStep (graph_begin checks).
  struct RecordedStep {
    cudaGraphExec_t exec = nullptr;
    cuda::DeviceStep step;
  };
  std::unordered_map<uint64_t, RecordedStep> graphs_;
  uint64_t capturing_key_ = 0;
  bool capturing_ = false;
  void drop_graphs();
  OpProfiler profiler_;
  // The f16 form of the last rms_norm output, kept in a persistent slot (it lives across the
  // layer boundary, where step scratch is released); `token` is what that rms_norm returned.
  struct NormForm {
    const float* x = nullptr;
    uint64_t token = 0;
    F16Act act;
  } norm_form_;
  uint64_t norm_tokens_ = 0;  // tokens handed out so far
  GgmlType kv_type_ = GgmlType::F16;  // MEMRA_CUDA_KV
  bool attn_tc_ = true;               // CudaOptions::attn_tc
  uint8_t* act_slot_ = nullptr;
  size_t act_slot_bytes_ = 0;
  F16Act act_slot(int64_t rows, int64_t cols);
};

}  // namespace memra::cuda
