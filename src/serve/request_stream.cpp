#include "serve/request_stream.h"

namespace memra::serve {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::None: return "";
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
    case FinishReason::GrammarDeadEnd: return "grammar_dead_end";
  }
  return "";
}

RequestStream::RequestStream(int32_t n_choices, int32_t prompt_tokens)
    : n_choices_(n_choices), prompt_tokens_(prompt_tokens), created_(std::chrono::steady_clock::now()) {}

bool RequestStream::wait(std::vector<ChoiceEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !events_.empty() || finished_ == n_choices_; });
  const bool had_events = !events_.empty();
  while (!events_.empty()) {
    out.push_back(std::move(events_.front()));
    events_.pop_front();
  }
  return had_events || finished_ < n_choices_;
}

void RequestStream::push(std::vector<ChoiceEvent>& events) {
  if (events.empty()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& e : events) {
      if (e.finish != FinishReason::None) ++finished_;
      events_.push_back(std::move(e));
    }
  }
  events.clear();
  cv_.notify_all();
}

}  // namespace memra::serve
