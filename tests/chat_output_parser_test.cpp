// Output parsing (Qwen's format): reasoning, content, tool calls in JSON and XML form, and the
// streaming parser's invariance to how the text is split into chunks.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"

namespace {

using memra::chat::OutputDelta;
using memra::chat::OutputParserOptions;
using memra::chat::ParsedOutput;
using memra::chat::parse_output;
using memra::chat::prompt_ends_in_thinking;
using memra::chat::StreamingOutputParser;
using ojson = nlohmann::ordered_json;

OutputParserOptions thinking_opts() {
  OutputParserOptions o;
  o.starts_in_thinking = true;
  return o;
}

const ojson& weather_tools() {
  static const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
    "opts": {"type": "object"}, "flag": {"type": ["boolean", "null"]}, "note": {"description": "untyped"}}}}}])");
  return tools;
}

TEST(ChatOutputParse, PlainContent) {
  ParsedOutput p = parse_output("Hello there.\nSecond line.");
  EXPECT_EQ(p.content, "Hello there.\nSecond line.");
  EXPECT_EQ(p.reasoning_content, "");
  EXPECT_TRUE(p.tool_calls.empty());
  EXPECT_EQ(p.to_openai_message().dump(), R"({"role":"assistant","content":"Hello there.\nSecond line."})");
  EXPECT_EQ(parse_output("").content, "");
  EXPECT_EQ(parse_output("  padded  ").content, "  padded  ");
}

TEST(ChatOutputParse, ThinkingOpenedInTheOutput) {
  ParsedOutput p = parse_output("<think>\nLet me add.\n</think>\n\n4");
  EXPECT_EQ(p.reasoning_content, "Let me add.");
  EXPECT_EQ(p.content, "4");
  EXPECT_EQ(p.to_openai_message().dump(), R"({"role":"assistant","content":"4","reasoning_content":"Let me add."})");
  p = parse_output("<think>\n\n</think>\n\nAnswer");
  EXPECT_EQ(p.reasoning_content, "");
  EXPECT_EQ(p.content, "Answer");
  // <think> later in the text is not reasoning.
  p = parse_output("Answer <think>x</think> done");
  EXPECT_EQ(p.reasoning_content, "");
  EXPECT_EQ(p.content, "Answer <think>x</think> done");
}

TEST(ChatOutputParse, ThinkingOpenedInThePrompt) {
  ParsedOutput p = parse_output("Let me add.\nTwo and two.\n</think>\n\n4", thinking_opts());
  EXPECT_EQ(p.reasoning_content, "Let me add.\nTwo and two.");
  EXPECT_EQ(p.content, "4");
  // Cut off before </think>: all of it is reasoning.
  p = parse_output("\nstill thinking about </thi", thinking_opts());
  EXPECT_EQ(p.reasoning_content, "still thinking about </thi");
  EXPECT_EQ(p.content, "");
}

TEST(ChatOutputParse, PromptEndsInThinking) {
  EXPECT_TRUE(prompt_ends_in_thinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_ends_in_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_ends_in_thinking("<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_ends_in_thinking("<think>a</think>b<|im_start|>assistant\n"));
}

TEST(ChatOutputParse, OneToolCall) {
  ParsedOutput p = parse_output("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, 2.5]}}\n</tool_call>");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city": "Paris", "n": [1, 2.5]})");
  EXPECT_EQ(p.tool_calls[0].id, "call_0");
  EXPECT_EQ(p.to_openai_message().dump(),
            R"({"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"n\": [1, 2.5]}"}}]})");
}

TEST(ChatOutputParse, MultipleToolCallsWithThinkingAndContent) {
  OutputParserOptions o;
  o.id_prefix = "chatcmpl-7-";
  ParsedOutput p = parse_output(
      "<think>\nNeed both.\n</think>\n\nI'll check both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": \"é\\n\"}}\n</tool_call>",
      o);
  EXPECT_EQ(p.reasoning_content, "Need both.");
  EXPECT_EQ(p.content, "I'll check both.");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].name, "a");
  EXPECT_EQ(p.tool_calls[0].arguments, "{}");
  EXPECT_EQ(p.tool_calls[0].id, "chatcmpl-7-0");
  EXPECT_EQ(p.tool_calls[1].name, "b");
  EXPECT_EQ(p.tool_calls[1].arguments, "{\"x\": \"é\\n\"}");
  EXPECT_EQ(p.tool_calls[1].index, 1u);
  EXPECT_EQ(p.tool_calls[1].id, "chatcmpl-7-1");
}

TEST(ChatOutputParse, MalformedToolCallsStayContent) {
  const std::string texts[] = {
      "Text\n<tool_call>\n{\"name\": \"f\", \"arguments\": {oops}\n</tool_call>",
      "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
      "<tool_call>\n{\"name\": 3}\n</tool_call>",
      "<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>",
      "<tool_call>\n<function=f>\nstray\n</function>\n</tool_call>",
      "Cut off: <tool_call>\n{\"name\": \"f\", \"argu",
  };
  for (const std::string& t : texts) {
    SCOPED_TRACE(t);
    ParsedOutput p = parse_output(t);
    EXPECT_EQ(p.content, t);
    EXPECT_TRUE(p.tool_calls.empty());
  }
  // A malformed call between good ones keeps its place and whitespace.
  ParsedOutput p = parse_output("A <tool_call>bad</tool_call> B <tool_call>{\"name\": \"g\"}</tool_call>");
  EXPECT_EQ(p.content, "A <tool_call>bad</tool_call> B");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, "{}");
  EXPECT_EQ(p.tool_calls[0].id, "call_0");
}

TEST(ChatOutputParse, ToolCallsOffLeavesTagsInContent) {
  OutputParserOptions o;
  o.parse_tool_calls = false;
  const std::string t = "x <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  ParsedOutput p = parse_output(t, o);
  EXPECT_EQ(p.content, t);
  EXPECT_TRUE(p.tool_calls.empty());
}

TEST(ChatOutputParse, XmlToolCallsTypedBySchema) {
  OutputParserOptions o;
  o.tools = weather_tools();
  ParsedOutput p = parse_output(
      "Checking.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"a\": [1, \"x\"]}\n</parameter>\n"
      "<parameter=flag>\nTrue\n</parameter>\n<parameter=note>\n42\n</parameter>\n<parameter=extra>\nline 1\nline 2\n</parameter>\n"
      "</function>\n</tool_call>",
      o);
  EXPECT_EQ(p.content, "Checking.");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments,
            R"({"city": "New York", "days": 3, "opts": {"a": [1, "x"]}, "flag": true, "note": "42", "extra": "line 1\nline 2"})");
  // The same call for a function the tools do not describe: values stay strings.
  p = parse_output("<tool_call>\n<function=other>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>", o);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"days": "3"})");
}

TEST(ChatOutputParse, ArgumentsGivenAsAString) {
  ParsedOutput p = parse_output("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}</tool_call>");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, "{\"a\":1}");
}

// ---- streaming ----

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    size_t n = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// Feeds `text` cut at the given positions and collects the deltas.
ParsedOutput stream(const std::string& text, const std::vector<size_t>& cuts, const OutputParserOptions& o,
                    bool* deltas_valid_utf8) {
  StreamingOutputParser parser(o);
  ParsedOutput out;
  auto take = [&](OutputDelta d) {
    if (!valid_utf8(d.content) || !valid_utf8(d.reasoning_content)) *deltas_valid_utf8 = false;
    out.content += d.content;
    out.reasoning_content += d.reasoning_content;
    for (auto& c : d.tool_calls) out.tool_calls.push_back(c);
  };
  size_t prev = 0;
  for (size_t c : cuts) {
    take(parser.feed(std::string_view(text).substr(prev, c - prev)));
    prev = c;
  }
  take(parser.feed(std::string_view(text).substr(prev)));
  take(parser.finish());
  return out;
}

void expect_same(const ParsedOutput& a, const ParsedOutput& b) {
  EXPECT_EQ(a.content, b.content);
  EXPECT_EQ(a.reasoning_content, b.reasoning_content);
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size());
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name);
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments);
    EXPECT_EQ(a.tool_calls[i].id, b.tool_calls[i].id);
    EXPECT_EQ(a.tool_calls[i].index, b.tool_calls[i].index);
  }
}

TEST(ChatOutputStream, EverySplitGivesTheWholeTextResult) {
  const std::string corpus[] = {
      "Hello there, 你好 ✓ wörld.",
      "<think>\nLet me think, 思考.\n\n</think>\n\nThe answer is 4.  ",
      "  \n<think>x</think>y",
      "<thin",
      "<thinking is not a tag",
      "Reasoning first ✓\n</think>\n\nthen <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"é\"}}\n</tool_call>\n",
      "I'll call.\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\"}\n</tool_call>\n\ntail",
      "x <tool_call>broken</tool_call> y <tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
      "cut <tool_call>\n{\"name\": \"f\"",
      "</think> no open tag <tool_ <tool_call <tool_call>",
      "\xe4\xbd\xa0\xe5\xa5\xbd</think>\xe4\xbd\xa0 <tool_call>{\"name\": \"\xe4\xbd\xa0\"}</tool_call>",
  };
  OutputParserOptions plain;
  OutputParserOptions thinking = thinking_opts();
  OutputParserOptions no_tools;
  no_tools.parse_tool_calls = false;
  OutputParserOptions typed;
  typed.tools = weather_tools();
  for (const OutputParserOptions* o : {&plain, &thinking, &no_tools, &typed}) {
    for (const std::string& text : corpus) {
      SCOPED_TRACE(text);
      ParsedOutput whole = parse_output(text, *o);
      bool utf8_ok = true;
      for (size_t i = 0; i <= text.size(); ++i) expect_same(stream(text, {i}, *o, &utf8_ok), whole);
      std::vector<size_t> every_byte;
      for (size_t i = 1; i < text.size(); ++i) every_byte.push_back(i);
      expect_same(stream(text, every_byte, *o, &utf8_ok), whole);
      std::mt19937 rng(7);
      for (int r = 0; r < 20; ++r) {
        std::vector<size_t> cuts;
        for (size_t i = 1; i < text.size(); ++i)
          if (rng() % 3 == 0) cuts.push_back(i);
        expect_same(stream(text, cuts, *o, &utf8_ok), whole);
      }
      EXPECT_TRUE(utf8_ok) << "a delta split a UTF-8 character";
    }
  }
}

TEST(ChatOutputStream, HoldsBackOnlyWhatMayBeATag) {
  StreamingOutputParser p;
  EXPECT_EQ(p.feed("Hello").content, "Hello");
  EXPECT_EQ(p.feed(" wor").content, " wor");
  EXPECT_EQ(p.feed("ld <tool").content, "ld");  // " <tool" may open a tool call
  EXPECT_EQ(p.feed("box").content, " <toolbox");
  OutputDelta d = p.feed(" <tool_call>{\"name\": \"f\"}</tool_c");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.tool_calls.empty());
  d = p.feed("all>\nafter");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.content, "after");
  EXPECT_TRUE(p.finish().empty());
  EXPECT_TRUE(p.feed("ignored after finish").empty());

  StreamingOutputParser t(thinking_opts());
  d = t.feed("\nstep one</thi");
  EXPECT_EQ(d.reasoning_content, "step one");
  d = t.feed("nk>\n\nfinal");
  EXPECT_EQ(d.reasoning_content, "");
  EXPECT_EQ(d.content, "final");

  StreamingOutputParser s;
  EXPECT_TRUE(s.feed("<thi").empty());  // might open reasoning
  d = s.feed("nk>abc");
  EXPECT_EQ(d.reasoning_content, "abc");
  EXPECT_EQ(d.content, "");
}

}  // namespace
