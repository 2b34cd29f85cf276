// The engine: a GGUF file opened, its model bound to a backend, its tokenizer, and the two
// ways of running it: prefill (one sequence, a prompt cut on a fixed chunk grid) and decode
// (one token for each of B sequences in one step).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "runtime/sequence_cache.h"
#include "runtime/step_plan.h"

namespace memra::gguf { class File; }

namespace memra {

class Tokenizer;

struct EngineOptions {
  std::string device = "auto";  // auto | cpu | cuda
  int32_t ctx = 0;              // context limit per sequence; 0: min(training context, 32768)
  int32_t prefill_chunk = 0;    // 0: MEMRA_PREFILL_CHUNK
  bool verbose = false;
};

// Backend factory: "cpu", "cuda" (error if not built / no GPU), "auto" (cuda when usable).
std::unique_ptr<Backend> make_backend(const std::string& device);

class Engine {
 public:
  static std::unique_ptr<Engine> open(const std::string& path, const EngineOptions& opts);
  // A GGUF image in memory (the embedded demo model); must outlive the engine.
  static std::unique_ptr<Engine> open_memory(const uint8_t* data, size_t size, const std::string& name,
                                             const EngineOptions& opts);
  ~Engine();

  const ModelConfig& config() const { return model_->config(); }
  Model& model() { return *model_; }
  Backend& backend() { return *backend_; }
  const gguf::File& file() const { return *file_; }
  // Loaded on first use, so files with an unusual tokenizer still run `memra logits`.
  const Tokenizer& tokenizer();
  int32_t ctx() const { return ctx_; }
  int32_t prefill_chunk() const { return prefill_chunk_; }

  std::unique_ptr<SequenceCache> new_sequence();

  // Feeds `tokens` to `seq` on the chunk grid (chunk boundaries at multiples of prefill_chunk()
  // counted from position 0). If `last_logits` is given it receives the logits after the last
  // token; if `all_logits` is given it receives the logits after every token (n x n_vocab).
  void prefill(SequenceCache& seq, std::span<const int32_t> tokens, std::vector<float>* last_logits,
               std::vector<float>* all_logits = nullptr);
  // One chunk of a prefill on the grid: feeds the first min(tokens.size(), tokens to the next grid
  // boundary) tokens and returns how many it fed. `logits`, if given, receives the logits after
  // the last fed token. Lets a scheduler interleave long prompts with decode steps; a prompt fed
  // this way is cut exactly as prefill() cuts it.
  int32_t prefill_chunk(SequenceCache& seq, std::span<const int32_t> tokens, std::vector<float>* logits);
  // One decode step: token b goes to seqs[b]. logits receives B x n_vocab.
  void decode(std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens, std::vector<float>& logits);
  // Greedy decode step with lean logits: the argmax runs on the backend and only the B token ids
  // come back (next[b] is seqs[b]'s next token).
  void decode_greedy(std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens, std::vector<int32_t>& next);
  // Decode step with per-row sampling on the backend (lean logits: only ids come back).
  void decode_sample(std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens,
                     std::span<const RowSampling> sampling, std::vector<int32_t>& next);

 private:
  Engine() = default;
  void init(const EngineOptions& opts);
  const float* decode_forward(std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens);
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  int32_t ctx_ = 0;
  int32_t prefill_chunk_ = 512;
  StepPlan decode_plan_;  // reused each step (the backend may keep pointers into it until the next)
  std::vector<int32_t> decode_rows_;
};

}  // namespace memra
