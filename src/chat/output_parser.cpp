// Model output -> reasoning / content / tool calls (see output_parser.h).
//
// One state machine serves both the streaming and the whole-text parser (parse_output feeds the
// text in one piece), so the two agree by construction; what the machine must guarantee is that
// its decisions never depend on where chunks were split. It therefore only consumes text that
// can no longer change meaning: a suffix that could be the start of a tag is held back, and so
// is trailing whitespace (which is dropped if a tag follows it) and an incomplete UTF-8
// character (so that every delta is valid UTF-8).
#include "chat/output_parser.h"

#include <algorithm>

#include "chat/jinja_value.h"

namespace memra::chat {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

// Length of the longest proper prefix of `tag` that `s` ends with.
size_t partial_suffix(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(s.size(), tag.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

// Moves `end` back over trailing whitespace.
size_t rstrip_pos(std::string_view s, size_t end) {
  while (end > 0 && is_ws(s[end - 1])) --end;
  return end;
}

// Moves `end` back to the start of a UTF-8 character that is cut off at `end`.
size_t utf8_safe_end(std::string_view s, size_t end) {
  size_t start = end;
  for (int k = 0; k < 4 && start > 0; ++k) {
    auto b = static_cast<unsigned char>(s[start - 1]);
    --start;
    if ((b & 0xC0) != 0x80) {
      size_t len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
      return start + len > end ? start : end;
    }
  }
  return end;  // only continuation bytes: invalid UTF-8, passed through
}

// json.dumps(value, ensure_ascii=False): the formatting templates use when they print arguments.
bool dumps(const ojson& value, std::string& out) {
  try {
    jinja::dump_json(jinja::from_json(value), jinja::JsonStyle{}, out);
    return true;
  } catch (const jinja::EvalFailure&) {
    return false;  // nested too deeply
  }
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return s;
}

}  // namespace

// ---- ParsedOutput ----

ojson ParsedOutput::to_openai_message() const {
  ojson m = ojson::object();
  m["role"] = "assistant";
  if (content.empty() && !tool_calls.empty()) m["content"] = nullptr;
  else m["content"] = content;
  if (!reasoning_content.empty()) m["reasoning_content"] = reasoning_content;
  if (!tool_calls.empty()) {
    ojson calls = ojson::array();
    for (auto& c : tool_calls)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

ParsedOutput parse_output(std::string_view text, const OutputParserOptions& options) {
  StreamingOutputParser p(options);
  ParsedOutput out;
  for (OutputDelta d : {p.feed(text), p.finish()}) {
    out.content += d.content;
    out.reasoning_content += d.reasoning_content;
    for (auto& c : d.tool_calls) out.tool_calls.push_back(std::move(c));
  }
  return out;
}

bool prompt_ends_in_thinking(std::string_view prompt) {
  size_t open = prompt.rfind(kThinkOpen);
  if (open == std::string_view::npos) return false;
  return prompt.find(kThinkClose, open) == std::string_view::npos;
}

// ---- StreamingOutputParser ----

StreamingOutputParser::StreamingOutputParser(OutputParserOptions options)
    : options_(std::move(options)), state_(options_.starts_in_thinking ? State::Reasoning : State::Start) {
  strip_leading_ = options_.starts_in_thinking;
  if (!options_.tools.is_array()) return;
  for (auto& t : options_.tools) {
    const ojson& f = (t.is_object() && t.contains("function")) ? t["function"] : t;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
    auto& types = param_types_[f["name"].get<std::string>()];
    if (!f.contains("parameters") || !f["parameters"].is_object()) continue;
    const ojson& params = f["parameters"];
    if (!params.contains("properties") || !params["properties"].is_object()) continue;
    for (auto it = params["properties"].begin(); it != params["properties"].end(); ++it) {
      const ojson& schema = it.value();
      std::string type = "string";
      if (schema.is_object() && schema.contains("type")) {
        const ojson& ty = schema["type"];
        if (ty.is_string()) type = lower(ty.get<std::string>());
        else if (ty.is_array())  // e.g. ["integer", "null"]: the first non-null type
          for (auto& x : ty)
            if (x.is_string() && x.get<std::string>() != "null") {
              type = lower(x.get<std::string>());
              break;
            }
      }
      types[it.key()] = type;
    }
  }
}

OutputDelta StreamingOutputParser::feed(std::string_view chunk) {
  OutputDelta out;
  if (finished_) return out;
  pending_.append(chunk);
  step(out, false);
  return out;
}

OutputDelta StreamingOutputParser::finish() {
  OutputDelta out;
  if (finished_) return out;
  step(out, true);
  finished_ = true;
  return out;
}

void StreamingOutputParser::step(OutputDelta& out, bool at_end) {
  for (;;) {
    bool moved = false;
    switch (state_) {
      case State::Start: moved = step_start(at_end); break;
      case State::Reasoning: moved = step_reasoning(out, at_end); break;
      case State::Content: moved = step_content(out, at_end); break;
      case State::ToolCall: moved = step_tool_call(out, at_end); break;
    }
    if (!moved) return;
  }
}

namespace {
// Appends `text` to `dst`, first dropping leading whitespace while `strip_leading` is set.
void emit(std::string& dst, std::string_view text, bool& strip_leading) {
  if (strip_leading) {
    while (!text.empty() && is_ws(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    strip_leading = false;
  }
  dst.append(text);
}
}  // namespace

// Before anything is classified: does the output open a <think> block?
bool StreamingOutputParser::step_start(bool at_end) {
  size_t i = 0;
  while (i < pending_.size() && is_ws(pending_[i])) ++i;
  std::string_view rest = std::string_view(pending_).substr(i);
  if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
    pending_.erase(0, i + kThinkOpen.size());
    state_ = State::Reasoning;
    strip_leading_ = true;
    return true;
  }
  bool may_still_open = rest.size() < kThinkOpen.size() && kThinkOpen.substr(0, rest.size()) == rest;
  if (may_still_open && !at_end) return false;
  state_ = State::Content;
  return true;
}

bool StreamingOutputParser::step_reasoning(OutputDelta& out, bool at_end) {
  size_t close = pending_.find(kThinkClose);
  if (close != std::string::npos) {
    emit(out.reasoning_content, std::string_view(pending_).substr(0, rstrip_pos(pending_, close)), strip_leading_);
    pending_.erase(0, close + kThinkClose.size());
    state_ = State::Content;
    strip_leading_ = true;
    return true;
  }
  if (at_end) {
    // Cut off inside the reasoning: it is all reasoning, trimmed.
    emit(out.reasoning_content, std::string_view(pending_).substr(0, rstrip_pos(pending_, pending_.size())), strip_leading_);
    pending_.clear();
    return false;
  }
  size_t safe = pending_.size() - partial_suffix(pending_, kThinkClose);
  size_t cut = utf8_safe_end(pending_, rstrip_pos(pending_, safe));
  emit(out.reasoning_content, std::string_view(pending_).substr(0, cut), strip_leading_);
  pending_.erase(0, cut);
  return false;
}

bool StreamingOutputParser::step_content(OutputDelta& out, bool at_end) {
  if (options_.parse_tool_calls) {
    size_t open = pending_.find(kCallOpen);
    if (open != std::string::npos) {
      size_t cut = rstrip_pos(pending_, open);
      emit(out.content, std::string_view(pending_).substr(0, cut), strip_leading_);
      held_ws_ = pending_.substr(cut, open - cut);
      pending_.erase(0, open + kCallOpen.size());
      state_ = State::ToolCall;
      return true;
    }
  }
  if (at_end) {
    emit(out.content, pending_, strip_leading_);
    pending_.clear();
    return false;
  }
  size_t safe = pending_.size() - (options_.parse_tool_calls ? partial_suffix(pending_, kCallOpen) : 0);
  size_t cut = utf8_safe_end(pending_, rstrip_pos(pending_, safe));
  emit(out.content, std::string_view(pending_).substr(0, cut), strip_leading_);
  pending_.erase(0, cut);
  return false;
}

bool StreamingOutputParser::step_tool_call(OutputDelta& out, bool at_end) {
  size_t close = pending_.find(kCallClose);
  if (close == std::string::npos) {
    if (!at_end) return false;
    // Cut off inside a tool call: keep what the model wrote, as content.
    std::string raw = held_ws_ + std::string(kCallOpen) + pending_;
    held_ws_.clear();
    pending_.clear();
    emit(out.content, raw, strip_leading_);
    state_ = State::Content;
    return false;
  }
  ToolCall call;
  if (parse_call(std::string_view(pending_).substr(0, close), call)) {
    call.index = n_calls_++;
    call.id = options_.id_prefix + std::to_string(call.index);
    out.tool_calls.push_back(std::move(call));
    strip_leading_ = true;
  } else {
    std::string raw = held_ws_ + std::string(kCallOpen) + pending_.substr(0, close + kCallClose.size());
    emit(out.content, raw, strip_leading_);
  }
  held_ws_.clear();
  pending_.erase(0, close + kCallClose.size());
  state_ = State::Content;
  return true;
}

bool StreamingOutputParser::parse_call(std::string_view body, ToolCall& call) const {
  std::string_view b = trim(body);
  constexpr std::string_view kFunction = "<function=";
  if (b.substr(0, kFunction.size()) != kFunction) {
    // Qwen3: {"name": ..., "arguments": {...}}
    ojson j = ojson::parse(b, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty())
      return false;
    // By reference: model output may nest deeply, and copying JSON recurses per level.
    static const ojson kEmpty = ojson::object();
    const ojson* args = j.contains("arguments") ? &j["arguments"] : j.contains("parameters") ? &j["parameters"] : &kEmpty;
    if (args->is_null()) args = &kEmpty;
    if (args->is_string()) {
      // Arguments already encoded as a string: accepted when it holds a JSON object.
      if (!ojson::parse(args->get<std::string>(), nullptr, false).is_object()) return false;
      call.arguments = args->get<std::string>();
    } else if (!args->is_object() || !dumps(*args, call.arguments)) {
      return false;
    }
    call.name = j["name"].get<std::string>();
    return true;
  }
  // Qwen3.5: <function=NAME> (<parameter=P>\nVALUE\n</parameter>)* </function>
  size_t gt = b.find('>');
  if (gt == std::string_view::npos) return false;
  std::string name(b.substr(kFunction.size(), gt - kFunction.size()));
  if (name.empty() || name.find_first_of("<\n") != std::string::npos) return false;
  auto types_it = param_types_.find(name);
  ojson args = ojson::object();
  std::string_view rest = b.substr(gt + 1);
  constexpr std::string_view kParam = "<parameter=", kParamEnd = "</parameter>", kFunctionEnd = "</function>";
  for (;;) {
    while (!rest.empty() && is_ws(rest.front())) rest.remove_prefix(1);
    if (rest.substr(0, kFunctionEnd.size()) == kFunctionEnd) {
      rest.remove_prefix(kFunctionEnd.size());
      break;
    }
    if (rest.substr(0, kParam.size()) != kParam) return false;
    size_t pgt = rest.find('>');
    size_t pend = rest.find(kParamEnd);
    if (pgt == std::string_view::npos || pend == std::string_view::npos || pend < pgt) return false;
    std::string pname(rest.substr(kParam.size(), pgt - kParam.size()));
    if (pname.empty() || pname.find_first_of("<\n") != std::string::npos) return false;
    std::string_view value = rest.substr(pgt + 1, pend - pgt - 1);
    // The template writes "\n" + value + "\n".
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    std::string type = "string";
    if (types_it != param_types_.end()) {
      auto t = types_it->second.find(pname);
      if (t != types_it->second.end()) type = t->second;
    }
    ojson typed = std::string(value);
    if (type != "string" && type != "str" && type != "text") {
      ojson parsed = ojson::parse(trim(value), nullptr, false);
      if (!parsed.is_discarded()) typed = std::move(parsed);
      else if (type == "boolean" && (lower(std::string(trim(value))) == "true" || lower(std::string(trim(value))) == "false"))
        typed = lower(std::string(trim(value))) == "true";
    }
    args[pname] = std::move(typed);
    rest.remove_prefix(pend + kParamEnd.size());
  }
  if (!trim(rest).empty()) return false;
  if (!dumps(args, call.arguments)) return false;
  call.name = std::move(name);
  return true;
}

}  // namespace memra::chat
