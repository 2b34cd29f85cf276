// MEMRA_CUDA_PROFILE=1: per-op GPU time from CUDA events around every op of the CUDA backend
// (graphs are disabled so each launch is visible). Printed when the backend is destroyed:
// op, calls, total and mean time, share, and achieved bandwidth where the op knows its bytes.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace memra::cuda {

class OpProfiler {
 public:
  OpProfiler() = default;
  ~OpProfiler();
  void enable(cudaStream_t stream) {
    enabled_ = true;
    stream_ = stream;
  }
  bool enabled() const { return enabled_; }

  class Scope {
   public:
    Scope(OpProfiler& p, std::string name, double bytes);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpProfiler& p_;
    int index_ = -1;
  };

  // Folds finished measurements into the totals (call after a stream synchronize).
  void collect();
  std::string report();

 private:
  struct Pending {
    std::string name;
    double bytes;
    cudaEvent_t start, stop;
    bool closed = false;  // stop recorded (the op's scope has ended)
  };
  struct Total {
    int calls = 0;
    double ms = 0, bytes = 0;
  };
  cudaEvent_t take_event();
  bool enabled_ = false;
  cudaStream_t stream_ = nullptr;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> free_;
  std::map<std::string, Total> totals_;
};

}  // namespace memra::cuda
