// memra run: generate text from a prompt, streaming it to stdout.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "cli/model_source.h"
#include "common/error.h"
#include "engine/engine.h"
#include "step/sampling.h"
#include "tokenizer/tokenizer.h"

namespace memra::cli::cmd_run {
namespace {

// The demo model writes Python; without -p it continues this.
constexpr const char* kDemoPrompt = "def forward(self, hidden_states";

struct Args {
  EngineArgs engine;
  std::string prompt, prompt_file;
  int n_predict = 128;
  SamplingParams sampling;
  bool no_echo = false;
  bool ignore_eos = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run(Args& a) {
  if (!a.prompt_file.empty()) {
    std::ifstream f(a.prompt_file, std::ios::binary);
    if (!f) fail("cannot read prompt file '{}'", a.prompt_file);
    std::stringstream ss;
    ss << f.rdbuf();
    a.prompt = ss.str();
  }
  if (a.prompt.empty()) {
    if (!a.engine.model.empty()) fail("no prompt: give one with -p TEXT or -f FILE");
    a.prompt = kDemoPrompt;
  }
  a.sampling.validate();
  auto engine = open_engine(a.engine);
  const Tokenizer& tok = engine->tokenizer();
  a.sampling.validate(engine->config().n_vocab);

  std::vector<int32_t> prompt = tok.encode(a.prompt, /*parse_special=*/true);
  if (tok.add_bos() && tok.bos_id() >= 0) prompt.insert(prompt.begin(), tok.bos_id());
  if (prompt.empty()) fail("the prompt encodes to no tokens");
  if (static_cast<int64_t>(prompt.size()) + a.n_predict > engine->ctx())
    fail("prompt ({} tokens) + -n {} exceeds the context size {} (raise --ctx or lower -n)", prompt.size(),
         a.n_predict, engine->ctx());

  if (!a.no_echo) {
    std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
    std::fflush(stdout);
  }
  auto seq = engine->new_sequence();
  std::vector<float> logits;
  auto t0 = std::chrono::steady_clock::now();
  engine->prefill(*seq, prompt, &logits);
  const double t_prompt = seconds_since(t0);

  StreamDecoder decoder(tok);
  std::vector<int32_t> history = prompt;
  auto t1 = std::chrono::steady_clock::now();
  int generated = 0;
  SequenceCache* s = seq.get();
  StepOutput step;
  for (int i = 0; i < a.n_predict; ++i) {
    // The first token from the prompt's logits, the others drawn by the decode step that fed
    // the previous one (the same draw: step/sampling.h).
    const int32_t next = i == 0 ? sample_token(logits, a.sampling, 0, history) : step.tokens[0];
    if (next < 0) fail("sampling found no allowed token (all logits are -inf or NaN)");
    ++generated;
    history.push_back(next);
    if (!a.ignore_eos && tok.is_end_of_generation(next)) break;
    std::string piece = decoder.push(next);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (i + 1 == a.n_predict) break;
    RowSampling row;
    row.params = &a.sampling;
    row.token_index = static_cast<uint64_t>(i + 1);
    row.history = history.data();
    row.history_len = static_cast<int64_t>(history.size());
    engine->decode(std::span<SequenceCache* const>(&s, 1), std::span<const int32_t>(&next, 1),
                   StepSampling{std::span<const RowSampling>(&row, 1)}, step);
  }
  std::string rest = decoder.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const double t_gen = seconds_since(t1);
  std::fprintf(stderr, "\nmemra run: %s on %s | prompt %zu tokens, %.1f t/s | generated %d tokens, %.1f t/s\n",
               model_label(a.engine).c_str(), engine->backend().name().c_str(), prompt.size(),
               prompt.size() / std::max(t_prompt, 1e-9), generated, generated / std::max(t_gen, 1e-9));
}

CommandRegistrar reg("run", [](CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt (streams to stdout)");
  add_engine_args(*cmd, args->engine);
  cmd->add_option("-p,--prompt", args->prompt, "prompt text (default with the demo model: a Python def)");
  cmd->add_option("-f,--file", args->prompt_file, "read the prompt from a file");
  cmd->add_option("-n,--n-predict", args->n_predict, "tokens to generate")->check(CLI::Range(1, 1 << 24));
  SamplingParams& sp = args->sampling;
  cmd->add_option("--temp", sp.temperature, "temperature (0: greedy, the default)");
  cmd->add_option("--seed", sp.seed, "sampling seed");
  cmd->add_option("--top-k", sp.top_k, "keep the k most likely tokens (0: off)");
  cmd->add_option("--top-p", sp.top_p, "nucleus sampling mass (1: off)");
  cmd->add_option("--min-p", sp.min_p, "drop tokens below min-p x the best probability (0: off)");
  cmd->add_option("--repeat-penalty", sp.repetition_penalty, "repetition penalty (1: off)");
  cmd->add_option("--presence-penalty", sp.presence_penalty, "presence penalty (0: off)");
  cmd->add_option("--frequency-penalty", sp.frequency_penalty, "frequency penalty (0: off)");
  cmd->add_option("--repeat-last-n", sp.penalty_last_n, "tokens of history the penalties look at (-1: all)");
  cmd->add_flag("--no-echo", args->no_echo, "do not print the prompt before the generated text");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "keep generating past end-of-generation tokens");
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace memra::cli::cmd_run
