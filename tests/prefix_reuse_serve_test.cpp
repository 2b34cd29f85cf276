// Prefix reuse in the server (CPU, tiny fixture model): a multi-turn chat rendered by the real
// Qwen3 chat template, n > 1 forks with seeded sampling and logprobs, and concurrent requests
// sharing a prefix give exactly the tokens and logprobs of the same requests without reuse, while
// reporting what they reused; over HTTP, usage.prompt_tokens_details.cached_tokens and /metrics.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "serve/http_lib.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Engine> open_tiny(int32_t ctx = 4096) {
  EngineOptions o;
  o.device = "cpu";
  o.ctx = ctx;
  o.prefill_chunk = 32;
  auto e = Engine::open(test::fixture("qwen35-tiny.f32.gguf"), o);
  e->tokenizer();
  return e;
}

struct Choice {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // the chosen token's, bit for bit
  std::vector<float> top;       // the alternatives: id, value, ...
  int32_t cached = -1;
  FinishReason finish = FinishReason::None;
};

std::vector<Choice> collect(const std::shared_ptr<RequestStream>& s) {
  std::vector<Choice> r(static_cast<size_t>(s->n_choices()));
  std::vector<ChoiceEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (s->wait(events, 200ms)) {
    for (auto& e : events) {
      Choice& c = r.at(static_cast<size_t>(e.choice));
      c.text += e.text;
      for (const auto& lp : e.logprobs) {
        c.tokens.push_back(lp.token);
        c.logprobs.push_back(lp.logprob);
        for (const auto& [id, v] : lp.top) {
          c.top.push_back(static_cast<float>(id));
          c.top.push_back(v);
        }
      }
      if (e.finish != FinishReason::None) {
        c.finish = e.finish;
        c.cached = e.cached_tokens;
        EXPECT_NE(e.finish, FinishReason::Error) << e.error;
      }
    }
    events.clear();
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "request did not finish";
      s->cancel();
      break;
    }
  }
  return r;
}

bool same(const Choice& a, const Choice& b) {
  auto bits = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  return a.text == b.text && a.tokens == b.tokens && bits(a.logprobs, b.logprobs) && bits(a.top, b.top);
}

GenerationSpec spec_of(std::vector<int32_t> prompt, int32_t n, float temperature, uint64_t seed) {
  GenerationSpec s;
  s.prompt = std::move(prompt);
  s.n = n;
  s.max_tokens = 12;
  s.sampling.temperature = temperature;
  s.sampling.seed = seed;
  s.top_logprobs = 2;
  s.ignore_eos = true;
  return s;
}

std::vector<std::vector<Choice>> run_all(Engine& e, bool reuse, const std::vector<GenerationSpec>& specs) {
  SchedulerOptions o;
  o.prefix_reuse = reuse;
  Scheduler sched(e, o, nullptr);
  sched.start();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& s : specs) {
    std::shared_ptr<RequestStream> st;
    EXPECT_EQ(sched.submit(s, st), SubmitStatus::Accepted);
    streams.push_back(st);
  }
  std::vector<std::vector<Choice>> out;
  for (auto& st : streams) out.push_back(collect(st));
  return out;
}

// A conversation rendered by the real Qwen3 template (qwen3-vocab.gguf: its template and
// tokenizer); the ids are folded into the tiny model's vocabulary, which keeps the prefix
// structure a real chat has (each turn extends the last, earlier answers re-rendered).
TEST(PrefixReuseServe, MultiTurnChatWithTheRealTemplateMatchesNoReuse) {
  auto e = open_tiny();
  auto vocab_file = gguf::File::open(test::fixture("qwen3-vocab.gguf"));
  auto qwen_tok = Tokenizer::from_gguf(*vocab_file);
  chat::ChatTemplate tpl(*vocab_file->get_string_opt("tokenizer.chat_template"));
  const int32_t n_vocab = e->config().n_vocab;
  const Tokenizer& tiny_tok = e->tokenizer();
  std::vector<std::vector<Choice>> answers[2];
  int32_t cached_total = 0, prompt_total = 0;
  for (int reuse = 0; reuse < 2; ++reuse) {
    std::vector<int32_t> last_ids;
    SchedulerOptions o;
    o.prefix_reuse = reuse == 1;
    Scheduler sched(*e, o, nullptr);
    sched.start();
    nlohmann::ordered_json req;
    req["messages"] = nlohmann::ordered_json::array();
    req["messages"].push_back({{"role", "system"},
                               {"content", "You are a careful assistant. Answer in short sentences and keep "
                                           "the conversation going; the history below is kept verbatim."}});
    for (int turn = 0; turn < 5; ++turn) {
      req["messages"].push_back(
          {{"role", "user"}, {"content", "Turn " + std::to_string(turn) + ": tell me more about the last answer."}});
      const std::string text = tpl.render(req);
      std::vector<int32_t> ids = qwen_tok->encode(text);
      for (int32_t& id : ids) id %= n_vocab;
      std::shared_ptr<RequestStream> st;
      ASSERT_EQ(sched.submit(spec_of(ids, 2, 0.8f, 40 + turn), st), SubmitStatus::Accepted);
      std::vector<Choice> got = collect(st);
      ASSERT_EQ(got.size(), 2u);
      if (reuse == 1 && turn > 0) {
        // It resumes at the end of the last prompt when the template re-renders all of it, else
        // at most 16 tokens (the cache's tail snapshot) before where the two depart.
        size_t lcp = 0;
        while (lcp < last_ids.size() && lcp < ids.size() && last_ids[lcp] == ids[lcp]) ++lcp;
        EXPECT_GE(got[0].cached + 16, static_cast<int32_t>(lcp)) << "turn " << turn;
        EXPECT_LT(got[0].cached, static_cast<int32_t>(ids.size())) << "turn " << turn;
        cached_total += got[0].cached;
        prompt_total += static_cast<int32_t>(ids.size());
      }
      if (reuse == 0) {
        EXPECT_EQ(got[0].cached, 0);
      }
      last_ids = ids;
      // The answer goes back into the history as text, as a client sends it.
      req["messages"].push_back({{"role", "assistant"}, {"content", tiny_tok.decode(got[0].tokens)}});
      answers[reuse].push_back(std::move(got));
    }
  }
  for (size_t t = 0; t < answers[0].size(); ++t)
    for (size_t c = 0; c < 2; ++c)
      EXPECT_TRUE(same(answers[0][t][c], answers[1][t][c])) << "turn " << t << " choice " << c << ": '"
                                                            << answers[0][t][c].text << "' vs '"
                                                            << answers[1][t][c].text << "'";
  EXPECT_GT(cached_total * 2, prompt_total) << "most of the later turns' prompts should be reused";
}

TEST(PrefixReuseServe, ForksAndConcurrentRequestsSharingAPrefixMatchNoReuse) {
  auto e = open_tiny();
  const int32_t n_vocab = e->config().n_vocab;
  std::vector<int32_t> prefix;
  for (int i = 0; i < 230; ++i) prefix.push_back((i * 29 + 11) % n_vocab);
  std::vector<GenerationSpec> specs;
  for (int k = 0; k < 5; ++k) {
    std::vector<int32_t> p = prefix;
    for (int i = 0; i < 3 + 5 * k; ++i) p.push_back((k * 97 + i * 13 + 2) % n_vocab);
    specs.push_back(spec_of(p, 1 + k % 3, k == 0 ? 0.0f : 0.9f, 7 * k));
  }
  specs.push_back(specs[1]);  // the same request again: the whole prompt, with its logits
  const auto cold = run_all(*e, false, specs);
  const auto warm = run_all(*e, true, specs);
  ASSERT_EQ(cold.size(), warm.size());
  for (size_t r = 0; r < cold.size(); ++r) {
    ASSERT_EQ(cold[r].size(), warm[r].size());
    for (size_t c = 0; c < cold[r].size(); ++c)
      EXPECT_TRUE(same(cold[r][c], warm[r][c])) << "request " << r << " choice " << c;
    EXPECT_EQ(cold[r][0].cached, 0);
  }
  EXPECT_EQ(warm[0][0].cached, 0) << "the first request finds nothing";
  // The last snapshot at or before the shared 230 tokens: every 32 (224), or from request 2 on
  // request 2's tail snapshot (16 before its end: 243 - 16 = 227).
  for (size_t r = 1; r < 5; ++r) EXPECT_EQ(warm[r][0].cached, r >= 3 ? 227 : 224) << "request " << r;
  EXPECT_EQ(warm[5][0].cached, static_cast<int32_t>(specs[5].prompt.size()));
}

TEST(PrefixReuseServe, HttpReportsCachedTokensAndMetrics) {
  auto e = open_tiny(1024);
  ServerOptions o;
  o.model_name = "tiny";
  HttpServer server(*e, o);
  const int port = server.bind("127.0.0.1", 0);
  std::thread th([&] { server.serve(); });
  const std::string body =
      R"({"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "Say something long enough )"
      R"(to cross a few chunks of the grid, please, and then some more words to be sure."}]})";
  nlohmann::json usage[2];
  for (int i = 0; i < 2; ++i) {
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(60, 0);
    auto res = cli.Post("/v1/chat/completions", body, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    usage[i] = nlohmann::json::parse(res->body)["usage"];
  }
  EXPECT_EQ(usage[0]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(usage[1]["prompt_tokens_details"]["cached_tokens"], usage[1]["prompt_tokens"]);
  httplib::Client cli("127.0.0.1", port);
  auto m = cli.Get("/metrics");
  ASSERT_TRUE(m);
  for (const char* line : {"memra_prefix_cache_lookups_total 2", "memra_prefix_cache_hits_total 1",
                           "memra_prefix_cache_evictions_total 0", "memra_prefix_cache_bytes ",
                           "memra_prefix_cache_hit_ratio 0.5", "memra_prefix_cache_kv_blocks "})
    EXPECT_NE(m->body.find(line), std::string::npos) << line << " missing from:\n" << m->body;
  server.stop(0ms);
  th.join();
}

}  // namespace
}  // namespace memra::serve
