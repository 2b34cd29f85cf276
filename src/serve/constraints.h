// Structured-output fields of a request -> the compiled grammar the scheduler enforces.
//
// Accepted (one constraint per request):
//   response_format {type: "json_object"} | {type: "json_schema", json_schema: {name, schema, strict}}
//   tool_choice "required" | {type: "function", function: {name}}: the answer is tool calls, each
//     call's arguments constrained by that tool's `parameters` schema, in the model's format
//     (Qwen3's JSON form or Qwen3.5's XML form, chosen from the chat template)
//   grammar (llama.cpp: GBNF), json_schema (llama.cpp), guided_json, guided_regex, guided_choice,
//   guided_grammar (vLLM), structured_outputs {json | regex | choice | grammar} (newer vLLM);
//   guided_decoding_backend is accepted and ignored (there is one engine).
// Any other guided_* field, and fields of other servers' constraint dialects we do not implement
// (guided_whitespace_pattern, structural_tag, regex, ebnf), get a 400 rather than being ignored.
// A schema or grammar the compiler refuses gets a 400 with the compiler's message.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/compiled_grammar.h"

namespace memra::serve {

struct ModelInfo;

struct Constraint {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;  // null: unconstrained
  std::string source;                                       // the field it came from, for messages
  bool tool_calls = false;                                  // the grammar produces tool calls
};

// Throws ApiError (400) naming the field. `chat`: /v1/chat/completions (tools and
// response_format apply there only).
Constraint parse_constraint(const nlohmann::ordered_json& req, const ModelInfo& model, bool chat);

}  // namespace memra::serve
