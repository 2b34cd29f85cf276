#include "runtime/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "common/knobs.h"
#include "gguf/gguf.h"
#include "runtime/step_plan.h"
#include "tokenizer/tokenizer.h"

#ifdef MEMRA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace memra {

std::unique_ptr<Backend> make_backend(const std::string& device_in) {
  std::string device = device_in.empty() ? knobs::get_string("MEMRA_DEVICE") : device_in;
  if (device == "cpu") return make_cpu_backend();
  if (device == "cuda" || device == "auto") {
#ifdef MEMRA_HAVE_CUDA
    if (cuda_device_available() && (device == "cuda" || !cuda_backend_emulated())) return make_cuda_backend();
    if (device == "cuda") fail("--device cuda: no usable CUDA GPU found ({})", cuda_unavailable_reason());
#else
    if (device == "cuda") fail("--device cuda: this memra was built without the CUDA backend (rebuild with nvcc present)");
#endif
    return make_cpu_backend();
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
  const ModelConfig probe = ModelConfig::from_gguf(*file_);
  backend_ = make_backend(opts.device);
  if (probe.is_moe() && !backend_->supports_moe()) {
    const std::string device = opts.device.empty() ? knobs::get_string("MEMRA_DEVICE") : opts.device;
    if (device == "cuda")
      fail("{}: mixture-of-experts models are not supported on the CUDA backend yet; use --device cpu",
           file_->path());
    if (opts.verbose) std::fprintf(stderr, "memra: MoE model: using the CPU backend (CUDA MoE not implemented yet)\n");
    backend_ = make_cpu_backend();
  }
  model_ = Model::load(*file_, *backend_);
  const ModelConfig& c = model_->config();
  ctx_ = opts.ctx > 0 ? opts.ctx : std::min(c.n_ctx_train, 32768);
  prefill_chunk_ = opts.prefill_chunk > 0 ? opts.prefill_chunk
                                          : static_cast<int32_t>(knobs::get_int("MEMRA_PREFILL_CHUNK"));
  if (opts.verbose) {
    std::fprintf(stderr, "memra: %s\nmemra: backend %s, context %d, prefill chunk %d, weights %.1f MB\n",
                 c.summary().c_str(), backend_->name().c_str(), ctx_, prefill_chunk_,
                 model_->total_weight_bytes() / 1e6);
    std::fprintf(stderr, "memra: knobs\n%s", knobs::describe_all().c_str());
  }
}

const Tokenizer& Engine::tokenizer() {
  if (!tokenizer_) tokenizer_ = Tokenizer::from_gguf(*file_);
  return *tokenizer_;
}

std::unique_ptr<SequenceCache> Engine::new_sequence() {
  return std::make_unique<SequenceCache>(*backend_, model_->config(), ctx_);
}

int32_t Engine::prefill_chunk(SequenceCache& seq, std::span<const int32_t> tokens, std::vector<float>* logits) {
  if (tokens.empty()) fail("empty prompt: at least one token is needed");
  const int32_t pos = seq.pos();
  const int32_t n = std::min<int32_t>(prefill_chunk_ - pos % prefill_chunk_, static_cast<int32_t>(tokens.size()));
  seq.reserve(pos + n);
  StepPlan plan;
  plan.add(&seq, tokens.data(), n, pos);
  std::vector<int32_t> rows;
  if (logits) rows.push_back(n - 1);
  const float* out = model_->forward(plan, rows);
  if (logits) {
    logits->resize(config().n_vocab);
    backend_->to_host(logits->data(), out, static_cast<size_t>(config().n_vocab) * sizeof(float));
  } else {
    backend_->synchronize();
  }
  seq.advance(n);
  return n;
}

void Engine::prefill(SequenceCache& seq, std::span<const int32_t> tokens, std::vector<float>* last_logits,
                     std::vector<float>* all_logits) {
  const int32_t n_vocab = config().n_vocab;
  if (tokens.empty()) fail("empty prompt: at least one token is needed");
  const int32_t total = seq.pos() + static_cast<int32_t>(tokens.size());
  seq.reserve(total);
  if (all_logits) all_logits->assign(tokens.size() * static_cast<size_t>(n_vocab), 0.0f);
  size_t done = 0;
  while (done < tokens.size()) {
    const int32_t pos = seq.pos();
    const int32_t n = std::min<int32_t>(prefill_chunk_ - pos % prefill_chunk_, static_cast<int32_t>(tokens.size() - done));
    StepPlan plan;
    plan.add(&seq, tokens.data() + done, n, pos);
    const bool last_chunk = done + n == tokens.size();
    std::vector<int32_t> rows;
    if (all_logits) {
      for (int32_t i = 0; i < n; ++i) rows.push_back(i);
    } else if (last_chunk && last_logits) {
      rows.push_back(n - 1);
    }
    const float* logits = model_->forward(plan, rows);
    if (all_logits) {
      backend_->to_host(all_logits->data() + done * n_vocab, logits, static_cast<size_t>(n) * n_vocab * sizeof(float));
    }
    if (last_chunk && last_logits) {
      last_logits->resize(n_vocab);
      const float* row = all_logits ? logits + static_cast<size_t>(n - 1) * n_vocab : logits;
      backend_->to_host(last_logits->data(), row, n_vocab * sizeof(float));
    }
    seq.advance(n);
    done += n;
  }
  backend_->synchronize();
}

const float* Engine::decode_forward(std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens) {
  MEMRA_ASSERT(seqs.size() == tokens.size() && !seqs.empty(), "decode: {} sequences, {} tokens", seqs.size(),
               tokens.size());
  StepPlan& plan = decode_plan_;
  plan = StepPlan{};
  decode_rows_.clear();
  for (size_t b = 0; b < seqs.size(); ++b) {
    for (size_t o = 0; o < b; ++o) MEMRA_ASSERT(seqs[o] != seqs[b], "sequence appears twice in one step");
    seqs[b]->reserve(seqs[b]->pos() + 1);
    plan.add(seqs[b], &tokens[b], 1, seqs[b]->pos());
    decode_rows_.push_back(static_cast<int32_t>(b));
  }
  const float* out = model_->forward(plan, decode_rows_);
  for (SequenceCache* s : seqs) s->advance(1);
  return out;
}

void Engine::decode(std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens, std::vector<float>& logits) {
  const float* out = decode_forward(seqs, tokens);
  logits.resize(seqs.size() * static_cast<size_t>(config().n_vocab));
  backend_->to_host(logits.data(), out, logits.size() * sizeof(float));
}

void Engine::decode_greedy(std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens,
                           std::vector<int32_t>& next) {
  const float* out = decode_forward(seqs, tokens);
  next.resize(seqs.size());
  backend_->argmax(out, static_cast<int64_t>(seqs.size()), config().n_vocab, next.data());
}

void Engine::decode_sample(std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens,
                           std::span<const RowSampling> sampling, std::vector<int32_t>& next) {
  MEMRA_ASSERT(sampling.size() == seqs.size(), "one RowSampling per sequence");
  const float* out = decode_forward(seqs, tokens);
  next.resize(seqs.size());
  backend_->sample(out, static_cast<int64_t>(seqs.size()), config().n_vocab, sampling.data(), next.data());
}

}  // namespace memra
