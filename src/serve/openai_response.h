// OpenAI API responses built from scheduler events: the whole answer (chat.completion /
// text_completion) or server-sent-event chunks (chat.completion.chunk / text_completion), with
// `n` choices, logprobs, usage, and for chat the assistant message split by the output parser
// into content, reasoning_content and tool_calls.
//
// Streamed and whole answers go through the same parser (the streaming parser's deltas
// concatenate to the whole-text parse), so a streamed answer carries the same text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "serve/openai_api.h"
#include "serve/request_stream.h"

namespace memra::serve {

class ResponseBuilder {
 public:
  ResponseBuilder(const ApiRequest& request, const ModelInfo& model);

  // --- streaming ---
  // The opening chunks (chat: the assistant role of each choice; completions with echo: the prompt).
  std::string stream_begin();
  // SSE chunks for these events; a choice's finishing event also yields its last text and a
  // chunk with its finish_reason. An error ends the stream with an error object.
  std::string stream_events(std::vector<ChoiceEvent>& events);
  // The usage chunk (when asked for) and "data: [DONE]".
  std::string stream_end();

  // --- whole answer ---
  void add(std::vector<ChoiceEvent>& events);
  ojson response() const;

  // The first error a choice ended with (FinishReason::Error), if any.
  const std::optional<std::string>& error() const { return error_; }
  int32_t completion_tokens() const;

  const std::string& id() const { return id_; }

 private:
  struct Choice {
    std::string text;  // raw generated text
    std::vector<TokenLogprob> logprobs;
    FinishReason finish = FinishReason::None;
    int32_t completion_tokens = 0;
    chat::StreamingOutputParser parser;
    bool tool_calls = false;  // streamed a tool call
    explicit Choice(const chat::OutputParserOptions& o) : parser(o) {}
  };

  ojson chunk_base() const;
  ojson usage() const;
  std::string sse(const ojson& chunk) const;
  std::string chat_delta_chunk(int32_t index, ojson delta, const std::vector<TokenLogprob>* logprobs,
                               const char* finish_reason) const;
  std::string completion_chunk(int32_t index, const std::string& text, const std::vector<TokenLogprob>* logprobs,
                               const char* finish_reason, size_t text_offset) const;
  ojson chat_logprobs(const std::vector<TokenLogprob>& lps) const;
  ojson completion_logprobs(const std::vector<TokenLogprob>& lps, size_t text_offset) const;
  std::string token_text(int32_t id) const;
  const char* finish_name(const Choice& c) const;

  const ApiRequest& request_;
  const ModelInfo& model_;
  std::string id_;
  int64_t created_ = 0;
  std::vector<Choice> choices_;
  std::optional<std::string> error_;
  int32_t cached_tokens_ = 0;  // prompt tokens resumed from the prefix cache
  bool error_sent_ = false;
};

}  // namespace memra::serve
