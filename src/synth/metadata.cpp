// Metadata of a synthetic model: the keys, value types and order of a llama.cpp-converted file
// after llama-quantize (which moves general.quantization_version and general.file_type to the
// end), as in ../shared/layouts/qwen35-9b-q4_0.llama-quantize.txt and the tiny fixtures.
// Differences from that layout, on purpose: a chat template is included (before the two
// general.* keys llama-quantize appends), and rope.freq_base / context_length are the released
// models' values (1e7 / 262,144) rather than the transformers defaults the layout's source
// config fell back to.
#include <cmath>
#include <string>

#include "common/error.h"
#include "synth/plan.h"
#include "synth/synth.h"
#include "synth/vocab.h"

namespace memra::synth {
namespace {

// llama.cpp's size label: parameter count in K/M/B/T with at least two significant digits
// ("991K", "1.1M", "9.0B"); MoE models count one expert: "<n_expert>x<shared + experts / n>".
std::string size_label(const std::vector<PlannedTensor>& tensors, int64_t n_expert) {
  double total = 0, experts = 0;
  for (const PlannedTensor& t : tensors) {
    double n = 1;
    for (int64_t d : t.ne) n *= static_cast<double>(d);
    total += n;
    if (t.name.find("_exps.") != std::string::npos) experts += n;
  }
  double count = total;
  std::string prefix;
  if (n_expert > 0) {
    count = (total - experts) + experts / static_cast<double>(n_expert);
    prefix = fmt::format("{}x", n_expert);
  }
  const char* suffix = "K";
  double scaled = count * 1e-3;
  if (count > 1e12) { scaled = count * 1e-12; suffix = "T"; }
  else if (count > 1e9) { scaled = count * 1e-9; suffix = "B"; }
  else if (count > 1e6) { scaled = count * 1e-6; suffix = "M"; }
  const long long rounded = std::llround(scaled);
  const int digits = rounded == 0 ? 0 : static_cast<int>(std::to_string(rounded).size());
  const int decimals = digits >= 2 ? 0 : 2 - digits;
  return fmt::format("{}{:.{}f}{}", prefix, scaled, decimals, suffix);
}

struct Meta {
  std::vector<MetaEntry> entries;
  void u32(std::string key, uint64_t v) {
    MetaEntry e;
    e.key = std::move(key);
    e.kind = MetaEntry::Kind::U32;
    e.u32 = static_cast<uint32_t>(v);
    entries.push_back(std::move(e));
  }
  void f32(std::string key, float v) {
    MetaEntry e;
    e.key = std::move(key);
    e.kind = MetaEntry::Kind::F32;
    e.f32 = v;
    entries.push_back(std::move(e));
  }
  void str(std::string key, std::string v) {
    MetaEntry e;
    e.key = std::move(key);
    e.kind = MetaEntry::Kind::String;
    e.str = std::move(v);
    entries.push_back(std::move(e));
  }
  void strings(std::string key, std::vector<std::string> v) {
    MetaEntry e;
    e.key = std::move(key);
    e.kind = MetaEntry::Kind::StringArray;
    e.strings = std::move(v);
    entries.push_back(std::move(e));
  }
  void i32s(std::string key, std::vector<int32_t> v) {
    MetaEntry e;
    e.key = std::move(key);
    e.kind = MetaEntry::Kind::I32Array;
    e.i32s = std::move(v);
    entries.push_back(std::move(e));
  }
};

}  // namespace

std::vector<MetaEntry> plan_metadata(const SynthOptions& options) {
  const Resolved r = resolve(options);
  const ModelShape& s = r.shape;
  const std::string a = s.arch_name();
  Meta m;
  m.str("general.architecture", a);
  m.str("general.type", "model");
  m.str("general.name", fmt::format("Synthetic {} {}", a, s.name));
  m.str("general.size_label", size_label(plan_tensors(options), s.n_expert));
  m.u32(a + ".block_count", static_cast<uint64_t>(r.n_layers));
  m.u32(a + ".context_length", s.context_length);
  m.u32(a + ".embedding_length", static_cast<uint64_t>(s.hidden));
  if (s.traits().ffn != FfnKind::Moe) m.u32(a + ".feed_forward_length", static_cast<uint64_t>(s.ffn));
  m.u32(a + ".attention.head_count", static_cast<uint64_t>(s.n_head));
  m.u32(a + ".attention.head_count_kv", static_cast<uint64_t>(s.n_head_kv));
  m.f32(a + ".rope.freq_base", s.rope_theta);
  m.f32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  if (s.moe()) {
    m.u32(a + ".expert_count", static_cast<uint64_t>(s.n_expert));
    m.u32(a + ".expert_used_count", static_cast<uint64_t>(s.n_expert_used));
  }
  m.u32(a + ".attention.key_length", static_cast<uint64_t>(s.head_dim));
  m.u32(a + ".attention.value_length", static_cast<uint64_t>(s.head_dim));
  if (s.moe()) {
    m.u32(a + ".expert_feed_forward_length", static_cast<uint64_t>(s.expert_ffn));
    m.u32(a + ".expert_shared_feed_forward_length", static_cast<uint64_t>(s.shared_ffn));
  }
  if (s.hybrid()) {
    m.u32(a + ".ssm.conv_kernel", static_cast<uint64_t>(s.conv_kernel));
    m.u32(a + ".ssm.state_size", static_cast<uint64_t>(s.lin_head_dim));
    m.u32(a + ".ssm.group_count", static_cast<uint64_t>(s.lin_k_heads));
    m.u32(a + ".ssm.time_step_rank", static_cast<uint64_t>(s.lin_v_heads));
    m.u32(a + ".ssm.inner_size", static_cast<uint64_t>(s.lin_v_heads * s.lin_head_dim));
    m.u32(a + ".full_attention_interval", s.full_attention_interval);
    m.u32(a + ".rope.dimension_count", static_cast<uint64_t>(s.n_rot));
    // Interleaved multi-section rope: all sections carry the text position, so it equals NeoX
    // rope over rope.dimension_count dims (11 + 11 + 10 = 32 frequency pairs).
    if (s.traits().rope_sections) m.i32s(a + ".rope.dimension_sections", {11, 11, 10, 0});
  }

  SynthVocab v = make_vocab(s.vocab);
  m.str("tokenizer.ggml.model", "gpt2");
  m.str("tokenizer.ggml.pre", s.traits().tokenizer_pre);
  m.strings("tokenizer.ggml.tokens", std::move(v.tokens));
  m.i32s("tokenizer.ggml.token_type", std::move(v.token_types));
  m.strings("tokenizer.ggml.merges", std::move(v.merges));
  m.u32("tokenizer.ggml.eos_token_id", v.eos_id);
  m.u32("tokenizer.ggml.padding_token_id", v.padding_id);
  m.str("tokenizer.chat_template", chat_template());
  m.u32("general.quantization_version", 2);
  m.u32("general.file_type", r.type.file_type);
  return std::move(m.entries);
}

}  // namespace memra::synth
