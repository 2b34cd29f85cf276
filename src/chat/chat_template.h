// Chat templates: OpenAI-style chat request -> prompt text, through the model's Jinja template
// (GGUF key tokenizer.chat_template), rendered as transformers' apply_chat_template does.
//
// Requests are nlohmann::ordered_json, not nlohmann::json: the order of keys in tool schemas
// reaches the prompt through `tojson`, and transformers keeps the order the client sent.
//
// Template variables: messages (normalised, below), tools (null when absent), documents (null),
// add_generation_prompt (default true), bos_token / eos_token when known, and every key of
// chat_template_kwargs (e.g. enable_thinking).
//
// Message normalisation, so templates written for transformers see the shapes they expect:
// - content given as a list of parts [{type: "text", text}] becomes one string (texts joined
//   with nothing between them, as Qwen3.5's own template joins them); other part types
//   (images, audio) are rejected;
// - missing or null content becomes "" (templates do string operations on it);
// - tool_calls[].function.arguments given as a JSON string (the OpenAI wire format) is parsed
//   into an object, because templates render it with `tojson` (Qwen3) or iterate its items
//   (Qwen3.5); a string that is not a JSON object is left as it is.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/jinja.h"

namespace memra::chat {

struct ChatTemplateOptions {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  jinja::Limits limits;
};

// The template variables for `request` (exposed for tests and `memra template`).
// Throws memra::Error naming the offending field of a malformed request.
nlohmann::ordered_json chat_template_variables(const nlohmann::ordered_json& request,
                                               const ChatTemplateOptions& options = {});

// A chat template parsed once (per model) and rendered per request.
class ChatTemplate {
 public:
  // Throws jinja::TemplateError on a syntax error.
  explicit ChatTemplate(std::string_view source);
  // Throws memra::Error for a malformed request and jinja::TemplateError for a template failure
  // (including raise_exception(...) from the template, whose message is kept).
  std::string render(const nlohmann::ordered_json& request, const ChatTemplateOptions& options = {}) const;

 private:
  jinja::Template template_;
};

// One-shot form of ChatTemplate(template_src).render(request, options).
std::string render_chat(std::string_view template_src, const nlohmann::ordered_json& request,
                        const ChatTemplateOptions& options = {});

}  // namespace memra::chat
