#include "serve/chat_prompt.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve {

const std::vector<std::string> kTemplateKwargs = {"enable_thinking", "thinking", "reasoning_effort"};

namespace {

// Control-token texts by first byte, for scanning.
struct ControlIndex {
  explicit ControlIndex(const ModelInfo& m) : tokens(m.control_tokens) {
    for (const auto& [text, id] : tokens) first[static_cast<uint8_t>(text[0])] = true;
  }
  // The longest control token starting at s[i], or null.
  const std::pair<std::string, int32_t>* at(std::string_view s, size_t i) const {
    if (!first[static_cast<uint8_t>(s[i])]) return nullptr;
    for (const auto& t : tokens)  // longest first
      if (s.size() - i >= t.first.size() && s.compare(i, t.first.size(), t.first) == 0) return &t;
    return nullptr;
  }
  bool any_in(std::string_view s) const {
    for (size_t i = 0; i < s.size(); ++i)
      if (at(s, i)) return true;
    return false;
  }
  const std::vector<std::pair<std::string, int32_t>>& tokens;
  std::array<bool, 256> first{};
};

bool has_control_text(const ojson& v, const ControlIndex& ix) {
  if (v.is_string()) return ix.any_in(v.get_ref<const std::string&>());
  if (v.is_array()) return std::any_of(v.begin(), v.end(), [&](const ojson& x) { return has_control_text(x, ix); });
  if (v.is_object())
    for (auto it = v.begin(); it != v.end(); ++it)
      if (ix.any_in(it.key()) || has_control_text(it.value(), ix)) return true;
  return false;
}

// The string with the first byte of every control-token occurrence replaced by `filler`.
std::string defuse(std::string_view s, const ControlIndex& ix, char filler) {
  std::string out(s);
  for (size_t i = 0; i < out.size();) {
    if (const auto* t = ix.at(out, i)) {
      out[i] = filler;
      i += t->first.size();
    } else {
      ++i;
    }
  }
  return out;
}

ojson defused(const ojson& v, const ControlIndex& ix, char filler) {
  if (v.is_string()) return defuse(v.get_ref<const std::string&>(), ix, filler);
  if (v.is_array()) {
    ojson a = ojson::array();
    for (const auto& x : v) a.push_back(defused(x, ix, filler));
    return a;
  }
  if (v.is_object()) {
    ojson o = ojson::object();
    for (auto it = v.begin(); it != v.end(); ++it) o[defuse(it.key(), ix, filler)] = defused(it.value(), ix, filler);
    return o;
  }
  return v;
}

std::string render(const ojson& request, const ModelInfo& model) {
  try {
    std::lock_guard<std::mutex> lk(*model.template_mutex);
    return model.chat_template->render(request, model.template_options);
  } catch (const Error& e) {
    throw bad("messages", fmt::format("cannot render the chat template for these messages: {}", e.what()));
  }
}

void check_kwargs(const ojson& request) {
  auto it = request.find("chat_template_kwargs");
  if (it == request.end() || it->is_null()) return;
  if (!it->is_object()) throw bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
  for (auto kw = it->begin(); kw != it->end(); ++kw) {
    if (std::find(kTemplateKwargs.begin(), kTemplateKwargs.end(), kw.key()) == kTemplateKwargs.end())
      throw bad("chat_template_kwargs", fmt::format("'chat_template_kwargs' may set only {}; got '{}'",
                                                    fmt::join(kTemplateKwargs, ", "), kw.key()));
    if (!kw.value().is_boolean() && !kw.value().is_string() && !kw.value().is_number())
      throw bad("chat_template_kwargs", fmt::format("'chat_template_kwargs.{}' must be a boolean, a string or a number",
                                                    kw.key()));
  }
}

}  // namespace

void index_vocab(ModelInfo& model) {
  const Tokenizer& tok = *model.tokenizer;
  model.control_tokens.clear();
  model.max_token_bytes = 1;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const std::string& text = tok.token_bytes(id);
    if (tok.is_special(id)) {
      if (!text.empty()) model.control_tokens.emplace_back(text, id);
    } else {
      model.max_token_bytes = std::max(model.max_token_bytes, text.size());
    }
  }
  std::stable_sort(model.control_tokens.begin(), model.control_tokens.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

size_t text_bytes(const ojson& v) {
  if (v.is_string()) return v.get_ref<const std::string&>().size();
  size_t n = 0;
  if (v.is_array())
    for (const auto& x : v) n += text_bytes(x);
  if (v.is_object())
    for (auto it = v.begin(); it != v.end(); ++it)
      if (it.key() != "type") n += text_bytes(it.value());  // a part's "type" ("text") is not rendered
  return n;
}

void check_text_fits(size_t bytes, const ModelInfo& model, const char* param) {
  if (model.max_token_bytes == 0 || model.ctx <= 0) return;
  const size_t least = bytes / model.max_token_bytes;
  if (least >= static_cast<size_t>(model.ctx))
    throw bad(param,
              fmt::format("This model's maximum context length is {} tokens, but the request holds {} bytes of text, "
                          "at least {} tokens; shorten it (or start the server with a larger --ctx)",
                          model.ctx, bytes, least),
              "context_length_exceeded");
}

ChatPrompt chat_prompt(const ojson& request, const ModelInfo& model) {
  check_kwargs(request);
  if (auto agp = request.find("add_generation_prompt"); agp != request.end() && !agp->is_null() && !agp->is_boolean())
    throw bad("add_generation_prompt", "'add_generation_prompt' must be a boolean");
  if (!model.chat_template)
    throw bad("messages", "this model has no chat template (tokenizer.chat_template); use /v1/completions");
  // Only text every template renders whole: the content of non-assistant messages (templates may
  // drop an earlier assistant turn's reasoning), string values only (keys are not rendered).
  size_t bytes = 0;
  if (auto it = request.find("messages"); it != request.end() && it->is_array())
    for (const auto& m : *it)
      if (m.is_object() && m.contains("content") && !(m.contains("role") && m["role"] == "assistant"))
        bytes += text_bytes(m["content"]);
  check_text_fits(bytes, model, "messages");

  ChatPrompt p;
  p.text = render(request, model);
  const Tokenizer& tok = *model.tokenizer;
  const ControlIndex ix(model);
  if (model.control_tokens.empty() || !has_control_text(request, ix)) {
    // Every control-token text in the rendering is the template's.
    p.tokens = tok.encode(p.text, /*parse_special=*/true);
    return p;
  }
  // A byte no control token starts with, so defusing cannot create a new one.
  char filler = 0;
  for (char c : std::string_view("#~^%@")) {
    if (!ix.first[static_cast<uint8_t>(c)]) {
      filler = c;
      break;
    }
  }
  const std::string plain = filler ? render(defused(request, ix, filler), model) : std::string();
  if (!filler || plain.size() != p.text.size())
    throw bad("messages", "the messages hold control-token text (such as \"<|im_start|>\") that this model's template "
                          "does not keep apart from its own; remove it");
  // The control tokens of the defused rendering are the template's: only those are parsed.
  size_t seg = 0;
  for (size_t i = 0; i < plain.size();) {
    const auto* t = ix.at(plain, i);
    if (!t || p.text.compare(i, t->first.size(), t->first) != 0) {
      ++i;
      continue;
    }
    const std::vector<int32_t> part = tok.encode(std::string_view(p.text).substr(seg, i - seg), /*parse_special=*/false);
    p.tokens.insert(p.tokens.end(), part.begin(), part.end());
    p.tokens.push_back(t->second);
    i += t->first.size();
    seg = i;
  }
  const std::vector<int32_t> tail = tok.encode(std::string_view(p.text).substr(seg), /*parse_special=*/false);
  p.tokens.insert(p.tokens.end(), tail.begin(), tail.end());
  return p;
}

}  // namespace memra::serve
