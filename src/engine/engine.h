// The engine: a GGUF file opened, its model bound to a backend, its tokenizer, and the two
// ways of running it: prefill (one sequence, a prompt cut on the fixed chunk grid) and the
// decode step (one token for each of B sequences; what comes back is decided by the step's
// sampling spec).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/options.h"
#include "model/model.h"
#include "step/prefix_cache.h"
#include "step/sequence_cache.h"
#include "step/step_plan.h"

namespace memra::gguf { class File; }

namespace memra {

class StepRunner;
class Tokenizer;
struct RowSampling;

// Everything an engine can be asked, typed. The CLI fills it once from the MEMRA_* knobs and its
// flags (engine/options.h); tests set fields. Defaults are the knobs' defaults.
struct EngineOptions {
  std::string device = "auto";  // MEMRA_DEVICE, --device: auto | cpu | cuda
  int32_t ctx = 0;              // --ctx: context limit per sequence; 0: min(training context, 32768)
  int32_t prefill_chunk = 512;  // MEMRA_PREFILL_CHUNK, --chunk: prompt tokens per prefill forward
  bool phase_timing = false;    // MEMRA_BATCH_PHASE: per-phase shares of decode steps (StepRunner)
  bool verbose = false;         // MEMRA_VERBOSE, -v: model and backend details on stderr
  GgmlType ssm_type = GgmlType::F32;  // MEMRA_SSM_STATE: the recurrent state between tokens, F32 or BF16
  CpuOptions cpu;               // the CPU backend's (MEMRA_THREADS)
  CudaOptions cuda;             // the CUDA backend's (MEMRA_CUDA_*)
  PrefixCacheOptions prefix_cache;  // MEMRA_PREFIX_CACHE_MB, MEMRA_PREFIX_SPACING
  bool operator==(const EngineOptions&) const = default;
};

// Backend factory: "cpu", "cuda" (error if not built / no GPU), "auto" (cuda when usable).
std::unique_ptr<Backend> make_backend(const EngineOptions& options);

// The sampling spec of a decode step, which decides what comes back:
// - no rows: the logits of every row (B x n_vocab), nothing drawn;
// - one RowSampling per row: each row's next token, drawn on the backend so only the ids come
//   back (lean logits; the backend's argmax when every row is plain greedy);
// - rows and `logits`: every row's logits as well, its token drawn on the host from them
//   (bit-identical to the backend's draw by the sampling contract, step/sampling.h).
struct StepSampling {
  std::span<const RowSampling> rows;
  bool logits = false;
};

struct StepOutput {
  std::vector<int32_t> tokens;  // one per row when the spec has rows
  std::vector<float> logits;    // B x n_vocab when the spec asks for them (or has no rows)
};

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

  bool verbose() const { return verbose_; }

  // A fresh sequence; its KV blocks come from the engine's pool (shared by prefix between the
  // engine's sequences: step/kv_blocks.h).
  std::unique_ptr<SequenceCache> new_sequence();
  const KvBlockPool& kv_pool() const { return *kv_pool_; }
  // The prefix reuse pool (step/prefix_cache.h) in this backend's memory; null when its budget
  // is 0. Used by one thread, between steps (the scheduler's worker).
  PrefixCache* prefix_cache() { return prefix_cache_.get(); }

  // Feeds `tokens` to `seq` on the chunk grid (step/step_plan.h). If `last_logits` is given it
  // receives the logits after the last token; if `all_logits` is given it receives the logits
  // after every token (n x n_vocab).
  void prefill(SequenceCache& seq, std::span<const int32_t> tokens, std::vector<float>* last_logits,
               std::vector<float>* all_logits = nullptr);
  // Tokens the next prefill_chunk() of `seq` feeds when `remaining` are left: up to the next
  // grid boundary.
  int32_t next_chunk_len(const SequenceCache& seq, size_t remaining) const;
  // One chunk of a prefill on the grid: feeds the first next_chunk_len() tokens and returns how
  // many it fed. `logits`, if given, receives the logits after the last fed token. Lets a
  // scheduler interleave long prompts with decode steps; a prompt fed this way is cut exactly as
  // prefill() cuts it.
  int32_t prefill_chunk(SequenceCache& seq, std::span<const int32_t> tokens, std::vector<float>* logits);
  // One decode step: token b goes to seqs[b]; `sampling` decides what comes back in `out`.
  void decode(std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens, const StepSampling& sampling,
              StepOutput& out);

 private:
  enum class ChunkLogits { None, Last, All };
  Engine() = default;
  void init(const EngineOptions& opts);
  // Feeds one grid chunk (n tokens) at the sequence's position; returns the logits in backend
  // memory (of the last row or of every row, as asked).
  const float* feed_chunk(SequenceCache& seq, const int32_t* tokens, int32_t n, ChunkLogits logits);
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<Tokenizer> tokenizer_;
  CacheShape cache_shape_;
  std::shared_ptr<KvBlockPool> kv_pool_;  // its sequences keep it alive; blocks freed with the last
  int32_t ctx_ = 0;
  int32_t prefill_chunk_ = 512;
  StepPlan decode_plan_;  // reused each step (the backend may keep pointers into it until the next)
  std::vector<int32_t> decode_rows_;
  bool verbose_ = false;
  // Last: its snapshots and parked sequences are freed before the backend goes.
  std::unique_ptr<PrefixCache> prefix_cache_;
};

}  // namespace memra
