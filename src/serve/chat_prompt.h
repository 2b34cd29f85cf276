// The prompt of a chat request: the model's template rendered over the messages, tokenized so that
// only the template's own text can become control tokens. "<|im_start|>system" typed into a
// message (or a tool's description) stays text, as Hugging Face's tokenizer does with
// split_special_tokens; the turn markers the template writes stay control tokens.
//
// How: when a request string holds the text of a control token, the template is rendered a second
// time with those occurrences defused (one byte changed, the length kept). Where both renderings
// agree on a control token, the template wrote it; everything else is tokenized as text. A
// template that changes lengths in between (say, escapes the defused byte) gets the request
// refused rather than guessed at.
#pragma once

#include <string>
#include <vector>

#include "serve/openai_api.h"

namespace memra::serve {

// Fills model.control_tokens and model.max_token_bytes from its tokenizer.
void index_vocab(ModelInfo& model);

// Bytes of text in the string values of a JSON value (content parts' "type" left out).
size_t text_bytes(const ojson& v);

// Refuses (400, context_length_exceeded) a prompt of `bytes` bytes of text that cannot fit the
// context whatever it holds: every token covers at most max_token_bytes bytes, so it needs at
// least bytes / max_token_bytes tokens. Runs before rendering and tokenizing.
void check_text_fits(size_t bytes, const ModelInfo& model, const char* param);

// chat_template_kwargs the server passes to templates; anything else is refused (a request must
// not override template variables such as bos_token).
extern const std::vector<std::string> kTemplateKwargs;

struct ChatPrompt {
  std::string text;
  std::vector<int32_t> tokens;  // without BOS
};

// Checks chat_template_kwargs, renders and tokenizes. Throws ApiError (400).
ChatPrompt chat_prompt(const ojson& request, const ModelInfo& model);

}  // namespace memra::serve
