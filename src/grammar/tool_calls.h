// Grammars for forced tool calls (tool_choice "required" or a named tool), in the two formats
// Qwen models write (chat/output_parser.h parses both):
//   Json: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   Xml:  <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>
// The arguments follow the tool's `parameters` schema (json_schema.h; any object when absent).
// In the XML form a string parameter's value is free text without '<'; other parameters are
// JSON values of their schema.
#pragma once

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace memra::grammar {

enum class ToolCallFormat { Json, Xml };

// `tools`: OpenAI tools (each {type: "function", function: {name, parameters}}), already
// validated. `one_call`: exactly one call (a named tool); otherwise one or more.
Grammar tool_call_grammar(const nlohmann::ordered_json& tools, ToolCallFormat format, bool one_call,
                          Limits limits = {});

}  // namespace memra::grammar
