// POST /tokenize and POST /detokenize, as vLLM and llama-server serve them.
//
//   /tokenize    {"prompt": "..."} (vLLM; "content" as llama-server spells it), or {"messages": [...]}
//                (rendered as /v1/chat/completions would: the tokens the model would see);
//                "add_special_tokens" (vLLM, default true) / "add_special" (llama-server, default
//                false): BOS first when the model wants one; "return_token_strs": each token's text.
//                -> {"count", "max_model_len", "tokens", "token_strs"}
//   /detokenize  {"tokens": [ids]} -> {"prompt": text} (vLLM), with "content" too (llama-server)
#pragma once

#include <string_view>

#include "serve/openai_api.h"

namespace memra::serve {

// Both throw ApiError.
ojson tokenize_request(std::string_view body, const ModelInfo& model);
ojson detokenize_request(std::string_view body, const ModelInfo& model);

}  // namespace memra::serve
