// Model output (Qwen's format) -> OpenAI assistant message: reasoning_content, content and
// tool_calls.
//
// - Reasoning: `<think> ... </think>` at the start of the output, or everything up to
//   `</think>` when the prompt already opened the block (Qwen3.5 templates end the prompt with
//   "<think>\n"; see prompt_ends_in_thinking). Whitespace around the reasoning is trimmed and
//   whitespace right after `</think>` is dropped (the template adds "\n\n" there).
// - Tool calls: `<tool_call>...</tool_call>` blocks in the content, either Qwen3's JSON form
//     <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   or Qwen3.5's XML form
//     <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>
//   become tool_calls [{id, type: "function", function: {name, arguments: JSON string}}].
//   Whitespace between content and tool-call blocks is dropped. A block that does not parse
//   (or is cut off) stays in the content verbatim, so nothing the model wrote is lost.
// - Everything else is content.
//
// The streaming parser emits content and reasoning as they arrive and holds back only what may
// still turn out to be part of a tag (or whitespace that may be trimmed). The concatenation of
// its deltas equals parse_output() of the whole text, however the text is split into chunks.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace memra::chat {

struct ToolCall {
  size_t index = 0;       // position in the message's tool_calls
  std::string id;         // options.id_prefix + index
  std::string name;
  std::string arguments;  // JSON text of the arguments object, formatted like json.dumps
};

struct ParsedOutput {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  // {"role": "assistant", "content": ..., "reasoning_content"?: ..., "tool_calls"?: [...]};
  // content is null when it is empty and there are tool calls.
  nlohmann::ordered_json to_openai_message() const;
};

struct OutputParserOptions {
  bool starts_in_thinking = false;  // the prompt left a <think> block open
  bool parse_tool_calls = true;     // false when the request offered no tools
  std::string id_prefix = "call_";
  // The request's tools (OpenAI format), used to type XML-form parameter values: a parameter
  // whose schema type is not "string" is parsed as JSON when it can be.
  nlohmann::ordered_json tools;
};

ParsedOutput parse_output(std::string_view text, const OutputParserOptions& options = {});

// True when the prompt ends inside an open <think> block, i.e. generation starts in reasoning.
bool prompt_ends_in_thinking(std::string_view prompt);

struct OutputDelta {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return content.empty() && reasoning_content.empty() && tool_calls.empty(); }
};

class StreamingOutputParser {
 public:
  explicit StreamingOutputParser(OutputParserOptions options = {});
  // Feeds the next piece of generated text (any split, even inside a UTF-8 character or a tag).
  OutputDelta feed(std::string_view chunk);
  // End of generation: releases everything held back.
  OutputDelta finish();

 private:
  enum class State { Start, Reasoning, Content, ToolCall };

  OutputParserOptions options_;
  std::map<std::string, std::map<std::string, std::string>> param_types_;  // tool -> parameter -> type
  State state_;
  std::string pending_;         // text not yet classified
  bool strip_leading_ = false;  // drop whitespace before the next content / reasoning text
  std::string held_ws_;         // whitespace dropped before a <tool_call>, restored if it is malformed
  size_t n_calls_ = 0;
  bool finished_ = false;

  void step(OutputDelta& out, bool at_end);
  bool step_start(bool at_end);
  bool step_reasoning(OutputDelta& out, bool at_end);
  bool step_content(OutputDelta& out, bool at_end);
  bool step_tool_call(OutputDelta& out, bool at_end);
  bool parse_call(std::string_view body, ToolCall& call) const;
};

}  // namespace memra::chat
