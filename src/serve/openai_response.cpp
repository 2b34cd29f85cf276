#include "serve/openai_response.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "tokenizer/tokenizer.h"

namespace memra::serve {

namespace {

// OpenAI reports impossible tokens with this value (JSON has no -inf).
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

std::string response_id(Endpoint e) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lk(mu);
  return fmt::format("{}{:016x}{:08x}", e == Endpoint::Chat ? "chatcmpl-" : "cmpl-", rng(), static_cast<uint32_t>(rng()));
}

ojson bytes_of(const std::string& s) {
  ojson b = ojson::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

ResponseBuilder::ResponseBuilder(const ApiRequest& request, const ModelInfo& model)
    : request_(request), model_(model), id_(response_id(request.endpoint)) {
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  choices_.reserve(static_cast<size_t>(request.spec.n));
  for (int32_t i = 0; i < request.spec.n; ++i) choices_.emplace_back(request.parser);
}

int32_t ResponseBuilder::completion_tokens() const {
  int32_t n = 0;
  for (const auto& c : choices_) n += c.completion_tokens;
  return n;
}

std::string ResponseBuilder::token_text(int32_t id) const { return model_.tokenizer->token_bytes(id); }

const char* ResponseBuilder::finish_name(const Choice& c) const {
  switch (c.finish) {
    case FinishReason::Stop: return c.tool_calls ? "tool_calls" : "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "stop";
    case FinishReason::Error: return "error";
    case FinishReason::GrammarDeadEnd: return "grammar_dead_end";
    case FinishReason::None: return nullptr;
  }
  return nullptr;
}

ojson ResponseBuilder::usage() const {
  const int32_t p = static_cast<int32_t>(request_.spec.prompt.size()), c = completion_tokens();
  // OpenAI's form: the prompt tokens served from the prefix cache (not prefilled).
  return ojson{{"prompt_tokens", p},
               {"completion_tokens", c},
               {"total_tokens", p + c},
               {"prompt_tokens_details", ojson{{"cached_tokens", cached_tokens_}}}};
}

ojson ResponseBuilder::chunk_base() const {
  ojson j = ojson::object();
  j["id"] = id_;
  j["object"] = request_.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion";
  j["created"] = created_;
  j["model"] = model_.name;
  return j;
}

std::string ResponseBuilder::sse(const ojson& chunk) const { return "data: " + dump_json(chunk) + "\n\n"; }

ojson ResponseBuilder::chat_logprobs(const std::vector<TokenLogprob>& lps) const {
  ojson content = ojson::array();
  for (const auto& lp : lps) {
    const std::string text = token_text(lp.token);
    ojson e = ojson::object();
    e["token"] = text;
    e["logprob"] = finite_logprob(lp.logprob);
    e["bytes"] = bytes_of(text);
    ojson top = ojson::array();
    for (const auto& [id, v] : lp.top) {
      const std::string t = token_text(id);
      top.push_back(ojson{{"token", t}, {"logprob", finite_logprob(v)}, {"bytes", bytes_of(t)}});
    }
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return ojson{{"content", std::move(content)}};
}

ojson ResponseBuilder::completion_logprobs(const std::vector<TokenLogprob>& lps, size_t text_offset) const {
  ojson tokens = ojson::array(), token_lps = ojson::array(), tops = ojson::array(), offsets = ojson::array();
  for (const auto& lp : lps) {
    const std::string text = token_text(lp.token);
    tokens.push_back(text);
    token_lps.push_back(finite_logprob(lp.logprob));
    ojson top = ojson::object();
    for (const auto& [id, v] : lp.top) top[token_text(id)] = finite_logprob(v);
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += text.size();
  }
  return ojson{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

std::string ResponseBuilder::chat_delta_chunk(int32_t index, ojson delta, const std::vector<TokenLogprob>* logprobs,
                                              const char* finish_reason) const {
  ojson choice = ojson::object();
  choice["index"] = index;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = logprobs && !logprobs->empty() ? chat_logprobs(*logprobs) : ojson(nullptr);
  choice["finish_reason"] = finish_reason ? ojson(finish_reason) : ojson(nullptr);
  ojson chunk = chunk_base();
  chunk["choices"] = ojson::array({std::move(choice)});
  if (request_.include_usage) chunk["usage"] = nullptr;
  return sse(chunk);
}

std::string ResponseBuilder::completion_chunk(int32_t index, const std::string& text,
                                              const std::vector<TokenLogprob>* logprobs, const char* finish_reason,
                                              size_t text_offset) const {
  ojson choice = ojson::object();
  choice["index"] = index;
  choice["text"] = text;
  choice["logprobs"] = logprobs && !logprobs->empty() ? completion_logprobs(*logprobs, text_offset) : ojson(nullptr);
  choice["finish_reason"] = finish_reason ? ojson(finish_reason) : ojson(nullptr);
  ojson chunk = chunk_base();
  chunk["choices"] = ojson::array({std::move(choice)});
  if (request_.include_usage) chunk["usage"] = nullptr;
  return sse(chunk);
}

std::string ResponseBuilder::stream_begin() {
  std::string out;
  for (int32_t i = 0; i < static_cast<int32_t>(choices_.size()); ++i) {
    if (request_.endpoint == Endpoint::Chat) {
      out += chat_delta_chunk(i, ojson{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
    } else if (request_.echo) {
      out += completion_chunk(i, request_.prompt_text, nullptr, nullptr, 0);
    }
  }
  return out;
}

std::string ResponseBuilder::stream_events(std::vector<ChoiceEvent>& events) {
  std::string out;
  const size_t echo_len = request_.echo ? request_.prompt_text.size() : 0;
  for (auto& ev : events) {
    Choice& c = choices_.at(static_cast<size_t>(ev.choice));
    const std::vector<TokenLogprob>* lps = request_.logprobs && !ev.logprobs.empty() ? &ev.logprobs : nullptr;
    if (request_.endpoint == Endpoint::Chat) {
      std::vector<chat::OutputDelta> deltas;
      deltas.push_back(c.parser.feed(ev.text));
      if (ev.finish != FinishReason::None) deltas.push_back(c.parser.finish());
      bool logprobs_sent = false;
      for (auto& d : deltas) {
        if (d.empty() && (!lps || logprobs_sent)) continue;
        ojson delta = ojson::object();
        if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
        if (!d.content.empty() || (d.reasoning_content.empty() && d.tool_calls.empty())) delta["content"] = d.content;
        if (!d.tool_calls.empty()) {
          c.tool_calls = true;
          ojson calls = ojson::array();
          for (const auto& tc : d.tool_calls)
            calls.push_back(ojson{{"index", tc.index},
                                  {"id", tc.id},
                                  {"type", "function"},
                                  {"function", {{"name", tc.name}, {"arguments", tc.arguments}}}});
          delta["tool_calls"] = std::move(calls);
        }
        out += chat_delta_chunk(ev.choice, std::move(delta), logprobs_sent ? nullptr : lps, nullptr);
        logprobs_sent = true;
      }
    } else {
      const size_t offset = echo_len + c.text.size();
      if (!ev.text.empty() || lps) out += completion_chunk(ev.choice, ev.text, lps, nullptr, offset);
    }
    c.text += ev.text;
    if (ev.finish == FinishReason::None) continue;
    c.finish = ev.finish;
    c.completion_tokens = ev.completion_tokens;
    cached_tokens_ = std::max(cached_tokens_, ev.cached_tokens);
    if (ev.finish == FinishReason::Error) {
      if (!error_) error_ = ev.error;
      if (!error_sent_) {
        out += "data: " + error_json(500, ev.error, {}, {}, "server_error") + "\n\n";
        error_sent_ = true;
      }
    } else if (ev.finish != FinishReason::Cancelled) {
      if (request_.endpoint == Endpoint::Chat)
        out += chat_delta_chunk(ev.choice, ojson::object(), nullptr, finish_name(c));
      else
        out += completion_chunk(ev.choice, "", nullptr, finish_name(c), echo_len + c.text.size());
    }
  }
  return out;
}

std::string ResponseBuilder::stream_end() {
  std::string out;
  if (request_.include_usage && !error_) {
    ojson chunk = chunk_base();
    chunk["choices"] = ojson::array();
    chunk["usage"] = usage();
    out += sse(chunk);
  }
  out += "data: [DONE]\n\n";
  return out;
}

void ResponseBuilder::add(std::vector<ChoiceEvent>& events) {
  for (auto& ev : events) {
    Choice& c = choices_.at(static_cast<size_t>(ev.choice));
    c.text += ev.text;
    for (auto& lp : ev.logprobs) c.logprobs.push_back(std::move(lp));
    if (ev.finish == FinishReason::None) continue;
    c.finish = ev.finish;
    c.completion_tokens = ev.completion_tokens;
    cached_tokens_ = std::max(cached_tokens_, ev.cached_tokens);
    if (ev.finish == FinishReason::Error && !error_) error_ = ev.error;
  }
}

ojson ResponseBuilder::response() const {
  ojson j = ojson::object();
  j["id"] = id_;
  j["object"] = request_.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion";
  j["created"] = created_;
  j["model"] = model_.name;
  ojson choices = ojson::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    ojson choice = ojson::object();
    choice["index"] = i;
    if (request_.endpoint == Endpoint::Chat) {
      const chat::ParsedOutput parsed = chat::parse_output(c.text, request_.parser);
      choice["message"] = parsed.to_openai_message();
      choice["logprobs"] = request_.logprobs ? chat_logprobs(c.logprobs) : ojson(nullptr);
      const char* reason = finish_name(c);
      if (c.finish == FinishReason::Stop && !parsed.tool_calls.empty()) reason = "tool_calls";
      choice["finish_reason"] = reason ? ojson(reason) : ojson(nullptr);
    } else {
      const size_t echo_len = request_.echo ? request_.prompt_text.size() : 0;
      choice["text"] = (request_.echo ? request_.prompt_text : std::string()) + c.text;
      choice["logprobs"] = request_.logprobs ? completion_logprobs(c.logprobs, echo_len) : ojson(nullptr);
      const char* reason = finish_name(c);
      choice["finish_reason"] = reason ? ojson(reason) : ojson(nullptr);
    }
    choices.push_back(std::move(choice));
  }
  j["choices"] = std::move(choices);
  j["usage"] = usage();
  return j;
}

}  // namespace memra::serve
