// OpenAI API requests: /v1/chat/completions and /v1/completions bodies parsed and validated into
// a GenerationSpec, with OpenAI-style errors ({"error": {"message", "type", "param", "code"}})
// that name the offending field. Runs in the HTTP thread (rendering and tokenizing included), so
// the scheduler only ever sees requests that fit.
//
// Accepted beyond OpenAI's fields (as vLLM and llama.cpp do): top_k, min_p, repetition_penalty,
// ignore_eos, chat_template_kwargs (enable_thinking and the few others of serve/chat_prompt.h),
// add_generation_prompt.
// Special tokens: chat messages are text (serve/chat_prompt.h); a /v1/completions prompt string is
// the raw prompt, where control-token text such as "<|im_start|>" is parsed (as vLLM and
// llama-server do).
// Structured output (response_format, tool_choice "required" / named, grammar, guided_*):
// serve/constraints.h.
// Ignored: user, metadata, store, service_tier, parallel_tool_calls, and any unknown field that
// is not a constraint (unknown constraint fields are refused: constraints.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/output_parser.h"
#include "serve/request_stream.h"

namespace memra {
class Tokenizer;
}

namespace memra::serve {

using ojson = nlohmann::ordered_json;

// Largest JSON nesting depth accepted in a request (messages with tool schemas need about 10).
constexpr int kMaxJsonDepth = 64;

// A request the server answers with an error status.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = {}, std::string code = {},
           std::string type = {});
  int status;
  std::string type;   // "invalid_request_error", "authentication_error", ...
  std::string param;  // the offending field, "" for none
  std::string code;   // e.g. "model_not_found", "context_length_exceeded", "" for none
  std::string json() const;
};

// A 400 naming the offending request field: the request parsers' common error.
inline ApiError bad(const std::string& param, const std::string& message, const std::string& code = {}) {
  return ApiError(400, message, param, code);
}

// {"error": {"message", "type", "param", "code"}} (param and code null when empty); `type`
// defaults from the status (400/413/422: invalid_request_error, 401: authentication_error,
// 404: not_found_error, 429: rate_limit_error, 503: service_unavailable, 5xx: server_error).
std::string error_json(int status, const std::string& message, const std::string& param = {},
                       const std::string& code = {}, const std::string& type = {});

// JSON text for responses: invalid UTF-8 (possible in raw token bytes) becomes U+FFFD instead of
// throwing.
std::string dump_json(const ojson& j);

// What the API layer knows about the served model. The chat template is optional.
struct ModelInfo {
  std::string name;  // the id clients send as "model" and /v1/models lists
  const Tokenizer* tokenizer = nullptr;
  std::unique_ptr<chat::ChatTemplate> chat_template;
  chat::ChatTemplateOptions template_options;
  int32_t n_vocab = 0;
  int32_t ctx = 0;
  int32_t max_batch = 1;
  int64_t created = 0;  // unix time the server started, for /v1/models
  bool xml_tool_calls = false;  // the template writes Qwen3.5's <function=...> tool-call form
  // From index_vocab (serve/chat_prompt.h): the control tokens' texts, longest first, and the
  // most bytes one token stands for (0: not indexed; prompts are then not pre-checked).
  std::vector<std::pair<std::string, int32_t>> control_tokens;
  size_t max_token_bytes = 0;
  // Rendering is serialised: cheap next to generation, and keeps the template free of any
  // thread-safety assumption.
  std::unique_ptr<std::mutex> template_mutex = std::make_unique<std::mutex>();
};

enum class Endpoint { Chat, Completion };

struct ApiRequest {
  Endpoint endpoint = Endpoint::Chat;
  GenerationSpec spec;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // chat: logprobs = true; completions: logprobs given
  bool echo = false;           // completions: the answer starts with the prompt
  std::string prompt_text;     // the rendered (chat) or given (completions) prompt
  chat::OutputParserOptions parser;  // chat: how to split reasoning / tool calls
};

// Both throw ApiError. `body` is the raw request body.
ApiRequest parse_chat_request(std::string_view body, const ModelInfo& model);
ApiRequest parse_completion_request(std::string_view body, const ModelInfo& model);

// A request body as a JSON object (depth-checked). Throws ApiError (400).
ojson parse_body(std::string_view body);
// A "model" field that names another model: 404. Throws ApiError.
void check_model(const ojson& req, const ModelInfo& model);
// Prepends BOS when the tokenizer asks for one.
void add_bos(std::vector<int32_t>& ids, const Tokenizer& tok);

// GET /v1/models.
ojson models_list(const ModelInfo& model);

// Deepest nesting of arrays/objects in a JSON text (strings skipped; the text need not be valid).
int json_depth(std::string_view text);

}  // namespace memra::serve
