#include "serve/tokenize_api.h"

#include <fmt/format.h>

#include "serve/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve {

namespace {

bool flag(const ojson& req, const char* key, bool def) {
  auto it = req.find(key);
  if (it == req.end() || it->is_null()) return def;
  if (!it->is_boolean()) throw bad(key, fmt::format("'{}' must be a boolean", key));
  return it->get<bool>();
}

}  // namespace

ojson tokenize_request(std::string_view body, const ModelInfo& model) {
  const ojson req = parse_body(body);
  check_model(req, model);
  const Tokenizer& tok = *model.tokenizer;
  std::vector<int32_t> ids;
  if (req.contains("messages") && !req["messages"].is_null()) {
    const ojson& m = req["messages"];
    if (!m.is_array() || m.empty()) throw bad("messages", "'messages' must be a non-empty array of messages");
    try {
      ids = chat_prompt(req, model).tokens;
    } catch (const ojson::exception& e) {  // a message of the wrong shape for the template
      throw bad("messages", fmt::format("malformed messages: {}", e.what()));
    }
    if (flag(req, "add_special_tokens", true)) add_bos(ids, tok);
  } else {
    const char* key = req.contains("prompt") ? "prompt" : "content";
    auto it = req.find(key);
    if (it == req.end() || !it->is_string())
      throw bad("prompt", "'prompt' (or 'content') must be a string, or 'messages' an array of messages");
    const std::string& text = it->get_ref<const std::string&>();
    // The text is a raw prompt, as /v1/completions takes it: control-token text is parsed.
    ids = tok.encode(text, /*parse_special=*/true);
    const bool add = req.contains("add_special") ? flag(req, "add_special", false) : flag(req, "add_special_tokens", true);
    if (add) add_bos(ids, tok);
  }
  ojson out = ojson::object();
  out["count"] = ids.size();
  out["max_model_len"] = model.ctx;
  out["tokens"] = ids;
  if (flag(req, "return_token_strs", false)) {
    ojson strs = ojson::array();
    for (int32_t id : ids) strs.push_back(tok.token_bytes(id));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  return out;
}

ojson detokenize_request(std::string_view body, const ModelInfo& model) {
  const ojson req = parse_body(body);
  check_model(req, model);
  auto it = req.find("tokens");
  if (it == req.end() || !it->is_array()) throw bad("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(it->size());
  for (const auto& x : *it) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= model.n_vocab)
      throw bad("tokens", fmt::format("'tokens' must hold integers in [0, {})", model.n_vocab));
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  const std::string text = model.tokenizer->decode(ids);
  ojson out = ojson::object();
  out["prompt"] = text;
  out["content"] = text;
  return out;
}

}  // namespace memra::serve
