#include "serve/openai_api.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <random>

#include "common/error.h"
#include "serve/chat_prompt.h"
#include "serve/constraints.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve {

namespace {

std::string default_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

ApiError::ApiError(int status_, const std::string& message, std::string param_, std::string code_, std::string type_)
    : std::runtime_error(message),
      status(status_),
      type(type_.empty() ? default_type(status_) : std::move(type_)),
      param(std::move(param_)),
      code(std::move(code_)) {}

std::string ApiError::json() const { return error_json(status, what(), param, code, type); }

std::string error_json(int status, const std::string& message, const std::string& param, const std::string& code,
                       const std::string& type) {
  ojson e = ojson::object();
  e["message"] = message;
  e["type"] = type.empty() ? default_type(status) : type;
  e["param"] = param.empty() ? ojson(nullptr) : ojson(param);
  e["code"] = code.empty() ? ojson(nullptr) : ojson(code);
  return dump_json(ojson{{"error", std::move(e)}});
}

std::string dump_json(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

int json_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
    else if (c == ']' || c == '}') depth = std::max(0, depth - 1);
  }
  return max_depth;
}

namespace {

const char* type_name(const ojson& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// The field, or null when it is absent or JSON null (OpenAI treats null as "not given").
const ojson* field(const ojson& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

double number_field(const ojson& obj, const char* key, double lo, double hi, double def) {
  const ojson* v = field(obj, key);
  if (!v) return def;
  if (!v->is_number()) throw bad(key, fmt::format("'{}' must be a number, got {}", key, type_name(*v)));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw bad(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, x));
  return x;
}

int64_t int_field(const ojson& obj, const char* key, int64_t lo, int64_t hi, int64_t def) {
  const ojson* v = field(obj, key);
  if (!v) return def;
  if (!v->is_number_integer())
    throw bad(key, fmt::format("'{}' must be an integer, got {}", key, v->is_number() ? "a fractional number" : type_name(*v)));
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw bad(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, v->get<uint64_t>()));
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) throw bad(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, x));
  return x;
}

bool bool_field(const ojson& obj, const char* key, bool def) {
  const ojson* v = field(obj, key);
  if (!v) return def;
  if (!v->is_boolean()) throw bad(key, fmt::format("'{}' must be a boolean, got {}", key, type_name(*v)));
  return v->get<bool>();
}

}  // namespace

ojson parse_body(std::string_view body) {
  if (json_depth(body) > kMaxJsonDepth)
    throw bad("", fmt::format("request body nests JSON deeper than {} levels", kMaxJsonDepth));
  ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw bad("", "request body is not valid JSON");
  if (!j.is_object()) throw bad("", fmt::format("request body must be a JSON object, got {}", type_name(j)));
  return j;
}

void check_model(const ojson& req, const ModelInfo& model) {
  const ojson* m = field(req, "model");
  if (!m) return;  // lenient: the one served model
  if (!m->is_string()) throw bad("model", fmt::format("'model' must be a string, got {}", type_name(*m)));
  if (m->get<std::string>() != model.name)
    throw ApiError(404, fmt::format("The model '{}' does not exist; this server serves '{}'", m->get<std::string>(), model.name),
                   "model", "model_not_found");
}

namespace {

uint64_t random_seed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lk(mu);
  return rng();
}

// Sampling fields shared by both endpoints.
void parse_sampling(const ojson& req, const ModelInfo& model, GenerationSpec& spec) {
  SamplingParams& p = spec.sampling;
  p.temperature = static_cast<float>(number_field(req, "temperature", 0.0, 2.0, 1.0));
  const double top_p = number_field(req, "top_p", 0.0, 1.0, 1.0);
  if (top_p == 0.0) p.temperature = 0.0f;  // keeping only the most likely token is greedy
  else p.top_p = static_cast<float>(top_p);
  p.top_k = static_cast<int32_t>(int_field(req, "top_k", -1, INT32_MAX, 0));
  if (p.top_k < 0) p.top_k = 0;  // -1: off, as vLLM spells it
  p.min_p = static_cast<float>(number_field(req, "min_p", 0.0, 1.0, 0.0));
  p.presence_penalty = static_cast<float>(number_field(req, "presence_penalty", -2.0, 2.0, 0.0));
  p.frequency_penalty = static_cast<float>(number_field(req, "frequency_penalty", -2.0, 2.0, 0.0));
  p.repetition_penalty = static_cast<float>(number_field(req, "repetition_penalty", 0.01, 10.0, 1.0));
  if (const ojson* s = field(req, "seed")) {
    if (!s->is_number_integer()) throw bad("seed", fmt::format("'seed' must be an integer, got {}", type_name(*s)));
    p.seed = s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
  } else {
    p.seed = random_seed();
  }
  if (const ojson* lb = field(req, "logit_bias")) {
    if (!lb->is_object())
      throw bad("logit_bias", fmt::format("'logit_bias' must be an object of token id -> bias, got {}", type_name(*lb)));
    if (lb->size() > 1024) throw bad("logit_bias", "'logit_bias' may hold at most 1024 entries");
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string& key = it.key();
      int64_t id = -1;
      auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= model.n_vocab)
        throw bad("logit_bias", fmt::format("'logit_bias' key '{}' is not a token id in [0, {})", key, model.n_vocab));
      if (!it.value().is_number())
        throw bad("logit_bias", fmt::format("'logit_bias' value for token {} must be a number", key));
      const double b = it.value().get<double>();
      if (!(b >= -100.0 && b <= 100.0))
        throw bad("logit_bias", fmt::format("'logit_bias' value for token {} must be between -100 and 100, got {}", key, b));
      p.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
    }
  }
  try {
    p.validate(model.n_vocab);
  } catch (const Error& e) {
    throw bad("", e.what());
  }

  spec.n = static_cast<int32_t>(int_field(req, "n", 1, model.max_batch, 1));
  spec.ignore_eos = bool_field(req, "ignore_eos", false);

  if (const ojson* s = field(req, "stop")) {
    std::vector<std::string> stops;
    if (s->is_string()) {
      stops.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      if (s->size() > 16) throw bad("stop", fmt::format("'stop' may hold at most 16 strings, got {}", s->size()));
      for (const auto& x : *s) {
        if (!x.is_string()) throw bad("stop", fmt::format("'stop' entries must be strings, got {}", type_name(x)));
        stops.push_back(x.get<std::string>());
      }
    } else {
      throw bad("stop", fmt::format("'stop' must be a string or an array of strings, got {}", type_name(*s)));
    }
    for (const auto& x : stops) {
      if (x.empty()) throw bad("stop", "'stop' strings must not be empty");
      if (x.size() > 1024) throw bad("stop", "'stop' strings may be at most 1024 bytes long");
    }
    spec.stop = std::move(stops);
  }
}

void parse_stream(const ojson& req, ApiRequest& out) {
  out.stream = bool_field(req, "stream", false);
  if (const ojson* so = field(req, "stream_options")) {
    if (!so->is_object())
      throw bad("stream_options", fmt::format("'stream_options' must be an object, got {}", type_name(*so)));
    if (!out.stream) throw bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    out.include_usage = bool_field(*so, "include_usage", false);
  }
}

// Prompt length and max_tokens against the context. `max_key`: the field that was given.
void fit_context(ApiRequest& out, const ModelInfo& model, const ojson& req, const char* prompt_param) {
  GenerationSpec& spec = out.spec;
  if (spec.prompt.empty()) throw bad(prompt_param, "the prompt is empty (it encodes to no tokens)");
  const int64_t n_prompt = static_cast<int64_t>(spec.prompt.size());
  if (n_prompt >= model.ctx)
    throw bad(prompt_param,
              fmt::format("This model's maximum context length is {} tokens, but the prompt has {} tokens; "
                          "shorten it (or start the server with a larger --ctx)",
                          model.ctx, n_prompt),
              "context_length_exceeded");
  const char* key = field(req, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  const int64_t max_tokens = int_field(req, key, 1, INT32_MAX, 0);
  if (max_tokens == 0) {
    spec.max_tokens = static_cast<int32_t>(model.ctx - n_prompt);
  } else {
    if (n_prompt + max_tokens > model.ctx)
      throw bad(key,
                fmt::format("This model's maximum context length is {} tokens; the prompt has {} tokens and '{}' asks "
                            "for {} more; lower '{}'",
                            model.ctx, n_prompt, key, max_tokens, key),
                "context_length_exceeded");
    spec.max_tokens = static_cast<int32_t>(max_tokens);
  }
}


// tools / tool_choice: returns whether the output should be parsed for tool calls.
bool check_tools(const ojson& req) {
  const ojson* tools = field(req, "tools");
  if (tools) {
    if (!tools->is_array()) throw bad("tools", fmt::format("'tools' must be an array, got {}", type_name(*tools)));
    if (tools->size() > 128) throw bad("tools", "'tools' may hold at most 128 tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string where = fmt::format("tools[{}]", i);
      if (!t.is_object()) throw bad(where, fmt::format("'{}' must be an object", where));
      if (!t.contains("type") || t["type"] != "function")
        throw bad(where + ".type", fmt::format("'{}.type' must be \"function\"", where));
      if (!t.contains("function") || !t["function"].is_object())
        throw bad(where + ".function", fmt::format("'{}.function' must be an object", where));
      const ojson& f = t["function"];
      if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
        throw bad(where + ".function.name", fmt::format("'{}.function.name' must be a non-empty string", where));
      if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object())
        throw bad(where + ".function.parameters", fmt::format("'{}.function.parameters' must be an object", where));
    }
  }
  bool parse = tools && !tools->empty();
  if (const ojson* tc = field(req, "tool_choice")) {
    if (tc->is_string()) {
      const std::string s = tc->get<std::string>();
      if (s == "none") parse = false;
      else if (s == "required") parse = true;  // constrained: serve/constraints.h
      else if (s != "auto")
        throw bad("tool_choice", fmt::format("'tool_choice' must be \"none\", \"auto\" or an object, got \"{}\"", s));
    } else if (tc->is_object()) {
      parse = true;  // constrained to the named tool: serve/constraints.h
    } else {
      throw bad("tool_choice", fmt::format("'tool_choice' must be a string or an object, got {}", type_name(*tc)));
    }
  }
  return parse;
}

std::string random_hex(size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  uint64_t r = random_seed();
  for (size_t i = 0; i < n; ++i) {
    if (i % 16 == 15) r = random_seed();
    s += digits[r & 15];
    r >>= 4;
  }
  return s;
}

}  // namespace

void add_bos(std::vector<int32_t>& ids, const Tokenizer& tok) {
  if (tok.add_bos() && tok.bos_id() >= 0 && (ids.empty() || ids.front() != tok.bos_id()))
    ids.insert(ids.begin(), tok.bos_id());
}

ApiRequest parse_chat_request(std::string_view body, const ModelInfo& model) {
  ojson req = parse_body(body);
  check_model(req, model);
  ApiRequest out;
  out.endpoint = Endpoint::Chat;

  const ojson* messages = field(req, "messages");
  if (!messages) throw bad("messages", "'messages' is required");
  if (!messages->is_array()) throw bad("messages", fmt::format("'messages' must be an array, got {}", type_name(*messages)));
  if (messages->empty()) throw bad("messages", "'messages' must contain at least one message");
  for (size_t i = 0; i < messages->size(); ++i) {
    const ojson& m = (*messages)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw bad(where, fmt::format("'{}' must be an object, got {}", where, type_name(m)));
    if (!m.contains("role") || !m["role"].is_string())
      throw bad(where + ".role", fmt::format("'{}.role' must be a string", where));
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer")
      throw bad(where + ".role",
                fmt::format("'{}.role' must be one of system, developer, user, assistant, tool; got '{}'", where, role));
    if (m.contains("content") && !m["content"].is_null() && !m["content"].is_string() && !m["content"].is_array())
      throw bad(where + ".content", fmt::format("'{}.content' must be a string or an array of parts", where));
  }

  parse_sampling(req, model, out.spec);
  parse_stream(req, out);
  const bool parse_tools = check_tools(req);
  out.spec.grammar = parse_constraint(req, model, /*chat=*/true).grammar;
  out.logprobs = bool_field(req, "logprobs", false);
  if (field(req, "top_logprobs")) {
    const int64_t k = int_field(req, "top_logprobs", 0, kMaxTopLogprobs, 0);
    if (!out.logprobs) throw bad("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
    out.spec.top_logprobs = static_cast<int32_t>(k);
  } else if (out.logprobs) {
    out.spec.top_logprobs = 0;
  }
  ChatPrompt prompt = chat_prompt(req, model);
  out.prompt_text = std::move(prompt.text);
  out.spec.prompt = std::move(prompt.tokens);
  add_bos(out.spec.prompt, *model.tokenizer);
  fit_context(out, model, req, "messages");

  out.parser.starts_in_thinking = chat::prompt_ends_in_thinking(out.prompt_text);
  out.spec.grammar_after_thinking = out.parser.starts_in_thinking;
  out.parser.parse_tool_calls = parse_tools;
  out.parser.id_prefix = "call_" + random_hex(12) + "_";
  if (const ojson* tools = field(req, "tools")) out.parser.tools = *tools;
  return out;
}

ApiRequest parse_completion_request(std::string_view body, const ModelInfo& model) {
  ojson req = parse_body(body);
  check_model(req, model);
  ApiRequest out;
  out.endpoint = Endpoint::Completion;

  const ojson* prompt = field(req, "prompt");
  if (!prompt) throw bad("prompt", "'prompt' is required");
  const Tokenizer& tok = *model.tokenizer;
  auto token_ids = [&](const ojson& arr) {
    std::vector<int32_t> ids;
    for (const auto& x : arr) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= model.n_vocab)
        throw bad("prompt", fmt::format("'prompt' token ids must be integers in [0, {})", model.n_vocab));
      ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
    return ids;
  };
  const ojson* single = prompt;
  if (prompt->is_array() && !prompt->empty() && (prompt->front().is_string() || prompt->front().is_array())) {
    if (prompt->size() != 1)
      throw bad("prompt", fmt::format("only one prompt per request is supported, got {}; send them separately", prompt->size()));
    single = &prompt->front();
  }
  if (single->is_string()) {
    check_text_fits(single->get_ref<const std::string&>().size(), model, "prompt");
    out.prompt_text = single->get<std::string>();
    out.spec.prompt = tok.encode(out.prompt_text, /*parse_special=*/true);
    add_bos(out.spec.prompt, tok);
  } else if (single->is_array()) {
    out.spec.prompt = token_ids(*single);
    out.prompt_text = tok.decode(out.spec.prompt);
  } else {
    throw bad("prompt", fmt::format("'prompt' must be a string, an array of token ids, or a one-element array of "
                                    "either, got {}",
                                    type_name(*single)));
  }

  parse_sampling(req, model, out.spec);
  parse_stream(req, out);
  out.spec.grammar = parse_constraint(req, model, /*chat=*/false).grammar;
  out.echo = bool_field(req, "echo", false);
  if (field(req, "suffix")) throw bad("suffix", "'suffix' is not supported");
  if (const int64_t best_of = int_field(req, "best_of", 1, model.max_batch, out.spec.n); best_of != out.spec.n)
    throw bad("best_of", "'best_of' other than n is not supported");
  if (field(req, "logprobs")) {
    out.logprobs = true;
    out.spec.top_logprobs = static_cast<int32_t>(int_field(req, "logprobs", 0, kMaxTopLogprobs, 0));
  }
  fit_context(out, model, req, "prompt");
  return out;
}

ojson models_list(const ModelInfo& model) {
  ojson m = ojson::object();
  m["id"] = model.name;
  m["object"] = "model";
  m["created"] = model.created;
  m["owned_by"] = "memra";
  m["max_model_len"] = model.ctx;
  ojson list = ojson::object();
  list["object"] = "list";
  list["data"] = ojson::array({m});
  return list;
}

}  // namespace memra::serve
