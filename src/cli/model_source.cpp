#include "cli/model_source.h"

#include <CLI/CLI.hpp>

#include <filesystem>

#include "common/error.h"
#include "common/knobs.h"

#if MEMRA_EMBED_DEMO
extern "C" const uint8_t memra_demo_model_begin[];
extern "C" const uint8_t memra_demo_model_end[];
#endif

namespace memra::cli {

void add_engine_args(CLI::App& cmd, EngineArgs& a, bool model_required) {
  auto* m = cmd.add_option("-m,--model", a.model,
                           model_required ? "GGUF model file" : "GGUF model file (default: the bundled demo model)");
  if (model_required) m->required();
  cmd.add_option("--device", a.device, "auto, cpu or cuda (default: MEMRA_DEVICE, else auto)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd.add_option("--ctx", a.ctx, "context size per sequence (default: min(training context, 32768))")
      ->check(CLI::Range(1, 1 << 24));
  cmd.add_option("--chunk", a.prefill_chunk, "prompt tokens per prefill step (default: MEMRA_PREFILL_CHUNK)")
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_flag("-v,--verbose", a.verbose, "print model, backend and knob details to stderr");
}

std::string model_label(const EngineArgs& a) { return a.model.empty() ? "the bundled demo model" : a.model; }

std::unique_ptr<Engine> open_engine(const EngineArgs& a) {
  EngineOptions o;
  o.device = a.device;
  o.ctx = a.ctx;
  o.prefill_chunk = a.prefill_chunk;
  o.verbose = a.verbose || knobs::get_bool("MEMRA_VERBOSE");
  if (!a.model.empty()) return Engine::open(a.model, o);
#if MEMRA_EMBED_DEMO
  return Engine::open_memory(memra_demo_model_begin,
                             static_cast<size_t>(memra_demo_model_end - memra_demo_model_begin),
                             "<bundled demo model>", o);
#else
  if (!std::filesystem::exists(MEMRA_DEMO_MODEL_PATH))
    fail("no -m given and this build has no bundled demo model (expected {}); pass -m MODEL.gguf",
         MEMRA_DEMO_MODEL_PATH);
  return Engine::open(MEMRA_DEMO_MODEL_PATH, o);
#endif
}

}  // namespace memra::cli
