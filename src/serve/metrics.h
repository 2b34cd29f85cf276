// Server metrics in the Prometheus text exposition format (GET /metrics): request counts by
// endpoint and status, prompt and generated token totals, queue depth and running batch size
// (gauges), the prefix cache (lookups, hits, reused tokens, pool bytes, evictions), and histograms of time-to-first-token and time-per-output-token.
//
// Every method is thread-safe (one mutex: updates are a few per request or per decode step, far
// below where contention would matter).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "step/prefix_cache.h"

namespace memra::serve {

// A cumulative histogram with fixed upper bounds (seconds), as Prometheus expects: bucket i counts
// observations <= bounds[i]; +Inf counts all of them.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket / _sum / _count lines for `name`.
  void render(const std::string& name, std::string& out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> buckets_;  // non-cumulative; summed at render time
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  // One finished HTTP request (any route, any status).
  void request_finished(const std::string& endpoint, int status);
  void add_prompt_tokens(int64_t n);
  void add_generated_tokens(int64_t n);
  void observe_time_to_first_token(double seconds);
  void observe_time_per_output_token(double seconds);
  void set_queue_depth(int64_t n);
  void set_running(int64_t n);
  // The prefix cache's counters and pool size, as of now.
  void set_prefix_cache(const PrefixCacheStats& s);

  // Counter values, for tests.
  uint64_t requests(const std::string& endpoint, int status) const;
  int64_t generated_tokens() const;
  int64_t running() const;
  PrefixCacheStats prefix_cache() const;
  int64_t queue_depth() const;

  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  int64_t prompt_tokens_ = 0;
  int64_t generated_tokens_ = 0;
  int64_t queue_depth_ = 0;
  int64_t running_ = 0;
  bool has_prefix_cache_ = false;
  PrefixCacheStats prefix_cache_;
  Histogram ttft_;
  Histogram tpot_;
};

}  // namespace memra::serve
