// Subcommand registry: each `memra <cmd>` lives in its own cmd_<name>.cpp and registers itself
// with a static CommandRegistrar, so adding a command touches no shared file.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI { class App; }

namespace memra::cli {

struct CommandSpec {
  std::string name;
  // Adds the subcommand to `app` and sets its callback. Callbacks throw memra::Error for user
  // errors (main prints "memra <cmd>: <message>" and exits 1).
  std::function<void(CLI::App& app)> setup;
};

std::vector<CommandSpec>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::function<void(CLI::App&)> setup) {
    command_registry().push_back({std::move(name), std::move(setup)});
  }
};

}  // namespace memra::cli
