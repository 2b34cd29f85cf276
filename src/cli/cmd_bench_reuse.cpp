// memra bench-reuse: what prefix reuse saves (issue 12's benchmark), in process through the
// serve scheduler, every request run twice (reuse on and off) and every answer compared token
// for token:
//   1. a multi-turn chat rendered by the model's chat template (each turn: the history, a new
//      user message, a greedy answer that goes back into the history): per turn the prompt's
//      tokens, the tokens new since the last turn, the tokens prefilled, TTFT on and off;
//   2. a long prompt sent cold, then the same prefix with another ending, then the same prompt:
//      TTFT of each;
//   3. an agent loop: C clients with one shared system prompt, S steps each (every step's
//      prompt extends the client's last one), all clients at once: wall time and the pool's hit
//      rate, on and off.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/command.h"
#include "cli/model_source.h"
#include "common/error.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "serve/scheduler.h"
#include "step/prefix_cache.h"
#include "tokenizer/tokenizer.h"

namespace memra::cli::cmd_bench_reuse {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  EngineArgs engine;
  int turns = 10;
  int user_tokens = 300;
  int answer_tokens = 64;
  int long_prompt = 2000;
  int clients = 8;
  int agent_steps = 3;
  int max_batch = 16;
  std::string out;
};

struct Outcome {
  std::vector<int32_t> tokens;
  int32_t cached = 0;
  double ttft_s = 0;
};

// Text of about `n` tokens: words drawn from a fixed list by a fixed generator.
std::string filler(const Tokenizer& tok, int n, uint32_t seed) {
  static const char* const words[] = {"the",    "model",  "returns", "hidden", "states", "for",   "each",
                                      "layer",  "and",    "then",    "we",     "apply",  "a",     "norm",
                                      "weight", "value",  "cache",   "prompt", "token",  "batch", "step",
                                      "when",   "output", "shape",   "input",  "config", "self",  "list"};
  std::string s;
  uint32_t x = seed * 2654435761u + 1;
  while (static_cast<int>(tok.encode(s).size()) < n) {
    for (int i = 0; i < 16; ++i) {
      x = x * 1664525u + 1013904223u;
      s += words[(x >> 8) % (sizeof(words) / sizeof(words[0]))];
      s += (x >> 4) % 11 == 0 ? ". " : " ";
    }
  }
  return s;
}

std::vector<Outcome> run_batch(serve::Scheduler& sched, std::vector<serve::GenerationSpec> specs) {
  std::vector<std::shared_ptr<serve::RequestStream>> streams;
  std::vector<Clock::time_point> t0;
  for (auto& s : specs) {
    std::shared_ptr<serve::RequestStream> st;
    t0.push_back(Clock::now());
    if (sched.submit(std::move(s), st) != serve::SubmitStatus::Accepted)
      fail("bench-reuse: the scheduler refused a request (raise --max-batch or lower --clients)");
    streams.push_back(st);
  }
  std::vector<Outcome> out(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    std::vector<serve::ChoiceEvent> events;
    bool first = true;
    while (streams[i]->wait(events, std::chrono::milliseconds(100))) {
      for (auto& e : events) {
        if (first) {
          out[i].ttft_s = std::chrono::duration<double>(Clock::now() - t0[i]).count();
          first = false;
        }
        for (const auto& lp : e.logprobs) out[i].tokens.push_back(lp.token);
        if (e.finish == serve::FinishReason::Error) fail("bench-reuse: a request failed: {}", e.error);
        if (e.finish != serve::FinishReason::None) out[i].cached = e.cached_tokens;
      }
      events.clear();
    }
  }
  return out;
}

serve::GenerationSpec greedy(std::vector<int32_t> prompt, int max_tokens) {
  serve::GenerationSpec s;
  s.prompt = std::move(prompt);
  s.max_tokens = max_tokens;
  s.top_logprobs = 0;  // the ids come back with the events
  s.ignore_eos = true;
  return s;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

void run(const Args& a) {
  auto engine = open_engine(a.engine);
  Engine& e = *engine;
  if (!e.prefix_cache()) fail("bench-reuse: the prefix cache is off (MEMRA_PREFIX_CACHE_MB=0)");
  const Tokenizer& tok = e.tokenizer();
  const auto tpl_src = e.file().get_string_opt("tokenizer.chat_template");
  if (!tpl_src) fail("bench-reuse: the model has no chat template (tokenizer.chat_template)");
  chat::ChatTemplate tpl(*tpl_src);
  // One scheduler at a time owns the engine: each phase runs with reuse off, then on.
  auto scheduler = [&](bool reuse) {
    serve::SchedulerOptions o;
    o.max_batch = a.max_batch;
    o.max_queue = std::max(64, a.clients);
    o.prefix_reuse = reuse;
    auto s = std::make_unique<serve::Scheduler>(e, o, nullptr);
    s->start();
    return s;
  };
  std::string md;
  md += fmt::format("# Prefix reuse: {} on {}\n\n", model_label(a.engine), e.backend().name());
  md += fmt::format("Prefill chunk {}, snapshot every {} tokens ({:.2f} MiB each), pool budget {:.0f} MiB.\n\n",
                    e.prefill_chunk(), e.prefix_cache()->spacing(), e.prefix_cache()->snapshot_bytes() / 1048576.0,
                    e.prefix_cache()->stats().budget_bytes / 1048576.0);
  int mismatches = 0;

  // 1. The multi-turn chat, the whole conversation off, then on.
  struct Turn {
    std::vector<int32_t> prompt;
    Outcome out;
  };
  auto conversation = [&](bool reuse) {
    auto sched = scheduler(reuse);
    std::vector<Turn> turns;
    nlohmann::ordered_json req;
    req["messages"] = nlohmann::ordered_json::array();
    req["messages"].push_back({{"role", "system"}, {"content", filler(tok, 200, 1)}});
    for (int t = 0; t < a.turns; ++t) {
      req["messages"].push_back({{"role", "user"}, {"content", filler(tok, a.user_tokens, 100 + t)}});
      Turn turn;
      turn.prompt = tok.encode(tpl.render(req));
      if (static_cast<int>(turn.prompt.size()) + a.answer_tokens > e.ctx())
        fail("bench-reuse: turn {} needs {} tokens, over the context {} (lower --turns or --user-tokens, or raise "
             "--ctx)",
             t + 1, turn.prompt.size() + a.answer_tokens, e.ctx());
      turn.out = run_batch(*sched, {greedy(turn.prompt, a.answer_tokens)})[0];
      req["messages"].push_back({{"role", "assistant"}, {"content", tok.decode(turn.out.tokens)}});
      turns.push_back(std::move(turn));
    }
    return turns;
  };
  const std::vector<Turn> chat_off = conversation(false), chat_on = conversation(true);
  md += fmt::format("## {}-turn chat ({} tokens of user text and {} of answer per turn)\n\n", a.turns, a.user_tokens,
                    a.answer_tokens);
  md += "| turn | prompt | new | cached | prefilled | TTFT off (s) | TTFT on (s) | same tokens |\n";
  md += "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  std::vector<int32_t> last_seen;  // the last prompt + its answer
  int64_t sum_new = 0, sum_prefilled = 0, sum_prompt = 0;
  for (size_t t = 0; t < chat_on.size(); ++t) {
    const Turn& on = chat_on[t];
    const Turn& off = chat_off[t];
    const bool same = off.prompt == on.prompt && off.out.tokens == on.out.tokens;
    mismatches += !same;
    const int64_t fresh = static_cast<int64_t>(on.prompt.size() - common_prefix(on.prompt, last_seen));
    const int64_t prefilled = static_cast<int64_t>(on.prompt.size()) - on.out.cached;
    sum_new += fresh;
    sum_prefilled += prefilled;
    sum_prompt += static_cast<int64_t>(on.prompt.size());
    md += fmt::format("| {} | {} | {} | {} | {} | {:.3f} | {:.3f} | {} |\n", t + 1, on.prompt.size(), fresh,
                      on.out.cached, prefilled, off.out.ttft_s, on.out.ttft_s, same ? "yes" : "NO");
    last_seen = on.prompt;
    last_seen.insert(last_seen.end(), on.out.tokens.begin(), on.out.tokens.end());
  }
  md += fmt::format(
      "\nOver the conversation: {} prompt tokens, {} new, {} prefilled with reuse ({:.2f}x the new tokens; "
      "without reuse {:.2f}x).\n\n",
      sum_prompt, sum_new, sum_prefilled, static_cast<double>(sum_prefilled) / static_cast<double>(sum_new),
      static_cast<double>(sum_prompt) / static_cast<double>(sum_new));

  // 2. A repeated long prefix.
  {
    std::vector<int32_t> base = tok.encode(filler(tok, a.long_prompt, 7));
    std::vector<int32_t> other = base;
    const std::vector<int32_t> tail = tok.encode(" and now a different ending for the second request.");
    other.insert(other.end(), tail.begin(), tail.end());
    const std::vector<serve::GenerationSpec> specs = {greedy(base, 8), greedy(other, 8), greedy(base, 8)};
    std::vector<Outcome> res[2];
    for (int reuse = 0; reuse < 2; ++reuse) {
      auto sched = scheduler(reuse == 1);
      for (const auto& sp : specs) res[reuse].push_back(run_batch(*sched, {sp})[0]);
    }
    md += fmt::format("## A long prompt ({} tokens) sent again\n\n", base.size());
    md += "| request | cached | TTFT off (s) | TTFT on (s) | same tokens |\n| --- | ---: | ---: | ---: | --- |\n";
    const char* names[] = {"cold (first time)", "same prefix, another ending", "the same prompt again"};
    for (int i = 0; i < 3; ++i) {
      const bool same = res[0][i].tokens == res[1][i].tokens;
      mismatches += !same;
      md += fmt::format("| {} | {} | {:.3f} | {:.3f} | {} |\n", names[i], res[1][i].cached, res[0][i].ttft_s,
                        res[1][i].ttft_s, same ? "yes" : "NO");
    }
    md += "\n";
  }

  // 3. The agent loop.
  {
    const std::string system = filler(tok, 1000, 3);
    PrefixCacheStats before, after;
    double wall[2] = {0, 0};
    int64_t generated = 0;
    std::vector<std::vector<int32_t>> answers[2];
    for (int reuse = 0; reuse < 2; ++reuse) {
      auto sched = scheduler(reuse == 1);
      if (reuse) before = e.prefix_cache()->stats();
      std::vector<nlohmann::ordered_json> chats(static_cast<size_t>(a.clients));
      for (int c = 0; c < a.clients; ++c) {
        chats[c]["messages"] = nlohmann::ordered_json::array();
        chats[c]["messages"].push_back({{"role", "system"}, {"content", system}});
        chats[c]["messages"].push_back({{"role", "user"}, {"content", filler(tok, 60, 1000 + c)}});
      }
      const auto t0 = Clock::now();
      for (int step = 0; step < a.agent_steps; ++step) {
        std::vector<serve::GenerationSpec> specs;
        for (auto& chat : chats) specs.push_back(greedy(tok.encode(tpl.render(chat)), 32));
        const auto outs = run_batch(*sched, std::move(specs));
        for (int c = 0; c < a.clients; ++c) {
          answers[reuse].push_back(outs[c].tokens);
          chats[c]["messages"].push_back({{"role", "assistant"}, {"content", tok.decode(outs[c].tokens)}});
          chats[c]["messages"].push_back({{"role", "user"}, {"content", filler(tok, 40, 2000 + 100 * step + c)}});
          if (reuse) generated += static_cast<int64_t>(outs[c].tokens.size());
        }
      }
      wall[reuse] = std::chrono::duration<double>(Clock::now() - t0).count();
      if (reuse) after = e.prefix_cache()->stats();
    }
    for (size_t i = 0; i < answers[0].size(); ++i) mismatches += answers[0][i] != answers[1][i];
    const int64_t lookups = after.lookups - before.lookups, hits = after.hits - before.hits;
    md += fmt::format("## Agent loop: {} clients at once, {} steps, one shared system prompt (~1000 tokens)\n\n",
                      a.clients, a.agent_steps);
    md += fmt::format(
        "| reuse | wall (s) | generated tokens/s |\n| --- | ---: | ---: |\n| off | {:.2f} | {:.1f} |\n| on | {:.2f} | "
        "{:.1f} |\n\nHit rate {} of {} lookups; {} tokens reused; pool {:.1f} MiB, {} entries, {} evictions.\n\n",
        wall[0], generated / wall[0], wall[1], generated / wall[1], hits, lookups,
        after.reused_tokens - before.reused_tokens, after.bytes / 1048576.0, after.entries, after.evictions);
  }
  md += fmt::format("Answers compared with reuse on and off: {}.\n",
                    mismatches ? fmt::format("{} DIFFER", mismatches) : std::string("all identical"));
  std::fputs(md.c_str(), stdout);
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    if (!f) fail("cannot write {}", a.out);
    f << md;
  }
  if (mismatches) fail("bench-reuse: {} answers differ with reuse on and off", mismatches);
}

CommandRegistrar reg("bench-reuse", [](CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("bench-reuse", "prefix reuse benchmark: multi-turn chat, repeated prefix, agent loop");
  add_engine_args(*cmd, args->engine);
  cmd->add_option("--turns", args->turns, "chat turns")->check(CLI::Range(1, 1000));
  cmd->add_option("--user-tokens", args->user_tokens, "tokens of user text per turn")->check(CLI::Range(1, 100000));
  cmd->add_option("--answer-tokens", args->answer_tokens, "tokens generated per turn")->check(CLI::Range(1, 100000));
  cmd->add_option("--long", args->long_prompt, "tokens of the repeated long prompt")->check(CLI::Range(1, 1000000));
  cmd->add_option("--clients", args->clients, "agent-loop clients at once")->check(CLI::Range(1, 1024));
  cmd->add_option("--steps", args->agent_steps, "agent-loop steps per client")->check(CLI::Range(1, 1000));
  cmd->add_option("--max-batch", args->max_batch, "the scheduler's batch")->check(CLI::Range(1, 1024));
  cmd->add_option("-o,--out", args->out, "also write the report (markdown) here");
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace memra::cli::cmd_bench_reuse
