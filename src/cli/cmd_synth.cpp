// `memra synth`: write a GGUF with random weights in the exact layout of a real model shape.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <memory>
#include <unistd.h>

#include "cli/command.h"
#include "common/error.h"
#include "synth/synth.h"

namespace memra::cli::cmd_synth {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
// The first Ctrl-C asks the write to stop cleanly (the partial file is removed); a second one
// kills at once.
void on_interrupt(int sig) {
  g_interrupted = 1;
  std::signal(sig, SIG_DFL);
}

// Restores the previous SIGINT/SIGTERM handlers on scope exit.
struct InterruptScope {
  using Handler = void (*)(int);
  Handler old_int, old_term;
  InterruptScope() {
    g_interrupted = 0;
    old_int = std::signal(SIGINT, on_interrupt);
    old_term = std::signal(SIGTERM, on_interrupt);
  }
  ~InterruptScope() {
    std::signal(SIGINT, old_int);
    std::signal(SIGTERM, old_term);
  }
};

void list_shapes() {
  std::printf("%-10s %-10s %s\n", "arch", "shape", "dimensions");
  for (const auto& s : synth::known_shapes())
    std::printf("%-10s %-10s %s\n", s.arch.c_str(), s.shape.c_str(), s.summary.c_str());
}

void run(const synth::SynthOptions& opt) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  double last_report = -1;
  InterruptScope interrupts;
  synth::synth_model(opt, [&](const synth::SynthProgress& p) {
    if (g_interrupted) fail("interrupted; no file was written to '{}'", synth::part_paths(opt.path, opt.parts)[0]);
    const double gb = static_cast<double>(p.data_bytes_written) / 1e9;
    const double total_gb = static_cast<double>(p.data_bytes_total) / 1e9;
    const double mbps = p.seconds > 0 ? static_cast<double>(p.data_bytes_written) / 1e6 / p.seconds : 0;
    if (p.done) {
      if (tty && last_report >= 0) std::fprintf(stderr, "\n");
      const std::vector<std::string> paths = synth::part_paths(opt.path, opt.parts);
      const std::string where =
          paths.size() == 1   ? paths[0]
          : opt.only_part > 0 ? fmt::format("{} (part {} of {})", paths[static_cast<size_t>(opt.only_part - 1)],
                                            opt.only_part, paths.size())
                              : fmt::format("{} (+ {} more parts)", paths[0], paths.size() - 1);
      std::fprintf(stderr, "memra synth: wrote %s: %s %s %s, %zu tensors, %.2f GB of weights in %.1f s (%.0f MB/s)\n",
                   where.c_str(), opt.arch.c_str(), opt.shape.c_str(), opt.type.c_str(), p.n_tensors, total_gb,
                   p.seconds, mbps);
      return;
    }
    // A line every 2 s (or redrawn in place every 0.25 s on a terminal).
    if (p.seconds - last_report < (tty ? 0.25 : 2.0)) return;
    last_report = p.seconds;
    std::fprintf(stderr, "%stensor %zu/%zu %-36.36s %6.2f / %.2f GB  %6.0f MB/s%s", tty ? "\r" : "",
                 p.tensor_index + 1, p.n_tensors, std::string(p.tensor_name).c_str(), gb, total_gb, mbps,
                 tty ? "" : "\n");
    std::fflush(stderr);
  });
}

const CommandRegistrar kRegistrar("synth", [](CLI::App& app) {
  auto opt = std::make_shared<synth::SynthOptions>();
  auto list = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "synth", "Write a GGUF with random weights in the exact layout of a real model shape (for benchmarks and tests)");
  cmd->add_option("--arch", opt->arch, "Architecture: qwen35, qwen35moe, qwen3next, qwen3");
  cmd->add_option("--shape", opt->shape, "Model shape, e.g. 9b, 35b-a3b, tiny (see --list)");
  cmd->add_option("--type", opt->type, "Weight type: q4_0, q8_0, q4_k, q5_k, q6_k, bf16, f16, f32, q3_k, q5_0, iq4_nl, iq4_xs");
  cmd->add_option("-o,--output", opt->path, "Output GGUF file");
  cmd->add_option("--seed", opt->seed, "Random seed (same seed, same bytes)")->capture_default_str();
  cmd->add_option("--layers", opt->n_layers, "Write only the first N blocks (0 = all)")->capture_default_str();
  cmd->add_option("--parts", opt->parts,
                  "Split into N files of about equal size, FILE-0000i-of-0000N.gguf (llama.cpp's split layout; "
                  "memra opens the first)")
      ->capture_default_str();
  cmd->add_option("--only-part", opt->only_part,
                  "With --parts N: write only part I (1..N; the same bytes as in the whole run), e.g. to put the "
                  "parts on different disks (0 = all)")
      ->capture_default_str();
  cmd->add_flag("--list", *list, "List the known architectures and shapes");
  cmd->callback([opt, list] {
    if (*list) {
      list_shapes();
      return;
    }
    if (opt->arch.empty() || opt->shape.empty() || opt->type.empty() || opt->path.empty())
      fail("synth needs --arch, --shape, --type and -o FILE.gguf (see memra synth --list for shapes)");
    run(*opt);
  });
});

}  // namespace
}  // namespace memra::cli::cmd_synth
