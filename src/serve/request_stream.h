// What a generation request asks of the scheduler, and the channel its results come back on.
//
// A RequestStream is shared between the HTTP thread that submitted the request (it waits for
// events and may cancel) and the scheduler's worker thread (it pushes events). Events of one
// choice arrive in generation order; the last event of each choice carries its finish reason.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "step/logprobs.h"
#include "step/sampling.h"

namespace memra::serve {

// Most alternatives a request may ask for per token (OpenAI's top_logprobs limit).
constexpr int32_t kMaxTopLogprobs = 20;

// GrammarDeadEnd: the request's grammar allows no token of the vocabulary at this point.
enum class FinishReason { None, Stop, Length, Cancelled, Error, GrammarDeadEnd };

// The error of requests cut off by a shutdown (answered 503 rather than 500).
inline constexpr const char* kShutdownMessage = "the server is shutting down";
// "stop", "length", "cancelled", "error", "grammar_dead_end" ("" for None).
const char* finish_reason_name(FinishReason r);

struct GenerationSpec {
  std::vector<int32_t> prompt;  // tokens, BOS included when the model wants one
  // Choice i samples with seed sampling.seed + i, so choice 0 of an n-choice request equals the
  // same request with n = 1.
  SamplingParams sampling;
  int32_t n = 1;
  int32_t max_tokens = 16;  // per choice, >= 1
  std::vector<std::string> stop;
  int32_t top_logprobs = -1;  // -1: no logprobs; else the chosen token's and this many alternatives
  bool ignore_eos = false;
  bool skip_special = true;  // control tokens (<|im_start|>, ...) add no text
  // Structured output: every generated token must keep the text inside this grammar (null: free).
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // The prompt leaves a <think> block open: the grammar applies from after </think>.
  bool grammar_after_thinking = false;
};

struct ChoiceEvent {
  int32_t choice = 0;
  std::string text;                     // new text, valid UTF-8, stop strings already cut
  std::vector<TokenLogprob> logprobs;   // tokens generated since the last event, if requested
  FinishReason finish = FinishReason::None;
  int32_t completion_tokens = 0;        // on the finishing event: tokens sampled for this choice
  int32_t cached_tokens = 0;            // on the finishing event: prompt tokens resumed from the prefix cache
  std::string error;                    // FinishReason::Error: what went wrong
};

class RequestStream {
 public:
  RequestStream(int32_t n_choices, int32_t prompt_tokens);

  // --- the submitting side ---
  // Waits until events are available, every choice has finished, or `timeout` passes; moves the
  // events into `out` (appended). Returns false once every choice has finished and all events
  // have been taken.
  bool wait(std::vector<ChoiceEvent>& out, std::chrono::milliseconds timeout);
  // Asks the scheduler to stop this request; it frees the sequences at its next tick and
  // finishes every open choice with FinishReason::Cancelled.
  void cancel() { cancelled_.store(true); }
  int32_t prompt_tokens() const { return prompt_tokens_; }
  int32_t n_choices() const { return n_choices_; }
  std::chrono::steady_clock::time_point created() const { return created_; }

  // --- the scheduler side ---
  bool cancelled() const { return cancelled_.load(); }
  void push(std::vector<ChoiceEvent>& events);  // moves them in; one notification

 private:
  const int32_t n_choices_;
  const int32_t prompt_tokens_;
  const std::chrono::steady_clock::time_point created_;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ChoiceEvent> events_;
  int32_t finished_ = 0;  // choices whose final event was pushed
};

}  // namespace memra::serve
