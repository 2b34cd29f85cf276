// memra: the command-line entry point. Subcommands register themselves (command.h).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "cli/command.h"
#include "cli/git_commit.h"
#include "common/error.h"

namespace memra::cli {
std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
}
}  // namespace memra::cli

int main(int argc, char** argv) {
  CLI::App app{"memra: fast, exactly reproducible LLM inference for GGUF models (Qwen3.5 first)"};
  app.require_subcommand(1);
  // The commit too: a benchmark on another machine names the code it ran (scripts/gpu-check.sh).
  app.set_version_flag("--version", std::string("memra 0.1.0 (commit ") + memra::cli::git_commit() + ")");
  // --help shows every option's default (subcommands inherit this).
  app.option_defaults()->always_capture_default();
  auto& registry = memra::cli::command_registry();
  std::sort(registry.begin(), registry.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& spec : registry) spec.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Usage errors exit 2 (CLI11 prints the message and the hint to --help).
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const memra::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "memra: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "memra: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "memra: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
