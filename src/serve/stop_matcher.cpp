#include "serve/stop_matcher.h"

#include <algorithm>

namespace memra::serve {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::feed(std::string_view text) {
  if (matched_) return {};
  if (stops_.empty()) return std::string(text);
  held_.append(text);
  // Earliest occurrence of any stop string. Released text never ends in a prefix of a stop
  // string, so an occurrence can only start inside held_.
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    matched_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix of held_ that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (std::string_view(held_).substr(held_.size() - len) == std::string_view(s).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!matched_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace memra::serve
