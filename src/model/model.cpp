// Model loading and the forward pass of the Qwen3 / Qwen3.5 family, written once against the
// Backend op interface (MATH.md gives the math in GGUF terms).
#include "model/model.h"

#include <chrono>
#include <cstdio>

#include "common/error.h"
#include "common/knobs.h"
#include "gguf/gguf.h"
#include "model/binder.h"
#include "runtime/step_plan.h"

namespace memra {

namespace {
constexpr const char* kPhaseNames[8] = {"embed + first norm", "attention: projections + norm/rope",
                                        "attention: KV append + attend + gate + out", "deltanet: projections",
                                        "deltanet: conv + delta rule + gated norm + out", "ffn (norm, gate/up, down)",
                                        "output norm + head", "unused"};
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void Model::phase_mark(int phase) {
  if (!phase_active_) return;
  backend_->synchronize();
  const double t = now_seconds();
  phase_seconds_[phase] += t - phase_last_;
  phase_last_ = t;
}

std::unique_ptr<Model> Model::load(const gguf::File& file, Backend& backend) {
  std::unique_ptr<Model> m(new Model());
  m->backend_ = &backend;
  m->phase_on_ = knobs::get_bool("MEMRA_BATCH_PHASE");
  m->cfg_ = ModelConfig::from_gguf(file);
  TensorBinder b(file, backend, *m);
  switch (m->cfg_.arch) {
    case Arch::Qwen3: bind_qwen3(b, *m); break;
    case Arch::Qwen35: bind_qwen35(b, *m); break;
    case Arch::Qwen35Moe: bind_qwen35moe(b, *m); break;
    case Arch::Qwen3Next: bind_qwen3next(b, *m); break;
  }
  b.check_all_used();
  return m;
}

Model::~Model() {
  if (phase_on_) {
    double total = 0;
    for (double v : phase_seconds_) total += v;
    std::fprintf(stderr, "[batch-phase] %.1f ms over decode steps (sync-bounded: shares rank phases)\n", total * 1e3);
    for (int i = 0; i < 7; ++i)
      std::fprintf(stderr, "  %8.2f ms %5.1f%%  %s\n", phase_seconds_[i] * 1e3,
                   total > 0 ? 100.0 * phase_seconds_[i] / total : 0.0, kPhaseNames[i]);
  }
  for (void* p : owned_) backend_->free(p);
}

uint64_t Model::decode_weight_bytes() const {
  auto mat = [](const WeightRef& w) -> uint64_t { return w.valid() ? w.mat_bytes * w.n_mat : 0; };
  auto one = [](const WeightRef& w) -> uint64_t { return w.valid() ? w.mat_bytes : 0; };
  auto vec = [](const VecRef& v) -> uint64_t { return v.valid() ? static_cast<uint64_t>(v.n) * 4 : 0; };
  uint64_t total = token_embd_.row_bytes + mat(output_) + vec(output_norm_);
  for (const LayerWeights& L : layers_) {
    total += vec(L.attn_norm) + vec(L.post_norm);
    if (L.mixer == MixerKind::FullAttention) {
      total += mat(L.attn.wq) + mat(L.attn.wk) + mat(L.attn.wv) + mat(L.attn.wo) + vec(L.attn.q_norm) +
               vec(L.attn.k_norm);
    } else {
      const DeltaNetWeights& g = L.gdn;
      total += mat(g.qkv) + mat(g.z) + mat(g.beta) + mat(g.alpha) + mat(g.ba) + mat(g.out) + vec(g.conv) +
               vec(g.ssm_a) + vec(g.dt_bias) + vec(g.norm);
    }
    if (L.ffn.is_moe) {
      const MoeWeights& m = L.ffn.moe;
      total += mat(m.router) + static_cast<uint64_t>(m.n_used) * (one(m.gate_exps) + one(m.up_exps) + one(m.down_exps)) +
               mat(m.gate_shexp) + mat(m.up_shexp) + mat(m.down_shexp) + mat(m.shexp_gate);
    } else {
      total += mat(L.ffn.gate) + mat(L.ffn.up) + mat(L.ffn.down);
    }
  }
  return total;
}

void Model::attention_mixer(const LayerWeights& L, int layer, const float* xn, float* x, int64_t rows) {
  Backend& be = *backend_;
  const ModelConfig& c = cfg_;
  AttnShape s;
  s.n_head = c.n_head;
  s.n_head_kv = c.n_head_kv;
  s.head_dim = c.head_dim;
  s.n_rot = c.n_rot;
  s.rope_theta = c.rope_theta;
  s.q_head_stride = c.attn_gated ? 2 * c.head_dim : c.head_dim;
  const int64_t q_cols = L.attn.wq.n_out, kv_cols = L.attn.wk.n_out;
  float* q = be.scratch(rows * q_cols);
  float* k = be.scratch(rows * kv_cols);
  float* v = be.scratch(rows * kv_cols);
  const Backend::MatmulOut qkv[3] = {{&L.attn.wq, q}, {&L.attn.wk, k}, {&L.attn.wv, v}};
  be.matmul_multi(xn, rows, qkv, 3);
  be.qk_norm_rope(q, k, L.attn.q_norm, L.attn.k_norm, s, c.rms_eps);
  phase_mark(1);
  const int64_t attn_cols = static_cast<int64_t>(c.n_head) * c.head_dim;
  float* attn = be.scratch(rows * attn_cols);
  be.attention(layer, q, k, v, attn, s);
  // The gate of head h sits right after its query in the projection: [q_h | gate_h].
  if (c.attn_gated) be.sigmoid_gate_mul(attn, q + c.head_dim, rows, c.n_head, c.head_dim, q_cols, 2 * c.head_dim);
  be.matmul(L.attn.wo, attn, x, rows, 0, /*accumulate=*/true);
  phase_mark(2);
}

void Model::deltanet_mixer(const LayerWeights& L, int layer, const float* xn, float* x, int64_t rows) {
  Backend& be = *backend_;
  const ModelConfig& c = cfg_;
  const DeltaNetWeights& g = L.gdn;
  GdnShape s;
  s.n_k = c.ssm_n_k;
  s.n_v = c.ssm_n_v;
  s.d = c.ssm_d;
  s.conv_kernel = c.ssm_conv_kernel;
  const bool fused_ba = g.ba.valid();
  s.head_map = c.arch == Arch::Qwen3Next ? GdnHeadMap::Grouped : GdnHeadMap::Tiled;
  s.gate_layout = fused_ba ? GdnGateLayout::GroupedBA : GdnGateLayout::Separate;
  const int64_t channels = s.conv_channels();
  const int64_t v_dim = static_cast<int64_t>(s.n_v) * s.d;

  float* mixed = be.scratch(rows * channels);
  float* z = be.scratch(rows * v_dim);
  const float* beta_raw;
  const float* alpha_raw;
  if (fused_ba) {
    float* ba = be.scratch(rows * 2 * s.n_v);
    const Backend::MatmulOut outs[3] = {{&g.qkv, mixed}, {&g.z, z}, {&g.ba, ba}};
    be.matmul_multi(xn, rows, outs, 3);
    beta_raw = alpha_raw = ba;
  } else {
    float* b = be.scratch(rows * s.n_v);
    float* a = be.scratch(rows * s.n_v);
    const Backend::MatmulOut outs[4] = {{&g.qkv, mixed}, {&g.z, z}, {&g.beta, b}, {&g.alpha, a}};
    be.matmul_multi(xn, rows, outs, 4);
    beta_raw = b;
    alpha_raw = a;
  }
  phase_mark(3);
  float* y = be.scratch(rows * v_dim);
  be.deltanet(layer, mixed, z, beta_raw, alpha_raw, g.conv, g.ssm_a, g.dt_bias, g.norm, y, s, c.rms_eps);
  be.matmul(g.out, y, x, rows, 0, /*accumulate=*/true);
  phase_mark(4);
}

void Model::ffn(const LayerWeights& L, const float* xn, float* x, int64_t rows) {
  Backend& be = *backend_;
  if (L.ffn.is_moe) {
    be.moe_ffn(L.ffn.moe, xn, x, rows, cfg_.n_embd);
    return;
  }
  float* act = be.scratch(rows * L.ffn.gate.n_out);
  be.swiglu(L.ffn.gate, L.ffn.up, xn, act, rows);
  be.matmul(L.ffn.down, act, x, rows, 0, /*accumulate=*/true);
}

const float* Model::forward(const StepPlan& plan, const std::vector<int32_t>& logit_rows) {
  Backend& be = *backend_;
  const ModelConfig& c = cfg_;
  const int64_t rows = plan.n_rows();
  MEMRA_ASSERT(rows > 0, "empty step");
  for (int32_t r : logit_rows) MEMRA_ASSERT(r >= 0 && r < rows, "logit row {} out of range", r);
  for (int32_t t : plan.tokens)
    if (t < 0 || t >= c.n_vocab) fail("token id {} is out of range for a vocabulary of {}", t, c.n_vocab);

  be.reset_scratch();
  be.set_step(plan);
  // Decode steps (one row per sequence, logits for every row) launch the same work for the same
  // batch size and attention key range: they can be recorded once and replayed.
  bool graphable = static_cast<int64_t>(logit_rows.size()) == rows && static_cast<int64_t>(plan.seqs.size()) == rows;
  for (int64_t i = 0; graphable && i < rows; ++i) graphable = logit_rows[i] == i;
  const bool decode_step = graphable;
  if (phase_on_) graphable = false;  // phase timing synchronizes: nothing can be recorded
  int32_t max_kv = 0;
  for (const StepSeq& s : plan.seqs) max_kv = std::max(max_kv, s.pos0 + s.n_rows);
  const uint64_t graph_key = (static_cast<uint64_t>(rows) << 32) | static_cast<uint64_t>((max_kv + 255) / 256);
  bool recording = false;
  if (graphable) {
    auto it = graph_logits_.find(graph_key);
    if (it != graph_logits_.end()) {  // seen before: replay it, or record it now
      if (be.graph_begin(graph_key)) return it->second;
      recording = true;
    }
  }
  phase_active_ = phase_on_ && decode_step;
  if (phase_active_) {
    backend_->synchronize();
    phase_last_ = now_seconds();
  }
  float* x = be.scratch(rows * c.n_embd);
  float* xn = be.scratch(rows * c.n_embd);
  be.embed(token_embd_, x);
  be.rms_norm(x, layers_[0].attn_norm, xn, rows, c.n_embd, c.rms_eps);
  phase_mark(0);
  // Scratch of a layer is released at its end: only x and xn live across layers.
  const size_t layer_mark = be.scratch_mark();
  for (int l = 0; l < c.n_layer; ++l) {
    be.scratch_release(layer_mark);
    const LayerWeights& L = layers_[l];
    if (L.mixer == MixerKind::FullAttention) attention_mixer(L, l, xn, x, rows);
    else deltanet_mixer(L, l, xn, x, rows);
    be.rms_norm(x, L.post_norm, xn, rows, c.n_embd, c.rms_eps);
    ffn(L, xn, x, rows);
    const VecRef& next_norm = l + 1 < c.n_layer ? layers_[l + 1].attn_norm : output_norm_;
    be.rms_norm(x, next_norm, xn, rows, c.n_embd, c.rms_eps);
    phase_mark(5);
  }
  be.scratch_release(layer_mark);
  const int64_t n_out = static_cast<int64_t>(logit_rows.size());
  float* logits = be.scratch(std::max<int64_t>(n_out, 1) * c.n_vocab);
  if (n_out == 0) return logits;
  const float* head_in = xn;
  if (!(n_out == rows && [&] { for (int64_t i = 0; i < n_out; ++i) if (logit_rows[i] != i) return false; return true; }())) {
    float* g = be.scratch(n_out * c.n_embd);
    be.gather_rows(xn, logit_rows.data(), n_out, c.n_embd, g);
    head_in = g;
  }
  be.matmul(output_, head_in, logits, n_out);
  phase_mark(6);
  phase_active_ = false;
  if (graphable) {
    // The first step of a shape runs eagerly (lazy allocations happen there); the next is recorded.
    if (recording) {
      MEMRA_ASSERT(graph_logits_[graph_key] == logits, "scratch layout changed between steps of one shape");
      be.graph_end();
    }
    graph_logits_[graph_key] = logits;
  }
  return logits;
}

}  // namespace memra
