// Where a command's model comes from: -m PATH, or the demo model bundled into the binary.
#pragma once

#include <memory>
#include <string>

#include "runtime/engine.h"

namespace CLI { class App; }

namespace memra::cli {

struct EngineArgs {
  std::string model;  // empty: the bundled demo model
  std::string device;  // empty: MEMRA_DEVICE (default auto)
  int ctx = 0;
  int prefill_chunk = 0;  // 0: MEMRA_PREFILL_CHUNK
  bool verbose = false;
};

// Adds -m/--model, --device, --ctx, -v/--verbose to a subcommand.
void add_engine_args(CLI::App& cmd, EngineArgs& args, bool model_required = false);
std::unique_ptr<Engine> open_engine(const EngineArgs& args);
// "the bundled demo model" or the path, for messages.
std::string model_label(const EngineArgs& args);

}  // namespace memra::cli
