// CPU mixture-of-experts FFN: softmax router over all experts, top-k (ties: lower expert id),
// optional renormalisation, SwiGLU experts, plus the sigmoid-gated shared expert.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"

namespace memra {

void CpuBackend::moe_ffn(const MoeWeights& m, MatmulInput in, float* out, int64_t rows, int64_t hidden) {
  const float* x = in.x;
  MEMRA_ASSERT(m.router.n_in == hidden && m.router.n_out == m.n_expert && m.n_used <= m.n_expert);
  const int64_t n_ff = m.gate_exps.n_out;
  std::vector<float> logits(static_cast<size_t>(m.n_expert));
  std::vector<float> g(n_ff), u(n_ff), y(hidden);
  std::vector<double> acc(hidden);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    matmul(m.router, xr, logits.data(), 1, 0, false);
    // softmax in float64
    double mx = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(m.n_expert);
    double sum = 0;
    for (int e = 0; e < m.n_expert; ++e) sum += (p[e] = std::exp(logits[e] - mx));
    for (auto& v : p) v /= sum;
    std::vector<int> order(m.n_expert);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    double top_sum = 0;
    for (int i = 0; i < m.n_used; ++i) top_sum += p[order[i]];
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int i = 0; i < m.n_used; ++i) {
      const int e = order[i];
      const double w = m.norm_topk ? p[e] / top_sum : p[e];
      matmul(m.gate_exps, xr, g.data(), 1, e, false);
      matmul(m.up_exps, xr, u.data(), 1, e, false);
      silu_mul(g.data(), u.data(), g.data(), n_ff);
      matmul(m.down_exps, g.data(), y.data(), 1, e, false);
      for (int64_t j = 0; j < hidden; ++j) acc[j] += w * y[j];
    }
    if (m.gate_shexp.valid()) {
      const int64_t n_sh = m.gate_shexp.n_out;
      std::vector<float> sg(n_sh), su(n_sh);
      matmul(m.gate_shexp, xr, sg.data(), 1, 0, false);
      matmul(m.up_shexp, xr, su.data(), 1, 0, false);
      silu_mul(sg.data(), su.data(), sg.data(), n_sh);
      matmul(m.down_shexp, sg.data(), y.data(), 1, 0, false);
      double gate = 1.0;
      if (m.shexp_gate.valid()) {
        float gl;
        matmul(m.shexp_gate, xr, &gl, 1, 0, false);
        gate = cpu::sigmoid(gl);
      }
      for (int64_t j = 0; j < hidden; ++j) acc[j] += gate * y[j];
    }
    for (int64_t j = 0; j < hidden; ++j) out[r * hidden + j] += static_cast<float>(acc[j]);
  }
}

}  // namespace memra
