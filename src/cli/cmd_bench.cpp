// memra bench: prompt processing (pp) and generation (tg) throughput like llama-bench, plus the
// bandwidth floor for generation: bytes a decode step must move (weights once + every sequence's
// recurrent state read and written + its KV read) over the device's measured streaming-read
// bandwidth.
//
// --grammar FILE adds two generation tests per batch size, to price structured output (issue 13's
// target: a constrained B = 16 step within 10% of an unconstrained one): "tg+mask" applies an
// all-allowed mask to every row (the device's cost of masking: upload, masked sampling instead
// of a plain argmax), "tg+grammar" constrains every row by the grammar (a JSON Schema, or GBNF
// when the file is not JSON), its masks built on host threads in parallel before each step as the
// server's scheduler does; the host time of those builds is reported as well.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <map>
#include <random>

#include "cli/command.h"
#include "cli/git_commit.h"
#include "cli/model_source.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "step/sampling.h"
#include "tokenizer/tokenizer.h"


// A namespace of its own: the CLI compiles as one unity batch (MEMRA_UNITY), where each
// command's Args, run and registrar would otherwise collide.
namespace memra::cli::cmd_bench {
namespace {

struct Args {
  EngineArgs engine;
  int n_prompt = 512;
  int n_gen = 128;
  std::vector<int> depths{0};
  std::vector<int> batches{1};
  int reps = 5;
  std::string jsonl;
  bool verify_exact = false;
  std::string grammar_file;
  int deep = 0;  // > 0: a generation batch's first sequence starts this deep instead of at -d
};

// Distinct prefilled contexts a generation test draws its sequences from (sequence b starts from
// context b mod this; each sequence then gets its own random first token).
constexpr int kDistinctContexts = 8;

struct Stats {
  double median = 0, stddev = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  double mean = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  for (double x : v) s.stddev += (x - mean) * (x - mean);
  s.stddev = v.size() > 1 ? std::sqrt(s.stddev / (v.size() - 1)) : 0;
  return s;
}

// Greedy decoding: the backend's argmax, only the ids come back.
RowSampling greedy_row() {
  static const SamplingParams greedy;
  RowSampling row;
  row.params = &greedy;
  return row;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Bytes one decode step moves for one sequence at `depth` tokens of context, besides weights.
double sequence_step_bytes(const ModelConfig& c, const SequenceCache& s, double depth) {
  double bytes = 0;
  for (int l = 0; l < c.n_layer; ++l) {
    if (c.layer_mixer[l] == MixerKind::FullAttention) bytes += 2.0 * s.kv_row_bytes * (depth + 1);  // K and V read
    else bytes += 2.0 * (s.ssm_bytes + s.conv_bytes);  // state read and written
  }
  return bytes;
}

std::shared_ptr<const grammar::CompiledGrammar> load_grammar(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open --grammar file '{}'", path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
  try {
    if (!schema.is_discarded()) return grammar::CompiledGrammar::compile(grammar::json_schema_grammar(schema));
    return grammar::CompiledGrammar::compile(grammar::parse_gbnf(text));
  } catch (const grammar::GrammarError& err) {
    fail("--grammar '{}': {}", path, err.what());
  }
}

std::string model_type_name(const Engine& e) {
  // The dominant weight type: the most bytes of any type among the file's tensors.
  std::map<std::string, uint64_t> by_type;
  for (const auto& t : e.file().tensors()) by_type[quant::type_name(t.type)] += t.n_bytes;
  std::string best;
  uint64_t most = 0;
  for (auto& [k, v] : by_type)
    if (v > most) most = v, best = k;
  return best;
}

void run(const Args& a) {
  auto engine = open_engine(a.engine);
  Engine& e = *engine;
  const ModelConfig& c = e.config();
  if (a.deep > 0 && !a.grammar_file.empty()) fail("--deep and --grammar cannot be combined: run them separately");
  const int32_t max_ctx = std::max(*std::max_element(a.depths.begin(), a.depths.end()), a.deep) +
                          std::max(a.n_prompt, a.n_gen) + 8;
  if (max_ctx > e.ctx()) fail("depth + tokens ({}) exceed the context {} (raise --ctx)", max_ctx, e.ctx());
  const double bw = e.backend().measure_read_bandwidth();
  const std::string type = model_type_name(e);
  const std::string model = a.engine.model.empty() ? "demo" : std::filesystem::path(a.engine.model).filename().string();
  std::fprintf(stderr, "memra bench: %s | %s | backend %s | read bandwidth %s\n", model.c_str(), c.summary().c_str(),
               e.backend().name().c_str(), bw > 0 ? fmt::format("{:.2f} TB/s", bw / 1e12).c_str() : "n/a");

  std::ofstream jsonl_file;
  if (!a.jsonl.empty() && a.jsonl != "-") {
    jsonl_file.open(a.jsonl, std::ios::app);
    if (!jsonl_file) fail("cannot open --jsonl file '{}'", a.jsonl);
  }
  std::mt19937 rng(1234);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.n_vocab));
    return t;
  };

  std::printf("| model | type | backend | test | B | t/s | ms/step | floor ms | %% of floor |\n");
  std::printf("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  std::fflush(stdout);
  auto emit = [&](const std::string& test, int depth, int batch, const Stats& tps, double step_ms, double floor_ms) {
    std::string frac = floor_ms > 0 ? fmt::format("{:.1f}%", 100.0 * floor_ms / step_ms) : "-";
    std::printf("| %s | %s | %s | %s%s | %d | %.2f ± %.2f | %.3f | %s | %s |\n", model.c_str(), type.c_str(),
                e.backend().name().c_str(), test.c_str(), depth ? fmt::format(" @ d{}", depth).c_str() : "", batch,
                tps.median, tps.stddev, step_ms, floor_ms > 0 ? fmt::format("{:.3f}", floor_ms).c_str() : "-",
                frac.c_str());
    std::fflush(stdout);
    nlohmann::json j = {{"model", model}, {"arch", c.arch_str}, {"type", type}, {"backend", e.backend().name()},
                        {"test", test}, {"depth", depth}, {"batch", batch}, {"tps_median", tps.median},
                        {"tps_stddev", tps.stddev}, {"step_ms", step_ms}, {"floor_ms", floor_ms},
                        {"frac_floor", floor_ms > 0 ? floor_ms / step_ms : 0.0}, {"read_bw_Bps", bw},
                        {"reps", a.reps}, {"deep", a.deep}, {"commit", git_commit()}};
    if (a.jsonl == "-") std::fprintf(stderr, "%s\n", j.dump().c_str());
    else if (jsonl_file) jsonl_file << j.dump() << "\n";
  };

  std::shared_ptr<const grammar::CompiledGrammar> grammar_g;
  std::shared_ptr<const grammar::TokenVocab> grammar_vocab;
  std::vector<uint32_t> all_allowed;
  if (!a.grammar_file.empty()) {
    grammar_g = load_grammar(a.grammar_file);
    if (e.tokenizer().n_vocab() != c.n_vocab)
      fail("--grammar needs the tokenizer to cover the model's vocabulary ({} vs {} ids)", e.tokenizer().n_vocab(), c.n_vocab);
    grammar_vocab = grammar::TokenVocab::from_tokenizer(e.tokenizer());
    all_allowed.assign(grammar_vocab->mask_words(), ~0u);
  }

  for (int depth : a.depths) {
    // ---- prompt processing ----
    if (a.n_prompt > 0) {
      std::vector<double> tps;
      for (int r = 0; r <= a.reps; ++r) {  // rep 0 warms up
        auto seq = e.new_sequence();
        if (depth > 0) e.prefill(*seq, random_tokens(depth), nullptr);
        auto prompt = random_tokens(a.n_prompt);
        std::vector<float> last;
        e.backend().synchronize();
        double t0 = now_s();
        e.prefill(*seq, prompt, &last);
        double t = now_s() - t0;
        if (r > 0) tps.push_back(a.n_prompt / t);
      }
      Stats s = stats(tps);
      emit(fmt::format("pp{}", a.n_prompt), depth, 1, s, 1e3 * a.n_prompt / s.median / a.n_prompt, 0);
    }
    // ---- generation ----
    if (a.n_gen <= 0) continue;
    // Contexts of `depth` random tokens, prefilled once and copied into every sequence that starts
    // from them (B = 64 at depth 4096 would otherwise prefill 256k tokens per repetition).
    const int max_batch = *std::max_element(a.batches.begin(), a.batches.end());
    std::vector<std::unique_ptr<SequenceCache>> bases;
    if (depth > 0) {
      const int n_bases = std::min(max_batch, kDistinctContexts);
      std::fprintf(stderr, "memra bench: prefilling %d context(s) of %d tokens\n", n_bases, depth);
      for (int i = 0; i < n_bases; ++i) {
        bases.push_back(e.new_sequence());
        e.prefill(*bases.back(), random_tokens(depth), nullptr);
      }
    }
    // --deep: one context of that many tokens for each batch's first sequence (a long conversation
    // among short ones: every other sequence's attention has far fewer keys).
    std::unique_ptr<SequenceCache> deep_base;
    if (a.deep > 0) {
      std::fprintf(stderr, "memra bench: prefilling 1 context of %d tokens (--deep)\n", a.deep);
      deep_base = e.new_sequence();
      e.prefill(*deep_base, random_tokens(a.deep), nullptr);
    }
    auto start_sequence = [&](int b) {
      auto seq = e.new_sequence();
      if (b == 0 && deep_base) {
        seq->copy_from(*deep_base, /*share_kv=*/false);
        return seq;
      }
      // KV copied, not shared (step/kv_blocks.h): every sequence must stream KV of its own, as
      // distinct requests do, or the measured decode would read shared blocks from cache.
      if (!bases.empty()) seq->copy_from(*bases[static_cast<size_t>(b) % bases.size()], /*share_kv=*/false);
      return seq;
    };
    for (int batch : a.batches) {
      std::vector<double> tps;
      double step_bytes = 0;
      std::vector<std::vector<int32_t>> streams(batch);
      for (int r = 0; r <= a.reps; ++r) {
        std::vector<std::unique_ptr<SequenceCache>> seqs;
        std::vector<SequenceCache*> ptrs;
        std::vector<int32_t> tokens;
        for (int b = 0; b < batch; ++b) {
          seqs.push_back(start_sequence(b));
          ptrs.push_back(seqs.back().get());
          tokens.push_back(random_tokens(1)[0]);
          streams[b] = {tokens.back()};
        }
        step_bytes = static_cast<double>(e.model().decode_weight_bytes()) +
                     (batch - (deep_base ? 1 : 0)) * sequence_step_bytes(c, *seqs[0], depth + a.n_gen / 2.0) +
                     (deep_base ? sequence_step_bytes(c, *seqs[0], a.deep + a.n_gen / 2.0) : 0.0);
        const std::vector<RowSampling> greedy(static_cast<size_t>(batch), greedy_row());
        StepOutput out;
        for (int w = 0; w < 2; ++w) {  // warm-up steps (graph capture, caches)
          e.decode(ptrs, tokens, StepSampling{greedy}, out);
          tokens = out.tokens;
        }
        double t0 = now_s();
        for (int i = 0; i < a.n_gen; ++i) {
          e.decode(ptrs, tokens, StepSampling{greedy}, out);
          tokens = out.tokens;
          if (a.verify_exact && r == a.reps)
            for (int b = 0; b < batch; ++b) streams[b].push_back(out.tokens[b]);
        }
        double t = now_s() - t0;
        if (r > 0) tps.push_back(static_cast<double>(batch) * a.n_gen / t);
      }
      if (a.verify_exact && batch > 1) {
        // Re-run every sequence of the last repetition alone: its tokens must be the batched ones.
        int bad = 0;
        for (int b = 0; b < batch; ++b) {
          auto seq = start_sequence(b);
          SequenceCache* sp = seq.get();
          std::vector<int32_t> tok{streams[b][0]};
          const RowSampling greedy = greedy_row();
          StepOutput out;
          // the same two warm-up steps, then the timed ones
          std::vector<int32_t> alone{tok[0]};
          for (int i = 0; i < 2 + a.n_gen; ++i) {
            e.decode(std::span<SequenceCache* const>(&sp, 1), tok, StepSampling{std::span(&greedy, 1)}, out);
            tok = out.tokens;
            if (i >= 2) alone.push_back(out.tokens[0]);
          }
          if (alone != streams[b]) ++bad;
        }
        std::fprintf(stderr, "memra bench: verify-exact B=%d depth %d: %d of %d sequences differ from their run alone\n",
                     batch, depth, bad, batch);
        if (bad) fail("verify-exact: {} of {} sequences of B={} produced different tokens alone", bad, batch, batch);
      }
      Stats s = stats(tps);
      const double step_ms = 1e3 * batch / s.median;
      const double floor_ms = bw > 0 ? 1e3 * step_bytes / bw : 0;
      emit(a.deep > 0 ? fmt::format("tg{} (first @ d{})", a.n_gen, a.deep) : fmt::format("tg{}", a.n_gen), depth, batch,
           s, step_ms, floor_ms);
      if (!grammar_g) continue;
      for (const bool real : {false, true}) {
        std::vector<double> tps_c, host_ms;
        for (int r = 0; r <= a.reps; ++r) {
          std::vector<std::unique_ptr<SequenceCache>> seqs;
          std::vector<SequenceCache*> ptrs;
          std::vector<int32_t> tokens;
          std::vector<std::unique_ptr<grammar::Matcher>> matchers;
          std::vector<std::vector<uint32_t>> masks(static_cast<size_t>(batch), all_allowed);
          for (int b = 0; b < batch; ++b) {
            seqs.push_back(start_sequence(b));
            ptrs.push_back(seqs.back().get());
            tokens.push_back(random_tokens(1)[0]);
            matchers.push_back(std::make_unique<grammar::Matcher>(grammar_g, grammar_vocab));
          }
          std::vector<RowSampling> rows(static_cast<size_t>(batch), greedy_row());
          for (int b = 0; b < batch; ++b) {
            rows[b].allowed = masks[b].data();
            rows[b].allowed_words = static_cast<int64_t>(masks[b].size());
          }
          StepOutput out;
          double host = 0;
          const int warm = 2;
          double t0 = 0;
          for (int i = 0; i < warm + a.n_gen; ++i) {
            if (i == warm) {
              e.backend().synchronize();
              t0 = now_s();
              host = 0;
            }
            if (real) {
              const double h0 = now_s();
#pragma omp parallel for schedule(dynamic, 1) if (batch > 1)
              for (int b = 0; b < batch; ++b) {
                // A finished or dead-ended document starts over: every step stays constrained.
                if (matchers[b]->fill_mask(masks[b]) == 0) {
                  matchers[b] = std::make_unique<grammar::Matcher>(grammar_g, grammar_vocab);
                  matchers[b]->fill_mask(masks[b]);
                }
              }
              host += now_s() - h0;
            }
            e.decode(ptrs, tokens, StepSampling{rows}, out);
            tokens = out.tokens;
            if (real)
              for (int b = 0; b < batch; ++b)
                if (!matchers[b]->accept_token(tokens[b]) || matchers[b]->finished())
                  matchers[b] = std::make_unique<grammar::Matcher>(grammar_g, grammar_vocab);
          }
          const double t = now_s() - t0;
          if (r > 0) {
            tps_c.push_back(static_cast<double>(batch) * a.n_gen / t);
            host_ms.push_back(1e3 * host / a.n_gen);
          }
        }
        Stats sc = stats(tps_c);
        const double step_c = 1e3 * batch / sc.median;
        emit(fmt::format("tg{}+{}", a.n_gen, real ? "grammar" : "mask"), depth, batch, sc, step_c, floor_ms);
        std::fprintf(stderr, "memra bench: %s B=%d: %.3f ms/step (%+.1f%% vs tg), of which building masks on the host %.3f ms, "
                     "mask upload %.1f KiB/step\n", real ? "grammar" : "all-allowed mask", batch, step_c,
                     100.0 * (step_c / step_ms - 1), real ? stats(host_ms).median : 0.0,
                     batch * all_allowed.size() * 4 / 1024.0);
      }
    }
  }
}

CommandRegistrar reg("bench", [](CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("bench", "Prompt-processing and generation throughput, with the bandwidth floor");
  add_engine_args(*cmd, args->engine);
  cmd->add_option("-p,--n-prompt", args->n_prompt, "prompt tokens for the pp test (0: skip)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-n,--n-gen", args->n_gen, "generated tokens for the tg test (0: skip)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-d,--depth", args->depths, "context depth(s) before the test, comma-separated")
      ->delimiter(',')->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-b,--batch", args->batches, "decode batch size(s) for tg, comma-separated")
      ->delimiter(',')->check(CLI::Range(1, 4096));
  cmd->add_option("-r,--reps", args->reps, "repetitions (median and stddev are reported)")->check(CLI::Range(1, 1000));
  cmd->add_flag("--verify-exact", args->verify_exact,
                "re-run each sequence of a batch alone and fail if any token differs");
  cmd->add_option("--deep", args->deep,
                  "tg: the first sequence of each batch starts this many tokens deep, the others at -d (mixed "
                  "depths, as in serving; 0: every sequence at -d)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--jsonl", args->jsonl, "append one JSON object per result to this file ('-': stderr)");
  cmd->add_option("--grammar", args->grammar_file,
                  "also run tg with every row constrained by this JSON Schema (or GBNF) file, and with an all-allowed "
                  "mask (the cost of structured output)");
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace memra::cli::cmd_bench
