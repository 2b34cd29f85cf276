// OpenAI-style request -> template variables -> prompt (see chat_template.h).
#include "chat/chat_template.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"

namespace memra::chat {

using ojson = nlohmann::ordered_json;

namespace {

// Requests nested deeper than this are refused before anything copies them (copying and
// converting JSON recurse once per level).
constexpr size_t kMaxRequestNesting = 128;

bool nested_deeper_than(const ojson& j, size_t limit) {
  std::vector<std::pair<const ojson*, size_t>> stack{{&j, 1}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (depth > limit) return true;
    if (node->is_structured())
      for (const ojson& child : *node) stack.emplace_back(&child, depth + 1);
  }
  return false;
}

std::string content_text(const ojson& content, size_t msg_index) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    fail("request.messages[{}].content must be a string or a list of content parts, got {}", msg_index,
         content.type_name());
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& part = content[j];
    if (part.is_string()) {
      text += part.get<std::string>();
      continue;
    }
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      fail("request.messages[{}].content[{}] must be an object with a string 'type'", msg_index, j);
    std::string type = part["type"].get<std::string>();
    if (type != "text")
      fail("request.messages[{}].content[{}]: content part type '{}' is not supported (only text)", msg_index, j,
           type);
    if (!part.contains("text") || !part["text"].is_string())
      fail("request.messages[{}].content[{}]: a text part needs a string 'text'", msg_index, j);
    text += part["text"].get<std::string>();
  }
  return text;
}

// arguments as sent on the wire (a JSON string) -> the object templates expect.
void parse_arguments(ojson& holder) {
  if (!holder.is_object()) return;
  auto it = holder.find("arguments");
  if (it == holder.end() || !it->is_string()) return;
  ojson parsed = ojson::parse(it->get<std::string>(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) *it = std::move(parsed);
}

ojson normalise_message(const ojson& m, size_t i) {
  if (!m.is_object()) fail("request.messages[{}] must be an object, got {}", i, m.type_name());
  if (!m.contains("role") || !m["role"].is_string()) fail("request.messages[{}].role must be a string", i);
  ojson out = m;
  out["content"] = content_text(m.contains("content") ? m["content"] : ojson(), i);
  if (out.contains("tool_calls") && out["tool_calls"].is_array()) {
    for (auto& call : out["tool_calls"]) {
      if (!call.is_object()) continue;
      if (call.contains("function")) parse_arguments(call["function"]);
      parse_arguments(call);
    }
  }
  return out;
}

}  // namespace

ojson chat_template_variables(const ojson& request, const ChatTemplateOptions& options) {
  if (!request.is_object()) fail("the chat request must be a JSON object, got {}", request.type_name());
  if (nested_deeper_than(request, kMaxRequestNesting))
    fail("the chat request is nested more than {} levels deep", kMaxRequestNesting);
  if (!request.contains("messages") || !request["messages"].is_array())
    fail("request.messages must be a list of messages");
  const ojson& msgs = request["messages"];
  if (msgs.empty()) fail("request.messages is empty; give at least one message");

  ojson vars = ojson::object();
  ojson messages = ojson::array();
  for (size_t i = 0; i < msgs.size(); ++i) messages.push_back(normalise_message(msgs[i], i));
  vars["messages"] = std::move(messages);

  ojson tools = request.contains("tools") ? request["tools"] : ojson();
  if (!tools.is_null() && !tools.is_array()) fail("request.tools must be a list of tools, got {}", tools.type_name());
  vars["tools"] = std::move(tools);
  vars["documents"] = nullptr;

  bool add_generation_prompt = true;
  if (request.contains("add_generation_prompt")) {
    const ojson& agp = request["add_generation_prompt"];
    if (!agp.is_boolean()) fail("request.add_generation_prompt must be true or false");
    add_generation_prompt = agp.get<bool>();
  }
  vars["add_generation_prompt"] = add_generation_prompt;
  if (options.bos_token) vars["bos_token"] = *options.bos_token;
  if (options.eos_token) vars["eos_token"] = *options.eos_token;

  if (request.contains("chat_template_kwargs") && !request["chat_template_kwargs"].is_null()) {
    const ojson& kw = request["chat_template_kwargs"];
    if (!kw.is_object()) fail("request.chat_template_kwargs must be an object");
    for (auto it = kw.begin(); it != kw.end(); ++it) {
      const std::string& k = it.key();
      if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt")
        fail("request.chat_template_kwargs may not set '{}'; use the request field instead", k);
      vars[k] = it.value();
    }
  }
  return vars;
}

ChatTemplate::ChatTemplate(std::string_view source) : template_(source) {}

std::string ChatTemplate::render(const ojson& request, const ChatTemplateOptions& options) const {
  return template_.render(chat_template_variables(request, options), options.limits);
}

std::string render_chat(std::string_view template_src, const ojson& request, const ChatTemplateOptions& options) {
  return ChatTemplate(template_src).render(request, options);
}

}  // namespace memra::chat
