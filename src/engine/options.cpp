#include "engine/options.h"

#include "common/knobs.h"

namespace memra {

EngineOptions engine_options_from_knobs() {
  EngineOptions o;
  o.device = knobs::get_string("MEMRA_DEVICE");
  o.prefill_chunk = static_cast<int32_t>(knobs::get_int("MEMRA_PREFILL_CHUNK"));
  o.phase_timing = knobs::get_bool("MEMRA_BATCH_PHASE");
  o.verbose = knobs::get_bool("MEMRA_VERBOSE");
  o.ssm_type = knobs::get_string("MEMRA_SSM_STATE") == "bf16" ? GgmlType::BF16 : GgmlType::F32;
  o.prefix_cache.budget_mb = knobs::get_int("MEMRA_PREFIX_CACHE_MB");
  o.prefix_cache.spacing = static_cast<int32_t>(knobs::get_int("MEMRA_PREFIX_SPACING"));
  o.cpu.threads = static_cast<int32_t>(knobs::get_int("MEMRA_THREADS"));
  CudaOptions& c = o.cuda;
  c.scratch_mb = knobs::get_int("MEMRA_CUDA_SCRATCH_MB");
  c.graphs = knobs::get_bool("MEMRA_CUDA_GRAPHS");
  c.pdl = knobs::get_bool("MEMRA_CUDA_PDL");
  c.stream_parts = static_cast<int32_t>(knobs::get_int("MEMRA_CUDA_STREAM_PARTS"));
  c.kv_type = knobs::get_string("MEMRA_CUDA_KV") == "q8_0" ? GgmlType::Q8_0 : GgmlType::F16;
  c.profile = knobs::get_bool("MEMRA_CUDA_PROFILE");
  return o;
}

}  // namespace memra
