// How the engine runs one step plan through the model: the checks, the backend's step setup,
// CUDA-graph capture and replay of decode steps, and optional per-phase timing, around
// Model::forward's math.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "model/model.h"

namespace memra {

class Backend;
struct StepPlan;

class StepRunner {
 public:
  // phase_timing (MEMRA_BATCH_PHASE): synchronize at the phase boundaries of decode steps and
  // report the host time per phase at destruction (the syncs destroy launch overlap: shares rank
  // the phases, totals are inflated; graphs are off).
  StepRunner(Model& model, Backend& backend, bool phase_timing);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // Runs `plan`; returns backend memory with the logits of `logit_rows` (Model::forward), valid
  // until the next run.
  const float* run(const StepPlan& plan, const std::vector<int32_t>& logit_rows);

 private:
  class PhaseTimer;
  Model& model_;
  Backend& backend_;
  std::unique_ptr<PhaseTimer> phases_;                        // null unless phase timing is on
  std::unordered_map<uint64_t, const float*> graph_logits_;  // logits buffer of each recorded step
};

}  // namespace memra
