// Where a command's model comes from: -m PATH, or the demo model bundled into the binary.
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"

namespace CLI { class App; }
namespace memra::gguf { class File; }

namespace memra::cli {

// The engine flags of a model-taking command. Unset flags keep what the MEMRA_* knobs say.
struct EngineArgs {
  std::string model;  // empty: the bundled demo model
  std::string device;  // empty: MEMRA_DEVICE (default auto)
  int ctx = 0;
  int prefill_chunk = 0;  // 0: MEMRA_PREFILL_CHUNK
  bool verbose = false;
};

// Adds -m/--model, --device, --ctx, --chunk, -v/--verbose to a subcommand.
void add_engine_args(CLI::App& cmd, EngineArgs& args, bool model_required = false);
// The knobs parsed once (engine/options.h), the flags applied over them.
EngineOptions engine_options(const EngineArgs& args);
std::unique_ptr<Engine> open_engine(const EngineArgs& args);
// The GGUF file alone (no weights loaded): PATH, or the bundled demo model when empty.
std::unique_ptr<gguf::File> open_model_file(const std::string& path);
// "the bundled demo model" or the path, for messages.
std::string model_label(const EngineArgs& args);

}  // namespace memra::cli
