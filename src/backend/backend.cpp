// Default compositions of the fusable ops, in terms of the primitive ops. Backends override
// them with fused kernels that must give the same results as these compositions up to the
// tolerances their tests state (bit-identical where the op is exact).
#include "backend/backend.h"

#include <vector>

#include "common/error.h"
#include "quant/quant.h"
#include "step/sampling.h"
#include "step/sequence_cache.h"
#include "step/step_plan.h"

namespace memra {

void Backend::set_step(const StepPlan& plan) {
  for (const StepSeq& seq : plan.seqs) seq.cache->check_writable(seq.pos0, seq.pos0 + seq.n_rows);
  plan_ = &plan;
  on_step(plan);
}

size_t Backend::matrix_device_bytes(GgmlType type, int64_t n_in, int64_t n_out, int64_t n_mat) const {
  return quant::row_bytes(type, n_in) * static_cast<size_t>(n_out) * static_cast<size_t>(n_mat);
}

void Backend::swiglu(const WeightRef& gate, const WeightRef& up, MatmulInput x, float* act, int64_t rows) {
  MEMRA_ASSERT(gate.n_out == up.n_out && gate.n_in == up.n_in, "swiglu: gate {} / up {} mismatch", gate.name, up.name);
  float* u = scratch(static_cast<size_t>(rows * up.n_out));
  MatmulOut outs[2] = {{&gate, act, false}, {&up, u, false}};
  matmul_multi(x, rows, outs, 2);
  silu_mul(act, u, act, rows * gate.n_out);
}

void Backend::attention_block(int layer, float* q, float* k, const float* v, const VecRef& q_norm,
                              const VecRef& k_norm, float eps, const AttnGate& gate, float* out, const AttnShape& s) {
  qk_norm_rope(q, k, q_norm, k_norm, s, eps);
  attention(layer, q, k, v, out, s);
  if (gate.x != nullptr)
    sigmoid_gate_mul(out, gate.x, plan().n_rows(), s.n_head, s.head_dim, gate.row_stride, gate.head_stride);
}

void Backend::argmax(const float* logits, int64_t rows, int64_t n, int32_t* out_host) {
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    to_host(row.data(), logits + r * n, static_cast<size_t>(n) * sizeof(float));
    out_host[r] = memra::argmax(row);
  }
}

void Backend::sample(const float* logits, int64_t rows, int64_t n, const RowSampling* per_row, int32_t* out_host) {
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const RowSampling& s = per_row[r];
    MEMRA_ASSERT(s.params != nullptr, "row {} has no sampling parameters", r);
    to_host(row.data(), logits + r * n, static_cast<size_t>(n) * sizeof(float));
    out_host[r] = sample_token(row, *s.params, s.token_index,
                               std::span<const int32_t>(s.history, static_cast<size_t>(s.history_len)),
                               std::span<const uint32_t>(s.allowed, static_cast<size_t>(s.allowed_words)));
  }
}

}  // namespace memra
