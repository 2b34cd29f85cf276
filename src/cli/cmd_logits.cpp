// memra logits: teacher-forced logits of a token sequence, as raw little-endian float32
// [n_ids, n_vocab]. Used to compare against reference implementations.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "cli/command.h"
#include "cli/model_source.h"
#include "common/error.h"

namespace memra::cli::cmd_logits {
namespace {

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX) fail("--ids: '{}' is not a token id", item);
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) fail("--ids: no token ids given");
  return ids;
}

struct Args {
  EngineArgs engine;
  std::string ids, out;
  std::string mode = "prefill";
  int chunk = 0;
};

void run(const Args& a) {
  auto ids = parse_ids(a.ids);
  auto engine = open_engine(a.engine);
  const int32_t n_vocab = engine->config().n_vocab;
  for (int32_t id : ids)
    if (id >= n_vocab) fail("--ids: token id {} is out of range for a vocabulary of {}", id, n_vocab);
  std::vector<float> logits;
  auto seq = engine->new_sequence();
  if (a.mode == "decode") {
    logits.resize(ids.size() * static_cast<size_t>(n_vocab));
    StepOutput step;
    SequenceCache* s = seq.get();
    for (size_t i = 0; i < ids.size(); ++i) {
      engine->decode(std::span<SequenceCache* const>(&s, 1), std::span<const int32_t>(&ids[i], 1), {}, step);
      std::copy(step.logits.begin(), step.logits.end(), logits.begin() + i * n_vocab);
    }
  } else {
    engine->prefill(*seq, ids, nullptr, &logits);
  }
  std::FILE* f = std::fopen(a.out.c_str(), "wb");
  if (!f) fail("cannot open '{}' for writing", a.out);
  size_t written = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  bool ok = written == logits.size() && std::fclose(f) == 0;
  if (!ok) fail("writing '{}' failed (disk full?)", a.out);
  std::fprintf(stderr, "memra logits: wrote %zu x %d float32 to %s\n", ids.size(), n_vocab, a.out.c_str());
}

CommandRegistrar reg("logits", [](CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("logits", "Write teacher-forced logits [n_ids, n_vocab] as raw float32");
  add_engine_args(*cmd, args->engine);
  cmd->add_option("--ids", args->ids, "comma-separated token ids")->required();
  cmd->add_option("-o,--out", args->out, "output file (raw little-endian float32)")->required();
  cmd->add_option("--mode", args->mode, "prefill (chunked prompt) or decode (one token per step)")
      ->check(CLI::IsMember({"prefill", "decode"}));
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace memra::cli::cmd_logits
