// Chat templates end to end: the fixture cases rendered with the template stored in the GGUF,
// request normalisation (OpenAI shapes -> template variables), the tiny models' templates, and
// the `memra template` command.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "gguf/gguf.h"
#include "test_util.h"

namespace {

using memra::chat::ChatTemplate;
using memra::chat::ChatTemplateOptions;
using memra::chat::chat_template_variables;
using memra::chat::render_chat;
using ojson = nlohmann::ordered_json;

std::string model_template(const std::string& fixture) {
  auto f = memra::gguf::File::open(memra::test::fixture(fixture));
  return std::string(f->get_string("tokenizer.chat_template"));
}

ojson read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return ojson::parse(in);
}

// A fixture case (messages, tools, add_generation_prompt, enable_thinking) as the OpenAI-style
// request a client would send.
ojson request_of_case(const ojson& c) {
  ojson req = ojson::object();
  req["messages"] = c["messages"];
  if (c.contains("tools")) req["tools"] = c["tools"];
  req["add_generation_prompt"] = c["add_generation_prompt"];
  if (c.contains("enable_thinking")) req["chat_template_kwargs"] = {{"enable_thinking", c["enable_thinking"]}};
  return req;
}

TEST(ChatTemplateFixture, QwenCasesRenderByteIdentical) {
  const std::string tpl = model_template("qwen3-vocab.gguf");
  ASSERT_FALSE(tpl.empty());
  ojson cases = read_json(memra::test::fixture("qwen3-chat-template-cases.json"));
  ASSERT_TRUE(cases.contains("cases"));
  ASSERT_GE(cases["cases"].size(), 7u);
  ChatTemplate parsed(tpl);
  ChatTemplateOptions opts;
  opts.eos_token = "<|im_end|>";
  for (size_t i = 0; i < cases["cases"].size(); ++i) {
    const ojson& c = cases["cases"][i];
    SCOPED_TRACE("case " + std::to_string(i));
    ojson req = request_of_case(c);
    EXPECT_EQ(parsed.render(req, opts), c["rendered"].get<std::string>());
    EXPECT_EQ(render_chat(tpl, req, opts), c["rendered"].get<std::string>());
  }
}

// The same conversation sent the way OpenAI clients send it (arguments as a JSON string, content
// as text parts, null content next to tool calls) renders like the fixture's native form.
TEST(ChatTemplateFixture, OpenAiWireShapesRenderLikeNativeShapes) {
  const std::string tpl = model_template("qwen3-vocab.gguf");
  ojson cases = read_json(memra::test::fixture("qwen3-chat-template-cases.json"));
  const ojson* tool_case = nullptr;
  for (auto& c : cases["cases"])
    for (auto& m : c["messages"])
      if (m.contains("tool_calls")) tool_case = &c;
  ASSERT_NE(tool_case, nullptr) << "the fixture has no case with tool calls";
  ojson req = request_of_case(*tool_case);
  for (auto& m : req["messages"]) {
    if (m.contains("tool_calls")) {
      for (auto& call : m["tool_calls"]) call["function"]["arguments"] = call["function"]["arguments"].dump();
      if (m["content"] == "") m["content"] = nullptr;
    } else if (m["content"].is_string()) {
      std::string text = m["content"].get<std::string>();
      size_t half = text.size() / 2;
      m["content"] = ojson::array({{{"type", "text"}, {"text", text.substr(0, half)}}, {{"type", "text"}, {"text", text.substr(half)}}});
    }
  }
  EXPECT_EQ(render_chat(tpl, req), (*tool_case)["rendered"].get<std::string>());
}

TEST(ChatTemplateFixture, TinyModelTemplatesRender) {
  ojson req = ojson::parse(R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})");
  const std::string expected = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  for (const char* f : {"qwen3-tiny.f32.gguf", "qwen35-tiny.f32.gguf", "qwen35moe-tiny.f32.gguf", "qwen3next-tiny.f32.gguf"}) {
    SCOPED_TRACE(f);
    EXPECT_EQ(render_chat(model_template(f), req), expected);
  }
  auto demo = memra::gguf::File::open(memra::test::source_path("models/memra-demo-py-14m.f16.gguf"));
  EXPECT_EQ(render_chat(std::string(demo->get_string("tokenizer.chat_template")), req), expected);
  req["add_generation_prompt"] = false;
  EXPECT_EQ(render_chat(model_template("qwen3-tiny.f32.gguf"), req),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplateRequest, VariablesFollowTransformers) {
  ojson req = ojson::parse(R"({"messages": [{"role": "user", "content": "x"}], "model": "m", "temperature": 0.5})");
  ChatTemplateOptions opts;
  opts.eos_token = "<|im_end|>";
  ojson v = chat_template_variables(req, opts);
  EXPECT_EQ(v.dump(),
            R"({"messages":[{"role":"user","content":"x"}],"tools":null,"documents":null,"add_generation_prompt":true,"eos_token":"<|im_end|>"})");
  // tools is defined but none when the request has none, as in transformers.
  EXPECT_EQ(render_chat("{{ tools is defined }} {{ tools is none }} {{ bos_token is defined }}", req), "True True False");
  req["chat_template_kwargs"] = {{"enable_thinking", false}, {"custom", "c"}};
  req["add_generation_prompt"] = false;
  EXPECT_EQ(render_chat("{{ enable_thinking }} {{ custom }} {{ add_generation_prompt }}", req), "False c False");
}

TEST(ChatTemplateRequest, MessagesAreNormalised) {
  ojson req = ojson::parse(R"({"messages": [
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": [true, null]}"}},
      {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json"}},
      {"id": "c3", "type": "function", "function": {"name": "h", "arguments": "[1, 2]"}}]},
    {"role": "tool", "tool_call_id": "c1"}]})");
  ojson v = chat_template_variables(req);
  const ojson& m = v["messages"];
  EXPECT_EQ(m[0]["content"], "ab");
  EXPECT_EQ(m[1]["content"], "");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"z":1,"a":[true,null]})");
  EXPECT_EQ(m[1]["tool_calls"][1]["function"]["arguments"], "not json");
  EXPECT_EQ(m[1]["tool_calls"][2]["function"]["arguments"], "[1, 2]");
  EXPECT_EQ(m[1]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(m[2]["content"], "");
  EXPECT_EQ(m[2]["tool_call_id"], "c1");
  // Key order inside parsed arguments is kept for tojson.
  EXPECT_EQ(render_chat("{{ messages[1].tool_calls[0].function.arguments|tojson }}", req), R"({"z": 1, "a": [true, null]})");
}

TEST(ChatTemplateRequest, MalformedRequestsAreRejectedWithTheField) {
  struct Case {
    const char* request;
    const char* message;
  };
  const Case cases[] = {
      {R"([])", "the chat request must be a JSON object, got array"},
      {R"({})", "request.messages must be a list of messages"},
      {R"({"messages": []})", "request.messages is empty; give at least one message"},
      {R"({"messages": [1]})", "request.messages[0] must be an object, got number"},
      {R"({"messages": [{"content": "x"}]})", "request.messages[0].role must be a string"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "request.messages[0].content must be a string or a list of content parts, got number"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
       "request.messages[0].content[0]: content part type 'image_url' is not supported (only text)"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", "request.messages[0].content[0]: a text part needs a string 'text'"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "request.tools must be a list of tools, got object"},
      {R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": 1})", "request.add_generation_prompt must be true or false"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": []})", "request.chat_template_kwargs must be an object"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}})",
       "request.chat_template_kwargs may not set 'messages'; use the request field instead"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.request);
    try {
      chat_template_variables(ojson::parse(c.request));
      ADD_FAILURE() << "accepted";
    } catch (const memra::Error& e) {
      EXPECT_STREQ(e.what(), c.message);
    }
  }
  // Deeply nested requests are refused before anything recurses over them.
  const int n = 100000;
  ojson deep = ojson::parse(R"({"messages": [{"role": "user", "content": "x", "extra": )" + std::string(n, '[') +
                            std::string(n, ']') + "}]}");
  EXPECT_THROW(chat_template_variables(deep), memra::Error);
}

TEST(ChatTemplateRequest, TemplateErrorsSurface) {
  ojson req = ojson::parse(R"({"messages": [{"role": "user", "content": "x"}]})");
  EXPECT_THROW(ChatTemplate("{% if %}"), memra::chat::jinja::TemplateError);
  try {
    render_chat("{{ raise_exception('Conversation roles must alternate') }}", req);
    ADD_FAILURE() << "no error";
  } catch (const memra::Error& e) {
    EXPECT_STREQ(e.what(), "chat template rejected the request: Conversation roles must alternate");
  }
}

// ---- memra template ----

struct CommandResult {
  int status = -1;
  std::string out;
};

CommandResult run_command(const std::string& args) {
  std::string cmd = memra::test::memra_binary() + " " + args + " 2>&1";
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string temp_file(const std::string& name, const std::string& content) {
  auto path = std::filesystem::temp_directory_path() / ("memra_chat_test_" + std::to_string(getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

TEST(ChatTemplateCli, PrintsTheRenderedPromptExactly) {
  if (!std::filesystem::exists(memra::test::memra_binary())) GTEST_FAIL() << "memra binary not built: " << memra::test::memra_binary();
  ojson cases = read_json(memra::test::fixture("qwen3-chat-template-cases.json"));
  const ojson& c = cases["cases"][3];  // tools + tool call + tool result
  std::string req = temp_file("req.json", request_of_case(c).dump());
  CommandResult r = run_command("template -m " + memra::test::fixture("qwen3-vocab.gguf") + " --request " + req);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, c["rendered"].get<std::string>());

  std::string tpl = temp_file("t.jinja", "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{{ eos_token }}");
  r = run_command("template -m " + memra::test::fixture("qwen3-vocab.gguf") + " --request " + req + " --template " + tpl);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "[user:Weather in Paris?][assistant:][tool:{\"temp\": 21}]<|im_end|>");

  r = run_command("template --request " + req + " --template " + tpl);  // no model: no eos_token
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "[user:Weather in Paris?][assistant:][tool:{\"temp\": 21}]");
  std::filesystem::remove(tpl);
  std::filesystem::remove(req);
}

TEST(ChatTemplateCli, ReportsErrors) {
  if (!std::filesystem::exists(memra::test::memra_binary())) GTEST_FAIL() << "memra binary not built";
  std::string bad_json = temp_file("bad.json", "{not json");
  CommandResult r = run_command("template -m " + memra::test::fixture("qwen3-vocab.gguf") + " --request " + bad_json);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("is not valid JSON"), std::string::npos) << r.out;
  std::string req = temp_file("ok.json", R"({"messages": [{"role": "user", "content": "x"}]})");
  std::string tpl = temp_file("bad.jinja", "line1\n{% for x in messages %}");
  r = run_command("template --request " + req + " --template " + tpl);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("chat template syntax error at line 2"), std::string::npos) << r.out;
  for (auto& f : {bad_json, req, tpl}) std::filesystem::remove(f);
}

}  // namespace
