// Reads ModelConfig from GGUF metadata. Keys are `<arch>.<name>` as llama.cpp's converter writes
// them; every value is range-checked so a corrupt file fails here with the key's name instead of
// deep inside a kernel.
#include "model/config.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/arch.h"

namespace memra {

namespace {

// Bounds generous enough for any real model, small enough that derived sizes cannot overflow.
constexpr uint64_t kMaxDim = 1u << 20;
constexpr uint64_t kMaxLayers = 4096;

int read_dim(const gguf::File& f, const std::string& key, uint64_t max = kMaxDim) {
  uint64_t v = f.get_u64(key);
  if (v == 0 || v > max) fail("{}: metadata {} = {} is out of range (1..{})", f.path(), key, v, max);
  return static_cast<int>(v);
}

int read_dim_or(const gguf::File& f, const std::string& key, int dflt, uint64_t max = kMaxDim) {
  if (!f.has(key)) return dflt;
  return read_dim(f, key, max);
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::File& f) {
  ModelConfig c;
  c.arch_str = std::string(f.get_string("general.architecture"));
  c.arch = find_arch(c.arch_str);
  if (!c.arch) fail("{}: architecture '{}' is not supported (supported: {})", f.path(), c.arch_str, arch_names());
  const ArchTraits& traits = c.arch->traits;
  const std::string a = c.arch_str + ".";

  c.n_layer = read_dim(f, a + "block_count", kMaxLayers);
  c.n_embd = read_dim(f, a + "embedding_length");
  c.n_ctx_train = read_dim_or(f, a + "context_length", 4096, 1u << 24);
  c.n_head = read_dim(f, a + "attention.head_count", 4096);
  c.n_head_kv = read_dim_or(f, a + "attention.head_count_kv", c.n_head, 4096);
  c.head_dim = read_dim_or(f, a + "attention.key_length", c.n_embd / c.n_head, 4096);
  int value_len = read_dim_or(f, a + "attention.value_length", c.head_dim, 4096);
  if (value_len != c.head_dim)
    fail("{}: attention.value_length {} != key_length {} is not supported", f.path(), value_len, c.head_dim);
  if (c.n_head % c.n_head_kv != 0)
    fail("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), c.n_head, c.n_head_kv);
  c.n_rot = read_dim_or(f, a + "rope.dimension_count", c.head_dim, 4096);
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    fail("{}: rope.dimension_count {} must be even and at most the head size {}", f.path(), c.n_rot, c.head_dim);
  c.rope_theta = static_cast<float>(f.get_f64_opt(a + "rope.freq_base").value_or(10000.0));
  c.rms_eps = static_cast<float>(f.get_f64_opt(a + "attention.layer_norm_rms_epsilon").value_or(1e-6));
  if (!(c.rope_theta > 0) || !(c.rms_eps > 0) || c.rms_eps > 1)
    fail("{}: rope.freq_base / layer_norm_rms_epsilon out of range", f.path());

  if (f.has(a + "feed_forward_length")) c.n_ff = read_dim(f, a + "feed_forward_length");
  if (f.has(a + "expert_count")) {
    c.n_expert = read_dim(f, a + "expert_count", 65536);
    c.n_expert_used = read_dim(f, a + "expert_used_count", 65536);
    if (c.n_expert_used > c.n_expert)
      fail("{}: expert_used_count {} > expert_count {}", f.path(), c.n_expert_used, c.n_expert);
    c.n_ff_expert = read_dim(f, a + "expert_feed_forward_length");
    c.n_ff_shexp = read_dim_or(f, a + "expert_shared_feed_forward_length", 0);
    // Released Qwen3-Next and Qwen3.5-MoE renormalise the top-k weights (MATH.md).
    c.moe_norm_topk = f.get_bool_opt(a + "expert_weights_norm").value_or(true);
  }

  c.layer_mixer.assign(c.n_layer, MixerKind::FullAttention);
  c.attn_gated = traits.attn_gated;
  if (traits.hybrid) {
    c.ssm_n_k = read_dim(f, a + "ssm.group_count", 4096);
    c.ssm_n_v = read_dim(f, a + "ssm.time_step_rank", 4096);
    c.ssm_d = read_dim(f, a + "ssm.state_size", 4096);
    c.ssm_conv_kernel = read_dim(f, a + "ssm.conv_kernel", 64);
    c.full_attention_interval = read_dim(f, a + "full_attention_interval", kMaxLayers);
    if (c.ssm_n_v % c.ssm_n_k != 0)
      fail("{}: ssm.time_step_rank {} (value heads) is not a multiple of ssm.group_count {} (key heads)", f.path(),
           c.ssm_n_v, c.ssm_n_k);
    if (f.has(a + "ssm.inner_size")) {
      uint64_t inner = f.get_u64(a + "ssm.inner_size");
      if (inner != static_cast<uint64_t>(c.ssm_n_v) * c.ssm_d)
        fail("{}: ssm.inner_size {} != time_step_rank {} x state_size {}", f.path(), inner, c.ssm_n_v, c.ssm_d);
    }
    for (int l = 0; l < c.n_layer; ++l)
      c.layer_mixer[l] =
          (l + 1) % c.full_attention_interval == 0 ? MixerKind::FullAttention : MixerKind::GatedDeltaNet;
  }
  if (traits.ffn != FfnKind::Dense && c.n_expert == 0) fail("{}: {} model without {}expert_count", f.path(), c.arch_str, a);
  if (traits.ffn == FfnKind::Dense && c.n_ff == 0) fail("{}: missing {}feed_forward_length", f.path(), a);
  return c;
}

CacheShape ModelConfig::cache_shape(GgmlType kv_type, GgmlType ssm_type) const {
  CacheShape s;
  s.layer_mixer = layer_mixer;
  s.kv_type = kv_type;
  s.ssm_type = ssm_type;
  s.kv_dim = static_cast<int64_t>(n_head_kv) * head_dim;
  s.conv_values = static_cast<int64_t>(std::max(ssm_conv_kernel - 1, 0)) * ssm_conv_channels();
  s.ssm_values = static_cast<int64_t>(ssm_n_v) * ssm_d * ssm_d;
  return s;
}

std::string ModelConfig::summary() const {
  std::string s = fmt::format("{}: {} layers, hidden {}, vocab {}, attention {}/{} heads x {} (rope {} of {}, theta {})",
                              arch_str, n_layer, n_embd, n_vocab, n_head, n_head_kv, head_dim, n_rot, head_dim,
                              rope_theta);
  if (has_ssm())
    s += fmt::format(", deltanet {}/{} heads x {} (conv {}), full attention every {}", ssm_n_k, ssm_n_v, ssm_d,
                     ssm_conv_kernel, full_attention_interval);
  if (is_moe())
    s += fmt::format(", {} experts top-{} x {} (shared {})", n_expert, n_expert_used, n_ff_expert, n_ff_shexp);
  else
    s += fmt::format(", ffn {}", n_ff);
  return s;
}

}  // namespace memra
