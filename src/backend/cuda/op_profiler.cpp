#include "backend/cuda/op_profiler.h"

#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace memra::cuda {

OpProfiler::~OpProfiler() {
  for (auto& p : pending_) {
    cudaEventDestroy(p.start);
    cudaEventDestroy(p.stop);
  }
  for (auto e : free_) cudaEventDestroy(e);
}

cudaEvent_t OpProfiler::take_event() {
  if (!free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e;
  CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

OpProfiler::Scope::Scope(OpProfiler& p, std::string name, double bytes) : p_(p) {
  if (!p.enabled_) return;
  Pending q{std::move(name), bytes, p.take_event(), p.take_event()};
  CUDA_CHECK(cudaEventRecord(q.start, p.stream_));
  p.pending_.push_back(std::move(q));
  index_ = static_cast<int>(p.pending_.size()) - 1;
}

OpProfiler::Scope::~Scope() {
  if (index_ >= 0) {
    CUDA_CHECK(cudaEventRecord(p_.pending_[index_].stop, p_.stream_));
    p_.pending_[index_].closed = true;
  }
}

void OpProfiler::collect() {
  if (!enabled_) return;
  // Only a prefix of closed scopes can be folded: an open scope (synchronize() called inside an
  // op) keeps its place, and so do the scopes after it, whose indices it does not know.
  size_t n = 0;
  while (n < pending_.size() && pending_[n].closed) ++n;
  if (n < pending_.size()) return;
  for (auto& p : pending_) {
    CUDA_CHECK(cudaEventSynchronize(p.stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
    Total& t = totals_[p.name];
    t.calls++;
    t.ms += ms;
    t.bytes += p.bytes;
    free_.push_back(p.start);
    free_.push_back(p.stop);
  }
  pending_.clear();
}

std::string OpProfiler::report() {
  collect();
  std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.ms > b.second.ms; });
  double all = 0;
  for (auto& r : rows) all += r.second.ms;
  std::string s = fmt::format("[cuda-profile] {:.1f} ms of GPU time in ops (events around each op, graphs off)\n", all);
  s += fmt::format("  {:<44} {:>7} {:>10} {:>9} {:>6} {:>8}\n", "op", "calls", "total ms", "mean us", "share", "GB/s");
  for (auto& [name, t] : rows) {
    std::string bw = t.bytes > 0 ? fmt::format("{:.0f}", t.bytes / (t.ms * 1e-3) / 1e9) : "";
    s += fmt::format("  {:<44} {:>7} {:>10.2f} {:>9.1f} {:>5.1f}% {:>8}\n", name, t.calls, t.ms, 1e3 * t.ms / t.calls,
                     100.0 * t.ms / all, bw);
  }
  return s;
}

}  // namespace memra::cuda
