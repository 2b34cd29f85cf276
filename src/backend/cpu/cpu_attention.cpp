// CPU full attention: QK-norm + NeoX rope, KV append, causal softmax attention.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "step/kv_blocks.h"
#include "step/sequence_cache.h"
#include "step/step_plan.h"

namespace memra {

namespace {

// Per-head RMSNorm with weight, then NeoX rope on the first n_rot dims (pairs i, i + n_rot/2).
void norm_rope_head(float* h, const VecRef& w, int hd, int n_rot, double theta, int32_t pos, float eps) {
  double scale = cpu::rms_scale(h, hd, eps);
  double tmp[4096];
  MEMRA_ASSERT(hd <= 4096);
  for (int i = 0; i < hd; ++i) tmp[i] = h[i] * scale * w.data[i];
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    double inv_freq = std::pow(theta, -2.0 * i / n_rot);
    double angle = static_cast<double>(pos) * inv_freq;
    double c = std::cos(angle), s = std::sin(angle);
    double a = tmp[i], b = tmp[i + half];
    tmp[i] = a * c - b * s;
    tmp[i + half] = b * c + a * s;
  }
  for (int i = 0; i < hd; ++i) h[i] = static_cast<float>(tmp[i]);
}

}  // namespace

void CpuBackend::qk_norm_rope(float* q, float* k, const VecRef& q_norm, const VecRef& k_norm, const AttnShape& s,
                              float eps) {
  const StepPlan& p = *plan_;
  const int64_t rows = p.n_rows();
  MEMRA_ASSERT(q_norm.n == s.head_dim && k_norm.n == s.head_dim);
  const int64_t q_row = static_cast<int64_t>(s.n_head) * s.q_head_stride;
  const int64_t k_row = static_cast<int64_t>(s.n_head_kv) * s.head_dim;
#pragma omp parallel for num_threads(threads_) schedule(static) \
    if (rows > 1 && cpu::worth_parallel(rows * (s.n_head + s.n_head_kv) * s.head_dim))
  for (int64_t r = 0; r < rows; ++r) {
    for (int h = 0; h < s.n_head; ++h)
      norm_rope_head(q + r * q_row + h * s.q_head_stride, q_norm, s.head_dim, s.n_rot, s.rope_theta, p.positions[r], eps);
    for (int h = 0; h < s.n_head_kv; ++h)
      norm_rope_head(k + r * k_row + h * s.head_dim, k_norm, s.head_dim, s.n_rot, s.rope_theta, p.positions[r], eps);
  }
}

void CpuBackend::attention(int layer, const float* q, const float* k, const float* v, float* out,
                           const AttnShape& s) {
  const StepPlan& p = *plan_;
  const int hd = s.head_dim;
  const int64_t kv_row = static_cast<int64_t>(s.n_head_kv) * hd;
  const int64_t q_row = static_cast<int64_t>(s.n_head) * s.q_head_stride;
  const int64_t o_row = static_cast<int64_t>(s.n_head) * hd;
  const int group = s.n_head / s.n_head_kv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (const StepSeq& seq : p.seqs) {
    SequenceCache& cache = *seq.cache;
    MEMRA_ASSERT(cache.kv_type == GgmlType::F32, "CPU attention needs an f32 KV cache");
    MEMRA_ASSERT(seq.pos0 + seq.n_rows <= cache.capacity(), "KV cache not reserved");
    // Through the block table (step/kv_blocks.h): position t is row t % kKvBlock of block
    // t / kKvBlock; Backend::set_step checked that the rows appended here are in blocks this
    // sequence owns alone.
    for (int32_t i = 0; i < seq.n_rows; ++i) {
      std::memcpy(cache.kv_row(layer, seq.pos0 + i, false), k + (seq.row0 + i) * kv_row, kv_row * sizeof(float));
      std::memcpy(cache.kv_row(layer, seq.pos0 + i, true), v + (seq.row0 + i) * kv_row, kv_row * sizeof(float));
    }
    const int32_t n_all = seq.pos0 + seq.n_rows;
    std::vector<const float*> kblk, vblk;  // per block: its first K / V row
    for (int32_t t = 0; t < n_all; t += kKvBlock) {
      kblk.push_back(reinterpret_cast<const float*>(cache.kv_row(layer, t, false)));
      vblk.push_back(reinterpret_cast<const float*>(cache.kv_row(layer, t, true)));
    }
    auto key = [&](int32_t t) { return kblk[t / kKvBlock] + (t % kKvBlock) * kv_row; };
    auto value = [&](int32_t t) { return vblk[t / kKvBlock] + (t % kKvBlock) * kv_row; };
#pragma omp parallel for num_threads(threads_) collapse(2) schedule(static) \
    if (cpu::worth_parallel(int64_t{seq.n_rows} * s.n_head * (seq.pos0 + seq.n_rows) * hd * 2))
    for (int32_t i = 0; i < seq.n_rows; ++i) {
      for (int h = 0; h < s.n_head; ++h) {
        const int32_t n_keys = seq.pos0 + i + 1;  // causal: keys 0..pos
        const int kvh = h / group;
        const float* qh = q + (seq.row0 + i) * q_row + h * s.q_head_stride;
        std::vector<double> score(n_keys);
        double mx = -INFINITY;
        for (int32_t t = 0; t < n_keys; ++t) {
          score[t] = cpu::dot(qh, key(t) + kvh * hd, hd) * scale;
          mx = std::max(mx, score[t]);
        }
        double sum = 0;
        for (int32_t t = 0; t < n_keys; ++t) sum += (score[t] = std::exp(score[t] - mx));
        std::vector<double> acc(hd, 0.0);
        for (int32_t t = 0; t < n_keys; ++t) {
          const float* vt = value(t) + kvh * hd;
          double pt = score[t] / sum;
          for (int d = 0; d < hd; ++d) acc[d] += pt * vt[d];
        }
        float* oh = out + (seq.row0 + i) * o_row + h * hd;
        for (int d = 0; d < hd; ++d) oh[d] = static_cast<float>(acc[d]);
      }
    }
  }
}

}  // namespace memra
