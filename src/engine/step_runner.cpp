#include "engine/step_runner.h"

#include <chrono>
#include <cstdio>

#include "backend/backend.h"
#include "common/error.h"
#include "step/kv_blocks.h"
#include "step/step_plan.h"

namespace memra {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A decode step: one row per sequence, logits for every row in order. It launches the same work
// for the same batch size and KV bucket, so it can be recorded once and replayed.
bool is_decode_step(const StepPlan& plan, const std::vector<int32_t>& logit_rows) {
  const int64_t rows = plan.n_rows();
  if (static_cast<int64_t>(logit_rows.size()) != rows || static_cast<int64_t>(plan.seqs.size()) != rows) return false;
  for (int64_t i = 0; i < rows; ++i)
    if (logit_rows[i] != i) return false;
  return true;
}
}  // namespace

class StepRunner::PhaseTimer final : public ForwardObserver {
 public:
  explicit PhaseTimer(Backend& backend) : backend_(backend) {}
  ~PhaseTimer() {
    double total = 0;
    for (double v : seconds_) total += v;
    std::fprintf(stderr, "[batch-phase] %.1f ms over decode steps (sync-bounded: shares rank phases)\n", total * 1e3);
    for (int i = 0; i < kForwardPhases; ++i)
      std::fprintf(stderr, "  %8.2f ms %5.1f%%  %s\n", seconds_[i] * 1e3, total > 0 ? 100.0 * seconds_[i] / total : 0.0,
                   forward_phase_name(static_cast<ForwardPhase>(i)));
  }
  void start() {
    backend_.synchronize();
    last_ = now_seconds();
  }
  void phase_done(ForwardPhase phase) override {
    backend_.synchronize();
    const double t = now_seconds();
    seconds_[static_cast<int>(phase)] += t - last_;
    last_ = t;
  }

 private:
  Backend& backend_;
  double last_ = 0;
  double seconds_[kForwardPhases] = {};
};

StepRunner::StepRunner(Model& model, Backend& backend, bool phase_timing)
    : model_(model), backend_(backend), phases_(phase_timing ? std::make_unique<PhaseTimer>(backend) : nullptr) {}

StepRunner::~StepRunner() = default;

const float* StepRunner::run(const StepPlan& plan, const std::vector<int32_t>& logit_rows) {
  model_.check_step(plan, logit_rows);
  Backend& be = backend_;
  be.reset_scratch();
  be.set_step(plan);
  const bool decode_step = is_decode_step(plan, logit_rows);
  // Phase timing synchronizes: nothing can be recorded.
  const bool graphable = decode_step && !phases_;
  const uint64_t graph_key = (static_cast<uint64_t>(plan.n_rows()) << 32) |
                             (static_cast<uint64_t>(plan.mixed_depths(kKvBlock)) << 31) |
                             static_cast<uint64_t>(bucketed_kv_len(plan.max_kv_len()) / kKvLenBucket);
  bool recording = false;
  if (graphable) {
    auto it = graph_logits_.find(graph_key);
    if (it != graph_logits_.end()) {  // seen before: replay it, or record it now
      if (be.graph_begin(graph_key)) return it->second;
      recording = true;
    }
  }
  ForwardObserver* observer = nullptr;
  if (phases_ && decode_step) {
    phases_->start();
    observer = phases_.get();
  }
  const float* logits = model_.forward(plan, logit_rows, observer);
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
