#include "step/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace memra {

TokenLogprob token_logprobs(std::span<const float> row, int32_t token, int32_t k) {
  const int32_t n = static_cast<int32_t>(row.size());
  double m = -std::numeric_limits<double>::infinity();
  for (int32_t i = 0; i < n; ++i)
    if (row[i] > m) m = row[i];
  double sum = 0.0;
  if (std::isfinite(m))
    for (int32_t i = 0; i < n; ++i)
      if (!std::isnan(row[i])) sum += std::exp(static_cast<double>(row[i]) - m);
  const double lse = std::isfinite(m) ? m + std::log(sum) : 0.0;
  auto lp = [&](int32_t i) -> float {
    if (std::isnan(row[i]) || !std::isfinite(m)) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(static_cast<double>(row[i]) - lse);
  };
  TokenLogprob out;
  out.token = token;
  out.logprob = token >= 0 && token < n ? lp(token) : -std::numeric_limits<float>::infinity();
  // Top k by insertion into a short sorted list: k is small (OpenAI allows 20), one pass over the row.
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(std::max(k, 0)) + 1);
  auto better = [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
  for (int32_t i = 0; i < n && k > 0; ++i) {
    if (std::isnan(row[i])) continue;
    if (static_cast<int32_t>(best.size()) == k && !better(i, best.back())) continue;
    auto pos = std::upper_bound(best.begin(), best.end(), i, better);
    best.insert(pos, i);
    if (static_cast<int32_t>(best.size()) > k) best.pop_back();
  }
  for (int32_t id : best) out.top.emplace_back(id, lp(id));
  return out;
}

}  // namespace memra
