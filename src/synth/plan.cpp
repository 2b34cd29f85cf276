// The tensor table of a synthetic model: names, ggml shapes, types, order and init, exactly as
// llama.cpp's converter + llama-quantize lay out a real file of that shape
// (../shared/layouts/qwen35-9b-q4_0.llama-quantize.txt for qwen35; the tiny fixture GGUFs for
// the MoE archs and qwen3).
//
// Types, following llama-quantize:
// - 2-D weights, 3-D expert stacks and token_embd: the requested type;
// - the output head (`output`, or `token_embd` when embeddings are tied and it doubles as the
//   head): Q6_K for q3_k/q4_0/q5_0/q4_k/q5_k/q6_k files, Q8_0 for q8_0, the requested type for floats;
// - 1-D tensors (norms, ssm_a, ssm_dt.bias), ssm_conv1d, the router ffn_gate_inp and the
//   shared-expert gate ffn_gate_inp_shexp ([in, 1], one-dimensional to ggml): F32;
// - K-quant fallback where ne[0] % 256 != 0 (only the tiny shapes): see fit_type.
// The K-quant files use one type for every weight (llama-quantize's Q4_K_M / Q5_K_M mixes bump
// attn_v / ffn_down of some layers to Q6_K); general.file_type still names the _M variant.
//
// Order (llama-quantize's): tensors outside blocks first, then block 0, 1, ...; within each
// group sorted by name.
#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "quant/quant.h"
#include "synth/plan.h"
#include "synth/synth.h"

namespace memra::synth {
namespace {

using enum GgmlType;

constexpr TypeChoice kTypes[] = {
    {"q4_0", Q4_0, Q6_K, 2},  {"q8_0", Q8_0, Q8_0, 7},  {"q4_k", Q4_K, Q6_K, 15}, {"q5_k", Q5_K, Q6_K, 17},
    {"q6_k", Q6_K, Q6_K, 18}, {"bf16", BF16, BF16, 32}, {"f16", F16, F16, 1},     {"f32", F32, F32, 0},
    {"q3_k", Q3_K, Q6_K, 12}, {"q5_0", Q5_0, Q6_K, 8},  {"iq4_nl", IQ4_NL, Q6_K, 25}, {"iq4_xs", IQ4_XS, Q6_K, 30},
};

constexpr float kNormJitter = 0.1f;
constexpr float kSsmNormJitter = 0.05f;
constexpr float kDtBiasWidth = 0.5f;
constexpr float kConvStd = 0.5f;
constexpr float kHeadLogitStd = 3.0f;      // untied output head, in units of 1/sqrt(hidden)
constexpr float kTiedHeadLogitStd = 1.5f;  // tied token_embd / head, same units
constexpr float kEmbeddingStd = 1.0f;      // untied token_embd, same units

// Collects one group (globals or one block) and its tensors' roles.
struct Builder {
  const ModelShape& s;
  // 1 / sqrt(2 * blocks written): the residual stream ends at about the same RMS (~0.5) at any
  // depth, --layers cuts included, so a tied head's bonus for the input token stays small.
  float residual_scale;
  std::vector<PlannedTensor> group;

  void add(std::string name, std::vector<int64_t> ne, Init init, float scale) {
    PlannedTensor t;
    t.name = std::move(name);
    t.ne = std::move(ne);
    t.init = init;
    t.scale = scale;
    t.type = F32;
    group.push_back(std::move(t));
  }
  void norm(std::string name, int64_t n) { add(std::move(name), {n}, Init::Norm, kNormJitter); }
  void matrix(std::string name, int64_t in, int64_t out) {
    add(std::move(name), {in, out}, Init::Matrix, 1.0f / std::sqrt(static_cast<float>(in)));
  }
  void residual_out(std::string name, std::vector<int64_t> ne) {
    const float scale = residual_scale / std::sqrt(static_cast<float>(ne[0]));
    add(std::move(name), std::move(ne), Init::ResidualOut, scale);
  }
  void experts(std::string name, int64_t in, int64_t out) {
    add(std::move(name), {in, out, s.n_expert}, Init::Matrix, 1.0f / std::sqrt(static_cast<float>(in)));
  }
};

void add_block(Builder& b, int64_t l) {
  const ModelShape& s = b.s;
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t h = s.hidden;
  b.norm(p + "attn_norm.weight", h);
  b.norm(p + s.traits().post_norm + ".weight", h);

  if (s.hybrid() && !s.full_attention(l)) {
    // Gated DeltaNet: qkv channels are all q, then all k, then all v.
    const int64_t d = s.lin_head_dim;
    const int64_t qkv = 2 * s.lin_k_heads * d + s.lin_v_heads * d;
    const int64_t v_dim = s.lin_v_heads * d;
    b.matrix(p + "attn_qkv.weight", h, qkv);
    b.matrix(p + "attn_gate.weight", h, v_dim);
    if (s.traits().gdn_gate_layout == GdnGateLayout::GroupedBA) {
      b.matrix(p + "ssm_ba.weight", h, 2 * s.lin_v_heads);
    } else {
      b.matrix(p + "ssm_alpha.weight", h, s.lin_v_heads);
      b.matrix(p + "ssm_beta.weight", h, s.lin_v_heads);
    }
    b.add(p + "ssm_conv1d.weight", {s.conv_kernel, qkv}, Init::SsmConv, kConvStd);
    b.add(p + "ssm_a", {s.lin_v_heads}, Init::SsmA, 1.0f);
    b.add(p + "ssm_dt.bias", {s.lin_v_heads}, Init::SsmDtBias, kDtBiasWidth);
    b.add(p + "ssm_norm.weight", {d}, Init::SsmNorm, kSsmNormJitter);
    b.residual_out(p + "ssm_out.weight", {v_dim, h});
  } else {
    // Full attention; a gated attn_q carries a sigmoid gate per head: [q_h | gate_h].
    const int64_t q_out = s.n_head * s.head_dim * (s.traits().attn_gated ? 2 : 1);
    b.matrix(p + "attn_q.weight", h, q_out);
    b.matrix(p + "attn_k.weight", h, s.n_head_kv * s.head_dim);
    b.matrix(p + "attn_v.weight", h, s.n_head_kv * s.head_dim);
    b.norm(p + "attn_q_norm.weight", s.head_dim);
    b.norm(p + "attn_k_norm.weight", s.head_dim);
    b.residual_out(p + "attn_output.weight", {s.n_head * s.head_dim, h});
  }

  if (s.moe()) {
    const float router_scale = 1.0f / std::sqrt(static_cast<float>(h));
    b.add(p + "ffn_gate_inp.weight", {h, s.n_expert}, Init::Router, router_scale);
    b.experts(p + "ffn_gate_exps.weight", h, s.expert_ffn);
    b.experts(p + "ffn_up_exps.weight", h, s.expert_ffn);
    b.residual_out(p + "ffn_down_exps.weight", {s.expert_ffn, h, s.n_expert});
    b.add(p + "ffn_gate_inp_shexp.weight", {h, 1}, Init::Router, router_scale);
    b.matrix(p + "ffn_gate_shexp.weight", h, s.shared_ffn);
    b.matrix(p + "ffn_up_shexp.weight", h, s.shared_ffn);
    b.residual_out(p + "ffn_down_shexp.weight", {s.shared_ffn, h});
  } else {
    b.matrix(p + "ffn_gate.weight", h, s.ffn);
    b.matrix(p + "ffn_up.weight", h, s.ffn);
    b.residual_out(p + "ffn_down.weight", {s.ffn, h});
  }
}

bool stays_f32(const PlannedTensor& t) {
  if (t.ne.size() == 1) return true;
  const std::string& n = t.name;
  auto ends_with = [&](const char* suffix) {
    const std::string sfx(suffix);
    return n.size() >= sfx.size() && n.compare(n.size() - sfx.size(), sfx.size(), sfx) == 0;
  };
  return ends_with("ssm_conv1d.weight") || ends_with("ffn_gate_inp.weight") || ends_with("ffn_gate_inp_shexp.weight");
}

}  // namespace

GgmlType fit_type(GgmlType want, int64_t ne0) {
  GgmlType t = want;
  if (quant::type_info(t).block_elems == 256 && ne0 % 256 != 0) {
    switch (t) {
      case Q4_K: t = Q5_0; break;
      case Q5_K: t = Q5_1; break;
      case Q3_K: case IQ4_XS: t = IQ4_NL; break;
      default: t = Q8_0; break;  // Q6_K
    }
  }
  if (ne0 % quant::type_info(t).block_elems != 0) t = F16;
  return t;
}

Resolved resolve(const SynthOptions& options) {
  Resolved r{};
  r.shape = find_shape(options.arch, options.shape);
  const TypeChoice* type = nullptr;
  std::string valid;
  for (const TypeChoice& c : kTypes) {
    if (options.type == c.name) type = &c;
    valid += (valid.empty() ? "" : ", ") + std::string(c.name);
  }
  if (!type) fail("unknown type '{}': valid types are {}", options.type, valid);
  r.type = *type;
  if (options.n_layers < 0 || options.n_layers > r.shape.n_layers)
    fail("--layers {} is out of range for {} {}: use 1..{} (0 = all)", options.n_layers, options.arch,
         options.shape, r.shape.n_layers);
  r.n_layers = options.n_layers == 0 ? r.shape.n_layers : options.n_layers;
  return r;
}

std::vector<PlannedTensor> plan_tensors(const SynthOptions& options) {
  const Resolved r = resolve(options);
  const ModelShape& s = r.shape;
  Builder b{s, 1.0f / std::sqrt(2.0f * static_cast<float>(r.n_layers)), {}};

  // Globals. The head's scale sets the logit spread: the final RMS-normalised state has unit
  // RMS, so logits have std kHeadLogitStd. A tied head is also the input embedding, and its
  // logit for the current token gets a bonus of about H * std^2 / rms(residual); a smaller
  // std there keeps that bonus near the spread of the others (with N(0, 1) embeddings the
  // argmax would simply repeat the input token).
  const float inv_sqrt_h = 1.0f / std::sqrt(static_cast<float>(s.hidden));
  b.add("token_embd.weight", {s.hidden, s.vocab}, Init::Embedding,
        (s.tied_embeddings ? kTiedHeadLogitStd : kEmbeddingStd) * inv_sqrt_h);
  b.norm("output_norm.weight", s.hidden);
  if (!s.tied_embeddings) b.add("output.weight", {s.hidden, s.vocab}, Init::Matrix, kHeadLogitStd * inv_sqrt_h);
  const std::string head_name = s.tied_embeddings ? "token_embd.weight" : "output.weight";
  auto flush = [&](std::vector<PlannedTensor>& out) {
    std::sort(b.group.begin(), b.group.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
    for (auto& t : b.group) out.push_back(std::move(t));
    b.group.clear();
  };
  std::vector<PlannedTensor> out;
  flush(out);
  for (int64_t l = 0; l < r.n_layers; ++l) {
    add_block(b, l);
    flush(out);
  }

  for (PlannedTensor& t : out) {
    if (stays_f32(t)) {
      t.type = F32;
    } else {
      t.type = fit_type(t.name == head_name ? r.type.head : r.type.type, t.ne[0]);
    }
    int64_t rows = 1;
    for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
    t.n_bytes = static_cast<uint64_t>(quant::row_bytes(t.type, t.ne[0])) * static_cast<uint64_t>(rows);
  }
  return out;
}

const std::vector<ShapeEntry>& known_shapes() {
  static const std::vector<ShapeEntry> entries = [] {
    std::vector<ShapeEntry> e;
    for (const ModelShape& s : all_shapes()) {
      std::string ffn = s.moe() ? fmt::format("{} experts top-{}, expert FFN {}, shared {}", s.n_expert,
                                              s.n_expert_used, s.expert_ffn, s.shared_ffn)
                                : fmt::format("FFN {}", s.ffn);
      std::string mixer = s.hybrid() ? fmt::format(", linear k/v heads {}/{}", s.lin_k_heads, s.lin_v_heads) : "";
      e.push_back({s.arch_name(), s.name,
                   fmt::format("hidden {}, {} layers, heads {}/{} x {}{}, {}, vocab {}{}", s.hidden, s.n_layers,
                               s.n_head, s.n_head_kv, s.head_dim, mixer, ffn, s.vocab,
                               s.tied_embeddings ? ", tied embeddings" : "")});
    }
    return e;
  }();
  return entries;
}

}  // namespace memra::synth
