// Continuous batching. One worker thread owns the Engine and runs ticks:
//   1. drop what was cancelled (freeing its sequences), admit queued requests while the running
//      batch has room (a request with n choices needs n places);
//   2. prefill prompt chunks of admitted requests, oldest first, for about one chunk's worth of
//      tokens per tick (so a long prompt stalls running streams for one chunk at a time);
//      a finished prompt samples its first token, and its n choices fork from the prefilled
//      sequence (copies of the cache: the prompt is prefilled once);
//   3. one batched decode step for every running sequence, then each row is sampled and its
//      text streamed out.
//
// Exactness: a sequence's logits do not depend on its batch mates nor on how its prompt is cut
// into steps (engine contract), and draws are keyed by (seed, token index)
// of the choice, so a request produces the same tokens alone or on a busy server.
//
// Structured output: a request with a grammar gets a grammar::Matcher per choice; before each
// step the masks of all constrained rows are built on host threads in parallel and handed to
// the sampler (RowSampling::allowed), which applies them on the device before the draw (the
// logprobs still come from the raw row). A row whose grammar allows no token ends with
// FinishReason::GrammarDeadEnd. Masks depend only on the row's own text, so constrained
// sequences stay exact under batching.
//
// Prefix reuse: a prompt that extends one seen before resumes from the engine's prefix cache
// (step/prefix_cache.h): the KV rows and recurrent state of the longest reusable prefix are
// restored and only the rest is prefilled; a sequence's bits do not depend on where its tokens
// are cut into steps, so the tokens are those of a cold run. While a prompt is prefilled its
// snapshots are recorded (the prefill stops at each snapshot point); when the request ends, a
// snapshot after its answer (choice 0) lets the next turn of a chat resume past that answer, and
// its sequence stays in the pool (parked) until evicted. The reused count is
// reported on each choice's finishing event (usage.prompt_tokens_details.cached_tokens).
//
// Sampling: every decode step hands the engine one RowSampling per row (Engine::decode). When a
// running row reports logprobs the step asks for the full logits too, and the engine draws on the
// host from them; otherwise only the ids come back (the backend's lean paths), which the sampling
// contract makes bit-identical.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "grammar/token_vocab.h"
#include "serve/request_stream.h"

namespace memra {
class Engine;
class PrefixCache;
class SequenceCache;
}  // namespace memra

namespace memra::serve {

class Metrics;

struct SchedulerOptions {
  int32_t max_batch = 16;  // running sequences (prefilling + decoding)
  int32_t max_queue = 64;  // requests waiting for room in the batch (0: only what fits now is taken)
  // Prompt tokens prefilled per tick before the decode step; 0: one prefill chunk.
  int32_t prefill_tokens_per_tick = 0;
  // false: always copy full logits and sample on the CPU (a check of the lean paths).
  bool lean_sampling = true;
  // Shortest time between two scheduler ticks; 0: as fast as the engine goes. Tests use it to
  // stand in for a slow model (a client must be able to leave before a tiny model finishes).
  std::chrono::microseconds min_tick_interval{0};
  // Resume prompts from the engine's prefix cache when it has one (Engine::prefix_cache()).
  bool prefix_reuse = true;
};

enum class SubmitStatus { Accepted, QueueFull, ShuttingDown };

struct SchedulerStats {
  int32_t queued = 0;
  int32_t running = 0;  // sequences holding a cache (prefilling or decoding)
  bool accepting = true;
};

class Scheduler {
 public:
  // `metrics` may be null. The engine is used only by the worker thread from start() on; its
  // tokenizer must already be loaded (Engine::tokenizer()).
  Scheduler(Engine& engine, SchedulerOptions options, Metrics* metrics);
  ~Scheduler();  // shutdown(0) if still running
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void start();
  // Validated by the caller (prompt fits the context, n <= max_batch, sampling valid). On
  // anything but Accepted, `stream` is left null.
  SubmitStatus submit(GenerationSpec spec, std::shared_ptr<RequestStream>& stream);
  // Stops admitting (submit answers ShuttingDown, queued requests finish with an error), lets
  // running sequences continue for up to `grace`, then finishes them with an error, and joins
  // the worker. Idempotent.
  void shutdown(std::chrono::milliseconds grace);
  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return opts_; }

 private:
  struct Job;
  struct Slot;

  void run();
  void reap_cancelled();
  void fail_all(const std::string& message);
  void prefill_some();
  void start_choices(const std::shared_ptr<Job>& job, const std::vector<float>& logits);
  void decode_step();
  // Takes token `token` for `slot` (logits row `row` if the request wants logprobs) and queues
  // its events; marks the slot finished when it ends.
  void accept_token(Slot& slot, int32_t token, const float* row);
  void finish_slot(Slot& slot, FinishReason reason, const std::string& error = {});
  // Fills slot.mask for the next draw of a constrained slot; false: the grammar allows nothing.
  bool build_mask(Slot& slot);
  // The mask of the next draw (empty span: unconstrained).
  std::span<const uint32_t> mask_of(const Slot& slot) const;
  void flush_events();
  void publish_stats();
  // The engine's prefix cache when this scheduler uses it, else null.
  PrefixCache* prefix_cache() const;
  // A job about to be prefilled: its sequence, resumed from the prefix cache where it can be.
  // True when the whole prompt was found (its choices start at once).
  bool start_job(const std::shared_ptr<Job>& job);

  Engine& engine_;
  const SchedulerOptions opts_;
  Metrics* metrics_;
  int32_t n_vocab_ = 0;
  std::shared_ptr<const grammar::TokenVocab> grammar_vocab_;  // the tokenizer's, for the grammar engine
  std::vector<uint32_t> no_end_mask_;  // every token but end-of-generation (thinking before a grammar)
  int32_t think_end_id_ = -1;          // </think>, where a grammar after thinking starts

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;  // guarded by mu_
  bool accepting_ = true;                   // guarded by mu_
  bool stop_ = false;                       // guarded by mu_: the worker exits
  std::chrono::steady_clock::time_point deadline_{};  // guarded by mu_: running work is cut here
  std::chrono::steady_clock::time_point last_tick_{};  // worker thread only: min_tick_interval pacing
  bool draining_ = false;                   // guarded by mu_
  int32_t running_count_ = 0;               // guarded by mu_: mirror of the worker's count

  // Worker-only state.
  std::vector<std::shared_ptr<Job>> prefilling_;
  std::vector<std::unique_ptr<Slot>> running_;
  std::vector<std::pair<std::shared_ptr<RequestStream>, ChoiceEvent>> pending_events_;
  std::mutex join_mu_;  // shutdown() may be called from two threads at once
  std::thread worker_;
  bool started_ = false;  // guarded by mu_
};

}  // namespace memra::serve
