// memra's side of bench/grammar_bench.py: compiles each schema of a corpus, times the token mask
// at every token of the corpus text (the text a model would write), and generates a few outputs
// by mask-guided random walks (for the validity check, done in Python with jsonschema).
//
// Input (JSONL, one schema per line): {"id", "schema", "tokens": [ids of the text]}.
// Output (JSONL): {"id", "ok", "error", "compile_us", "mask_us": [...], "rejected_at", "walks": [...]}.
// The walk policy is the one grammar_bench.py uses for the other engines.
// --batch B: then a decode-step simulation for the GPU target (a constrained B-row step within 10%
// of an unconstrained one): B rows, each a different corpus schema following its text, every
// step building all B masks; per step, the CPU time of the slowest row (the step's host latency
// with a thread per row, as the scheduler builds them) and of all rows (one thread), first with a
// cold token-set cache (a fresh vocabulary: a server's first requests of new schemas), then warm.
// One more output line: {"batch": B, "cold": {...}, "warm": {...}, "mask_bytes": upload per step}.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
namespace g = memra::grammar;

namespace {

// CPU time of this thread in microseconds: the machine is shared, and wall time would measure the
// other users too. Mask computation and compilation are single-threaded.
double cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}
double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// Uniform over the allowed tokens for the first `free_steps`, then the end token when allowed,
// else the allowed token that closes most (each '"', '}' or ']' counts 4, every other byte -1).
json random_walk(const std::shared_ptr<const g::CompiledGrammar>& cg, const std::shared_ptr<const g::TokenVocab>& vocab,
                 uint64_t seed, int free_steps, int max_steps) {
  std::mt19937_64 rng(seed);
  g::Matcher m(cg, vocab);
  std::vector<uint32_t> mask(vocab->mask_words());
  std::string text;
  bool ended = false;
  for (int step = 0; step < max_steps; ++step) {
    if (m.fill_mask(mask) == 0) break;
    std::vector<int32_t> allowed;
    for (size_t w = 0; w < mask.size(); ++w)
      for (uint32_t bits = mask[w]; bits; bits &= bits - 1)
        allowed.push_back(static_cast<int32_t>(w * 32 + static_cast<uint32_t>(__builtin_ctz(bits))));
    int32_t pick = allowed[rng() % allowed.size()];
    if (step >= free_steps) {
      if (m.can_end()) {
        pick = vocab->end_ids()[0];
      } else {
        int64_t best = INT64_MIN;
        for (int32_t id : allowed) {
          int64_t score = 0;
          for (char c : vocab->bytes(id)) score += (c == '"' || c == '}' || c == ']') ? 4 : -1;
          score = score * 1024 + static_cast<int64_t>(rng() % 1024);
          if (score > best) best = score, pick = id;
        }
      }
    }
    if (!m.accept_token(pick)) break;
    if (vocab->is_end(pick)) {
      ended = true;
      break;
    }
    text += vocab->bytes(pick);
  }
  return json{{"text", text}, {"ended", ended}};
}

// Per step of B rows stepping through their texts together: CPU time of the slowest row's mask
// and of all rows' masks.
json batch_steps(const std::vector<std::pair<std::shared_ptr<const g::CompiledGrammar>, std::vector<int32_t>>>& rows,
                 const std::shared_ptr<const g::TokenVocab>& vocab) {
  std::vector<std::unique_ptr<g::Matcher>> ms;
  for (const auto& r : rows) ms.push_back(std::make_unique<g::Matcher>(r.first, vocab));
  std::vector<uint32_t> mask(vocab->mask_words());
  json max_us = json::array(), sum_us = json::array();
  for (size_t t = 0;; ++t) {
    double worst = 0, total = 0;
    bool any = false;
    for (size_t b = 0; b < rows.size(); ++b) {
      const auto& tokens = rows[b].second;
      if (t > tokens.size()) continue;
      any = true;
      const double c0 = cpu_us();
      ms[b]->fill_mask(mask);
      const double dt = cpu_us() - c0;
      worst = std::max(worst, dt);
      total += dt;
      ms[b]->accept_token(t < tokens.size() ? tokens[t] : vocab->end_ids()[0]);
    }
    if (!any) break;
    max_us.push_back(worst);
    sum_us.push_back(total);
  }
  return json{{"step_max_us", max_us}, {"step_sum_us", sum_us}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string vocab_path, corpus_path, out_path;
  int walks = 2;
  int batch = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--vocab") vocab_path = argv[i + 1];
    else if (k == "--corpus") corpus_path = argv[i + 1];
    else if (k == "--out") out_path = argv[i + 1];
    else if (k == "--walks") walks = std::stoi(argv[i + 1]);
    else if (k == "--batch") batch = std::stoi(argv[i + 1]);
    else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  if (vocab_path.empty() || corpus_path.empty() || out_path.empty()) {
    std::cerr << "usage: memra_grammar_bench --vocab V.gguf --corpus C.jsonl --out R.jsonl [--walks N] [--batch B]\n";
    return 2;
  }
  try {
    auto file = memra::gguf::File::open(vocab_path);
    auto tok = memra::Tokenizer::from_gguf(*file);
    auto t0 = Clock::now();
    std::shared_ptr<const g::TokenVocab> vocab = g::TokenVocab::from_tokenizer(*tok);
    std::fprintf(stderr, "vocabulary: %d tokens, %zu trie nodes, built in %.1f ms\n", vocab->n_vocab(),
                 vocab->trie().n_nodes(), us_since(t0) / 1000);
    std::ifstream in(corpus_path);
    std::ofstream out(out_path);
    std::string line;
    std::vector<uint32_t> mask(vocab->mask_words());
    int n = 0;
    std::vector<std::pair<std::shared_ptr<const g::CompiledGrammar>, std::vector<int32_t>>> batch_rows;
    while (std::getline(in, line)) {
      const json c = json::parse(line);
      json r{{"id", c["id"]}};
      std::shared_ptr<const g::CompiledGrammar> cg;
      double c0 = cpu_us();
      try {
        cg = g::CompiledGrammar::compile(g::json_schema_grammar(c["schema"]));
        r["compile_us"] = cpu_us() - c0;
        r["ok"] = true;
      } catch (const g::GrammarError& e) {
        r["ok"] = false;
        r["error"] = e.what();
      }
      if (cg && static_cast<int>(batch_rows.size()) < batch)
        batch_rows.emplace_back(cg, c["tokens"].get<std::vector<int32_t>>());
      if (cg) {
        g::Matcher m(cg, vocab);
        json times = json::array();
        int rejected_at = -1;
        const auto& tokens = c["tokens"];
        for (size_t i = 0; i <= tokens.size(); ++i) {
          c0 = cpu_us();
          m.fill_mask(mask);
          times.push_back(cpu_us() - c0);
          const int32_t id = i < tokens.size() ? tokens[i].get<int32_t>() : vocab->end_ids()[0];
          if (!((mask[static_cast<size_t>(id) / 32] >> (id % 32)) & 1u) || !m.accept_token(id)) {
            rejected_at = static_cast<int>(i);
            break;
          }
        }
        r["mask_us"] = times;
        r["rejected_at"] = rejected_at;
        json w = json::array();
        for (int k = 0; k < walks; ++k) w.push_back(random_walk(cg, vocab, 1000 * static_cast<uint64_t>(n) + static_cast<uint64_t>(k), 60, 400));
        r["walks"] = w;
      }
      out << r.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      ++n;
    }
    std::fprintf(stderr, "%d schemas; token-set cache: %zu entries, %.1f MiB\n", n, vocab->cache_entries(),
                 static_cast<double>(vocab->cache_bytes()) / (1 << 20));
    if (!batch_rows.empty()) {
      std::shared_ptr<const g::TokenVocab> fresh = g::TokenVocab::from_tokenizer(*tok);
      json r{{"batch", batch_rows.size()}, {"mask_bytes", batch_rows.size() * vocab->mask_words() * 4}};
      r["cold"] = batch_steps(batch_rows, fresh);
      r["warm"] = batch_steps(batch_rows, fresh);
      out << r.dump() << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "memra_grammar_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
