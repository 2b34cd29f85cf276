// CPU Gated DeltaNet: causal conv window, the delta rule, and the gated per-head RMSNorm.
// MATH.md states the math.
//
// Every token goes through the recurrent form, one after another, and the recurrent state is
// rounded to float32 after every token, as the GPU does (k_deltanet.cu), and to the cache's
// state type after that (bf16 with MEMRA_SSM_STATE=bf16: from the float32 value, to nearest
// even, every token too). So a sequence's outputs
// and its state after position p are the same bits however its tokens were cut into steps: a
// prompt in one step or in pieces cut anywhere, or token by token as decode feeds them. Prefix
// snapshots rely on it (step/prefix_cache.h): a prompt may resume from the state at any position,
// the end of an earlier prompt or of an earlier answer included. (A chunked form, 64 tokens at a
// time in float64, was used before: its bits held only on its 64-position grid and differed from
// decode's; tests/split_prefill_test.cpp checks the whole model for any cut.)
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "quant/float_convert.h"
#include "step/sequence_cache.h"
#include "step/step_plan.h"

namespace memra {

namespace {

double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// Inputs of one value head for a run of tokens, in float64.
struct HeadInputs {
  int n = 0, d = 0;
  std::vector<double> q, k, v, beta, g;  // q, k, v: n x d
};

void load_head(HeadInputs& in, const float* conv_out, const float* beta_raw, const float* alpha_raw,
               const VecRef& ssm_a, const VecRef& dt_bias, const GdnShape& s, int h, int64_t row0, int n) {
  const int d = s.d;
  const int64_t C = s.conv_channels();
  const int r = s.n_v / s.n_k;
  const int kh = s.head_map == GdnHeadMap::Tiled ? h % s.n_k : h / r;
  in.n = n;
  in.d = d;
  in.q.assign(static_cast<size_t>(n) * d, 0);
  in.k.assign(static_cast<size_t>(n) * d, 0);
  in.v.assign(static_cast<size_t>(n) * d, 0);
  in.beta.assign(n, 0);
  in.g.assign(n, 0);
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int t = 0; t < n; ++t) {
    const int64_t row = row0 + t;
    const float* qs = conv_out + row * C + static_cast<int64_t>(kh) * d;
    const float* ks = conv_out + row * C + static_cast<int64_t>(s.n_k) * d + static_cast<int64_t>(kh) * d;
    const float* vs = conv_out + row * C + 2 * static_cast<int64_t>(s.n_k) * d + static_cast<int64_t>(h) * d;
    // l2norm(x) = x * rsqrt(sum(x^2) + 1e-6)
    double qn = 1.0 / std::sqrt(cpu::dot(qs, qs, d) + 1e-6) * q_scale;
    double kn = 1.0 / std::sqrt(cpu::dot(ks, ks, d) + 1e-6);
    for (int i = 0; i < d; ++i) {
      in.q[t * d + i] = qs[i] * qn;
      in.k[t * d + i] = ks[i] * kn;
      in.v[t * d + i] = vs[i];
    }
    double b, a;
    if (s.gate_layout == GdnGateLayout::Separate) {
      b = beta_raw[row * s.n_v + h];
      a = alpha_raw[row * s.n_v + h];
    } else {
      const int grp = h / r, j = h % r;
      const float* ba = beta_raw + row * 2 * s.n_v + static_cast<int64_t>(grp) * 2 * r;
      b = ba[j];
      a = ba[r + j];
    }
    in.beta[t] = cpu::sigmoid(b);
    in.g[t] = static_cast<double>(ssm_a.data[h]) * softplus(a + dt_bias.data[h]);
  }
}

// One token: S = S*exp(g); S += k (beta (v - S^T k))^T; o = S^T q. Two passes over S: the
// decay with S^T k, then the update with S^T q; each element sees the same operations in the
// same order as four separate passes would give it. `tmp`: 2 d doubles of scratch.
void recurrent_step(std::vector<double>& S, const HeadInputs& in, int t, float* o, std::vector<double>& tmp) {
  const int d = in.d;
  const double decay = std::exp(in.g[t]);
  tmp.assign(2 * static_cast<size_t>(d), 0.0);
  double* delta = tmp.data();
  double* acc = delta + d;
  for (int i = 0; i < d; ++i) {
    const double ki = in.k[t * d + i];
    double* row = S.data() + static_cast<size_t>(i) * d;
    for (int j = 0; j < d; ++j) {
      row[j] *= decay;
      delta[j] += row[j] * ki;
    }
  }
  for (int j = 0; j < d; ++j) delta[j] = in.beta[t] * (in.v[t * d + j] - delta[j]);
  for (int i = 0; i < d; ++i) {
    const double ki = in.k[t * d + i], qi = in.q[t * d + i];
    double* row = S.data() + static_cast<size_t>(i) * d;
    for (int j = 0; j < d; ++j) {
      row[j] += ki * delta[j];
      acc[j] += row[j] * qi;
    }
  }
  for (int j = 0; j < d; ++j) o[j] = static_cast<float>(acc[j]);
}

}  // namespace

void CpuBackend::conv1d_silu(int layer, const float* x, const VecRef& w, float* out, int channels, int kernel) {
  const StepPlan& p = *plan_;
  MEMRA_ASSERT(w.n == static_cast<int64_t>(channels) * kernel, "conv taps {} != {} x {}", w.n, channels, kernel);
  const int hist = kernel - 1;
  for (const StepSeq& seq : p.seqs) {
    float* state = seq.cache->layers[layer].conv;  // hist x channels, oldest first
    MEMRA_ASSERT(state != nullptr, "layer {} has no conv state", layer);
    const int n = seq.n_rows;
    // window rows: hist state rows, then the n new input rows
    auto in_at = [&](int wr, int ch) -> float {
      return wr < hist ? state[static_cast<int64_t>(wr) * channels + ch]
                       : x[(seq.row0 + wr - hist) * static_cast<int64_t>(channels) + ch];
    };
#pragma omp parallel for num_threads(threads_) schedule(static) if (cpu::worth_parallel(int64_t{channels} * n * kernel))
    for (int ch = 0; ch < channels; ++ch) {
      for (int t = 0; t < n; ++t) {
        double acc = 0;
        for (int j = 0; j < kernel; ++j) acc += static_cast<double>(w.data[ch * kernel + j]) * in_at(t + j, ch);
        out[(seq.row0 + t) * static_cast<int64_t>(channels) + ch] = static_cast<float>(cpu::silu(acc));
      }
      // New state: the last `hist` rows of the window.
      float last[64];
      MEMRA_ASSERT(hist <= 64);
      for (int j = 0; j < hist; ++j) last[j] = in_at(n + j, ch);
      for (int j = 0; j < hist; ++j) state[static_cast<int64_t>(j) * channels + ch] = last[j];
    }
  }
}

void CpuBackend::gated_delta_rule(int layer, const float* conv_out, const float* beta_raw, const float* alpha_raw,
                                  const VecRef& ssm_a, const VecRef& dt_bias, float* out, const GdnShape& s) {
  const StepPlan& p = *plan_;
  MEMRA_ASSERT(ssm_a.n == s.n_v && dt_bias.n == s.n_v && s.n_v % s.n_k == 0);
  const int d = s.d;
  const int64_t out_row = static_cast<int64_t>(s.n_v) * d;
  for (const StepSeq& seq : p.seqs) {
    void* state = seq.cache->layers[layer].ssm;
    MEMRA_ASSERT(state != nullptr, "layer {} has no recurrent state", layer);
    const bool bf16 = seq.cache->shape().ssm_type == GgmlType::BF16;
#pragma omp parallel for num_threads(threads_) schedule(static) if (cpu::worth_parallel(int64_t{s.n_v} * d * d * seq.n_rows))
    for (int h = 0; h < s.n_v; ++h) {
      HeadInputs in;
      load_head(in, conv_out, beta_raw, alpha_raw, ssm_a, dt_bias, s, h, seq.row0, seq.n_rows);
      const size_t n_state = static_cast<size_t>(d) * d, at = static_cast<size_t>(h) * n_state;
      float* Sf = bf16 ? nullptr : static_cast<float*>(state) + at;
      uint16_t* Sb = bf16 ? static_cast<uint16_t*>(state) + at : nullptr;
      std::vector<double> S(n_state);
      for (size_t i = 0; i < n_state; ++i) S[i] = bf16 ? quant::bf16_to_f32(Sb[i]) : Sf[i];
      float* o = out + static_cast<int64_t>(seq.row0) * out_row + static_cast<int64_t>(h) * d;
      std::vector<double> tmp;
      for (int t = 0; t < seq.n_rows; ++t) {
        recurrent_step(S, in, t, o + static_cast<int64_t>(t) * out_row, tmp);
        // float32, then the stored type, after every token: the state a decode step would store
        // (see the file comment).
        if (bf16) {
          for (size_t i = 0; i < n_state; ++i) {
            Sb[i] = quant::f32_to_bf16(static_cast<float>(S[i]));
            S[i] = quant::bf16_to_f32(Sb[i]);
          }
        } else {
          for (size_t i = 0; i < n_state; ++i) S[i] = Sf[i] = static_cast<float>(S[i]);
        }
      }
    }
  }
}

void CpuBackend::deltanet(int layer, const float* mixed, const float* z, const float* beta_raw,
                          const float* alpha_raw, const VecRef& conv_w, const VecRef& ssm_a, const VecRef& dt_bias,
                          const VecRef& norm_w, float* y, const GdnShape& s, float eps) {
  const int64_t rows = plan().n_rows();
  const int channels = s.conv_channels();
  float* conv = scratch(static_cast<size_t>(rows * channels));
  conv1d_silu(layer, mixed, conv_w, conv, channels, s.conv_kernel);
  float* o = scratch(static_cast<size_t>(rows) * s.n_v * s.d);
  gated_delta_rule(layer, conv, beta_raw, alpha_raw, ssm_a, dt_bias, o, s);
  gated_rms_norm(o, norm_w, z, y, rows, s.n_v, s.d, eps);
}

void CpuBackend::gated_rms_norm(const float* o, const VecRef& w, const float* z, float* out, int64_t rows,
                                int n_heads, int d, float eps) {
  MEMRA_ASSERT(w.n == d, "gated norm weight {} != head size {}", w.n, d);
  const int64_t n = rows * n_heads;
#pragma omp parallel for num_threads(threads_) schedule(static) if (cpu::worth_parallel(n * d))
  for (int64_t rh = 0; rh < n; ++rh) {
    const float* oh = o + rh * d;
    double scale = cpu::rms_scale(oh, d, eps);
    for (int i = 0; i < d; ++i)
      out[rh * d + i] = static_cast<float>(oh[i] * scale * w.data[i] * cpu::silu(z[rh * d + i]));
  }
}

}  // namespace memra
