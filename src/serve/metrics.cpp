#include "serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace memra::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++buckets_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += buckets_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
}

namespace {

// Seconds. TTFT spans queueing and prefill (milliseconds to minutes); TPOT one decode step of a
// batch (sub-millisecond on a GPU, tens of milliseconds for a batch on a small CPU).
std::vector<double> ttft_bounds() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}
std::vector<double> tpot_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.5};
}

}  // namespace

Metrics::Metrics() : ttft_(ttft_bounds()), tpot_(tpot_bounds()) {}

void Metrics::request_finished(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::add_prompt_tokens(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  prompt_tokens_ += n;
}

void Metrics::add_generated_tokens(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  generated_tokens_ += n;
}

void Metrics::observe_time_to_first_token(double seconds) {
  std::lock_guard<std::mutex> lk(mu_);
  ttft_.observe(seconds);
}

void Metrics::observe_time_per_output_token(double seconds) {
  std::lock_guard<std::mutex> lk(mu_);
  tpot_.observe(seconds);
}

void Metrics::set_queue_depth(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  queue_depth_ = n;
}

void Metrics::set_running(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  running_ = n;
}

void Metrics::set_prefix_cache(const PrefixCacheStats& s) {
  std::lock_guard<std::mutex> lk(mu_);
  has_prefix_cache_ = true;
  prefix_cache_ = s;
}

PrefixCacheStats Metrics::prefix_cache() const {
  std::lock_guard<std::mutex> lk(mu_);
  return prefix_cache_;
}

uint64_t Metrics::requests(const std::string& endpoint, int status) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = requests_.find({endpoint, status});
  return it == requests_.end() ? 0 : it->second;
}

int64_t Metrics::generated_tokens() const {
  std::lock_guard<std::mutex> lk(mu_);
  return generated_tokens_;
}

int64_t Metrics::running() const {
  std::lock_guard<std::mutex> lk(mu_);
  return running_;
}

int64_t Metrics::queue_depth() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queue_depth_;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string out;
  out += "# HELP memra_requests_total HTTP requests answered, by endpoint and status code.\n";
  out += "# TYPE memra_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += fmt::format("memra_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
  out += "# HELP memra_prompt_tokens_total Prompt tokens of the requests (prefilled or resumed from the prefix cache).\n";
  out += "# TYPE memra_prompt_tokens_total counter\n";
  out += fmt::format("memra_prompt_tokens_total {}\n", prompt_tokens_);
  out += "# HELP memra_generation_tokens_total Tokens generated (sampled), over all choices.\n";
  out += "# TYPE memra_generation_tokens_total counter\n";
  out += fmt::format("memra_generation_tokens_total {}\n", generated_tokens_);
  out += "# HELP memra_queue_depth Requests waiting for a batch slot.\n";
  out += "# TYPE memra_queue_depth gauge\n";
  out += fmt::format("memra_queue_depth {}\n", queue_depth_);
  out += "# HELP memra_running_sequences Sequences in the running batch (prefilling or decoding).\n";
  out += "# TYPE memra_running_sequences gauge\n";
  out += fmt::format("memra_running_sequences {}\n", running_);
  if (has_prefix_cache_) {
    const PrefixCacheStats& p = prefix_cache_;
    auto metric = [&](const char* name, const char* type, const char* help, auto value) {
      out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
    };
    metric("memra_prefix_cache_lookups_total", "counter", "Prompts looked up in the prefix cache.", p.lookups);
    metric("memra_prefix_cache_hits_total", "counter", "Prompts that resumed from the prefix cache.", p.hits);
    metric("memra_prefix_cache_hit_ratio", "gauge", "Hits over lookups.",
           p.lookups ? static_cast<double>(p.hits) / static_cast<double>(p.lookups) : 0.0);
    metric("memra_prefix_cache_reused_tokens_total", "counter", "Prompt tokens resumed instead of prefilled.",
           p.reused_tokens);
    metric("memra_prefix_cache_bytes", "gauge", "Pool bytes: state snapshots and parked sequences (a shared KV block once).", p.bytes);
    metric("memra_prefix_cache_budget_bytes", "gauge", "The pool's budget (MEMRA_PREFIX_CACHE_MB).", p.budget_bytes);
    metric("memra_prefix_cache_entries", "gauge", "Prompts held in the pool.", p.entries);
    metric("memra_prefix_cache_snapshots", "gauge", "Recurrent-state snapshots held.", p.snapshots);
    metric("memra_prefix_cache_kv_blocks", "gauge",
           "KV blocks (128 positions of one attention layer) held by parked sequences, shared ones once.",
           p.kv_blocks);
    metric("memra_prefix_cache_evictions_total", "counter", "Entries evicted for the budget.", p.evictions);
  }
  out += "# HELP memra_time_to_first_token_seconds From request arrival to its first generated token.\n";
  out += "# TYPE memra_time_to_first_token_seconds histogram\n";
  ttft_.render("memra_time_to_first_token_seconds", out);
  out += "# HELP memra_time_per_output_token_seconds Time between consecutive tokens of a sequence.\n";
  out += "# TYPE memra_time_per_output_token_seconds histogram\n";
  tpot_.render("memra_time_per_output_token_seconds", out);
  return out;
}

}  // namespace memra::serve
