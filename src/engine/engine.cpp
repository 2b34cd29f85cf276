#include "engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "engine/step_runner.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "step/sampling.h"
#include "step/step_plan.h"
#include "tokenizer/tokenizer.h"

#ifdef MEMRA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace memra {

std::unique_ptr<Backend> make_backend(const EngineOptions& options) {
  const std::string& device = options.device;
  if (device == "cpu") return make_cpu_backend(options.cpu);
  if (device == "cuda" || device == "auto") {
#ifdef MEMRA_HAVE_CUDA
    if (cuda_device_available() && (device == "cuda" || !cuda_backend_emulated())) return make_cuda_backend(options.cuda);
    if (device == "cuda") fail("--device cuda: no usable CUDA GPU found ({})", cuda_unavailable_reason());
#else
    if (device == "cuda") fail("--device cuda: this memra was built without the CUDA backend (rebuild with nvcc present)");
#endif
    return make_cpu_backend(options.cpu);
  }
  fail("unknown device '{}' (use auto, cpu or cuda)", device);
}

std::unique_ptr<Engine> Engine::open(const std::string& path, const EngineOptions& opts) {
  std::unique_ptr<Engine> e(new Engine());
  e->file_ = gguf::File::open(path);
  e->init(opts);
  return e;
}

std::unique_ptr<Engine> Engine::open_memory(const uint8_t* data, size_t size, const std::string& name,
                                            const EngineOptions& opts) {
  std::unique_ptr<Engine> e(new Engine());
  e->file_ = gguf::File::from_memory(data, size, name);
  e->init(opts);
  return e;
}

Engine::~Engine() = default;

void Engine::init(const EngineOptions& opts) {
  if (opts.prefill_chunk < 1) fail("the prefill chunk must be at least 1 token, got {}", opts.prefill_chunk);
  const ModelConfig probe = ModelConfig::from_gguf(*file_);
  backend_ = make_backend(opts);
  ModelDims dims;
  dims.attention_head_dim = probe.n_head > 0 ? probe.head_dim : 0;
  if (probe.has_ssm()) {
    dims.deltanet_head_dim = probe.ssm_d;
    dims.conv_kernel = probe.ssm_conv_kernel;
  }
  dims.n_expert = probe.n_expert;
  dims.n_expert_used = probe.n_expert_used;
  const std::string unsupported = backend_->unsupported(dims);
  if (!unsupported.empty()) fail("{}: {}; use --device cpu", file_->path(), unsupported);
  model_ = Model::load(*file_, *backend_);
  runner_ = std::make_unique<StepRunner>(*model_, *backend_, opts.phase_timing);
  const ModelConfig& c = model_->config();
  if (opts.ssm_type != GgmlType::F32 && opts.ssm_type != GgmlType::BF16)
    fail("the recurrent state must be f32 or bf16, got {}", quant::type_name(opts.ssm_type));
  cache_shape_ = c.cache_shape(backend_->kv_type(), opts.ssm_type);
  kv_pool_ = std::make_shared<KvBlockPool>(*backend_, cache_shape_);
  ctx_ = opts.ctx > 0 ? opts.ctx : std::min(c.n_ctx_train, 32768);
  prefill_chunk_ = opts.prefill_chunk;
  verbose_ = opts.verbose;
  if (opts.prefix_cache.budget_mb > 0)
    prefix_cache_ = std::make_unique<PrefixCache>(*backend_, cache_shape_, prefill_chunk_, opts.prefix_cache);
  if (opts.verbose) {
    std::fprintf(stderr, "memra: %s\nmemra: backend %s, context %d, prefill chunk %d, weights %.1f MB\n",
                 c.summary().c_str(), backend_->name().c_str(), ctx_, prefill_chunk_,
                 model_->total_weight_bytes() / 1e6);
    if (c.has_ssm())
      std::fprintf(stderr, "memra: recurrent state %s, %.2f MiB a sequence\n", quant::type_name(cache_shape_.ssm_type),
                   static_cast<double>(cache_shape_.recurrent_bytes()) / 1048576.0);
    if (prefix_cache_)
      std::fprintf(stderr, "memra: prefix cache %lld MiB, a snapshot every %d tokens (%.2f MiB each)\n",
                   static_cast<long long>(opts.prefix_cache.budget_mb), prefix_cache_->spacing(),
                   prefix_cache_->snapshot_bytes() / 1048576.0);
  }
}

const Tokenizer& Engine::tokenizer() {
  if (!tokenizer_) tokenizer_ = Tokenizer::from_gguf(*file_);
  return *tokenizer_;
}

std::unique_ptr<SequenceCache> Engine::new_sequence() {
  return std::make_unique<SequenceCache>(kv_pool_, cache_shape_, ctx_);
}

int32_t Engine::next_chunk_len(const SequenceCache& seq, size_t remaining) const {
  return grid_chunk_len(seq.pos(), static_cast<int64_t>(remaining), prefill_chunk_);
}

const float* Engine::feed_chunk(SequenceCache& seq, const int32_t* tokens, int32_t n, ChunkLogits logits) {
  StepPlan plan;
  plan.add(&seq, tokens, n, seq.pos());
  std::vector<int32_t> rows;
  if (logits == ChunkLogits::All) {
    for (int32_t i = 0; i < n; ++i) rows.push_back(i);
  } else if (logits == ChunkLogits::Last) {
    rows.push_back(n - 1);
  }
  const float* out = runner_->run(plan, rows);
  seq.advance(n);
  return out;
}

int32_t Engine::prefill_chunk(SequenceCache& seq, std::span<const int32_t> tokens, std::vector<float>* logits) {
  if (tokens.empty()) fail("empty prompt: at least one token is needed");
  const int32_t n = next_chunk_len(seq, tokens.size());
  seq.reserve(seq.pos() + n);
  const float* out = feed_chunk(seq, tokens.data(), n, logits ? ChunkLogits::Last : ChunkLogits::None);
  if (logits) {
    logits->resize(config().n_vocab);
    backend_->to_host(logits->data(), out, static_cast<size_t>(config().n_vocab) * sizeof(float));
  } else {
    backend_->synchronize();
  }
  return n;
}

void Engine::prefill(SequenceCache& seq, std::span<const int32_t> tokens, std::vector<float>* last_logits,
                     std::vector<float>* all_logits) {
  const int32_t n_vocab = config().n_vocab;
  if (tokens.empty()) fail("empty prompt: at least one token is needed");
  seq.reserve(seq.pos() + static_cast<int32_t>(tokens.size()));
  if (all_logits) all_logits->assign(tokens.size() * static_cast<size_t>(n_vocab), 0.0f);
  size_t done = 0;
  while (done < tokens.size()) {
    const int32_t n = next_chunk_len(seq, tokens.size() - done);
    const bool last_chunk = done + n == tokens.size();
    const ChunkLogits want = all_logits                    ? ChunkLogits::All
                             : last_chunk && last_logits ? ChunkLogits::Last
                                                         : ChunkLogits::None;
    const float* logits = feed_chunk(seq, tokens.data() + done, n, want);
    if (all_logits) {
      backend_->to_host(all_logits->data() + done * n_vocab, logits, static_cast<size_t>(n) * n_vocab * sizeof(float));
    }
    if (last_chunk && last_logits) {
      last_logits->resize(n_vocab);
      const float* row = all_logits ? logits + static_cast<size_t>(n - 1) * n_vocab : logits;
      backend_->to_host(last_logits->data(), row, n_vocab * sizeof(float));
    }
    done += n;
  }
  backend_->synchronize();
}

void Engine::decode(std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens, const StepSampling& sampling,
                    StepOutput& out) {
  MEMRA_ASSERT(seqs.size() == tokens.size() && !seqs.empty(), "decode: {} sequences, {} tokens", seqs.size(),
               tokens.size());
  MEMRA_ASSERT(sampling.rows.empty() || sampling.rows.size() == seqs.size(), "decode: {} sampling rows for {} sequences",
               sampling.rows.size(), seqs.size());
  StepPlan& plan = decode_plan_;
  plan = StepPlan{};
  decode_rows_.clear();
  for (size_t b = 0; b < seqs.size(); ++b) {
    for (size_t o = 0; o < b; ++o) MEMRA_ASSERT(seqs[o] != seqs[b], "sequence appears twice in one step");
    seqs[b]->reserve(seqs[b]->pos() + 1);
    plan.add(seqs[b], &tokens[b], 1, seqs[b]->pos());
    decode_rows_.push_back(static_cast<int32_t>(b));
  }
  const float* logits = runner_->run(plan, decode_rows_);
  for (SequenceCache* s : seqs) s->advance(1);

  const int64_t rows = static_cast<int64_t>(seqs.size());
  const int32_t n_vocab = config().n_vocab;
  out.tokens.clear();
  if (sampling.rows.empty() || sampling.logits) {
    out.logits.resize(static_cast<size_t>(rows) * n_vocab);
    backend_->to_host(out.logits.data(), logits, out.logits.size() * sizeof(float));
    for (const RowSampling& s : sampling.rows) {
      const std::span<const float> row(out.logits.data() + out.tokens.size() * n_vocab, static_cast<size_t>(n_vocab));
      out.tokens.push_back(sample_token(row, *s.params, s.token_index,
                                        std::span<const int32_t>(s.history, static_cast<size_t>(s.history_len)),
                                        std::span<const uint32_t>(s.allowed, static_cast<size_t>(s.allowed_words))));
    }
    return;
  }
  out.logits.clear();
  out.tokens.resize(static_cast<size_t>(rows));
  const bool all_plain_greedy =
      std::all_of(sampling.rows.begin(), sampling.rows.end(), [](const RowSampling& s) { return s.plain_greedy(); });
  if (all_plain_greedy) backend_->argmax(logits, rows, n_vocab, out.tokens.data());
  else backend_->sample(logits, rows, n_vocab, sampling.rows.data(), out.tokens.data());
}

}  // namespace memra
