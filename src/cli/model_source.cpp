#include "cli/model_source.h"

#include "gguf/gguf.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "common/knobs.h"
#include "engine/options.h"

#if MEMRA_EMBED_DEMO
extern "C" const uint8_t memra_demo_model_begin[];
extern "C" const uint8_t memra_demo_model_end[];
#endif

namespace memra::cli {

void add_engine_args(CLI::App& cmd, EngineArgs& a, bool model_required) {
  auto* m = cmd.add_option("-m,--model", a.model, "GGUF model file");
  if (model_required) m->required();
  else m->default_str("the bundled demo model");
  cmd.add_option("--device", a.device, "auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->default_str("MEMRA_DEVICE, else auto");
  cmd.add_option("--ctx", a.ctx, "context size per sequence")
      ->check(CLI::Range(1, 1 << 24))
      ->default_str("the training context, at most 32768");
  cmd.add_option("--chunk", a.prefill_chunk, "prompt tokens per prefill step (the chunk grid)")
      ->check(CLI::Range(1, 1 << 20))
      ->default_str("MEMRA_PREFILL_CHUNK, else 512");
  cmd.add_flag("-v,--verbose", a.verbose, "print model, backend and knob details to stderr");
}

std::string model_label(const EngineArgs& a) { return a.model.empty() ? "the bundled demo model" : a.model; }

EngineOptions engine_options(const EngineArgs& a) {
  EngineOptions o = engine_options_from_knobs();
  if (!a.device.empty()) o.device = a.device;
  o.ctx = a.ctx;
  if (a.prefill_chunk > 0) o.prefill_chunk = a.prefill_chunk;
  o.verbose = o.verbose || a.verbose;
  return o;
}

namespace {
std::unique_ptr<Engine> open_model(const EngineArgs& a, const EngineOptions& o) {
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
}  // namespace

std::unique_ptr<gguf::File> open_model_file(const std::string& path) {
  if (!path.empty()) return gguf::File::open(path);
#if MEMRA_EMBED_DEMO
  return gguf::File::from_memory(memra_demo_model_begin,
                                 static_cast<size_t>(memra_demo_model_end - memra_demo_model_begin),
                                 "<bundled demo model>");
#else
  if (!std::filesystem::exists(MEMRA_DEMO_MODEL_PATH))
    fail("no -m given and this build has no bundled demo model (expected {}); pass -m MODEL.gguf",
         MEMRA_DEMO_MODEL_PATH);
  return gguf::File::open(MEMRA_DEMO_MODEL_PATH);
#endif
}

std::unique_ptr<Engine> open_engine(const EngineArgs& a) {
  const EngineOptions o = engine_options(a);
  std::unique_ptr<Engine> engine = open_model(a, o);
  if (o.verbose) std::fprintf(stderr, "memra: knobs\n%s", knobs::describe_all().c_str());
  return engine;
}

}  // namespace memra::cli
