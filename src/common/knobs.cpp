#include "common/knobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace memra::knobs {
namespace {

// The registry. Add a knob here, parse it into its option struct in engine/options.cpp (the one
// place that reads them), list it in the README; tests/knobs_test.cpp checks all three.
constexpr Knob kKnobs[] = {
    {"MEMRA_THREADS", Kind::Int, "0", 0, 4096, "CPU backend threads (0: all cores)"},
    {"MEMRA_PREFILL_CHUNK", Kind::Int, "512", 1, 1 << 20,
     "prompt tokens per prefill forward; chunks sit on a fixed grid from position 0"},
    {"MEMRA_DEVICE", Kind::String, "auto", 0, 0, "default device: auto, cpu or cuda", "auto|cpu|cuda"},
    {"MEMRA_BATCH_PHASE", Kind::Bool, "0", 0, 1, "print sync-bounded per-phase shares of batched decode steps"},
    {"MEMRA_CUDA_SCRATCH_MB", Kind::Int, "2048", 64, 1 << 20,
     "CUDA scratch arena for one step's activations (MiB); raise it for huge prefill chunks"},
    {"MEMRA_CUDA_GRAPHS", Kind::Bool, "1", 0, 1, "record decode steps as CUDA graphs and replay them"},
    {"MEMRA_CUDA_PDL", Kind::Bool, "1", 0, 1,
     "programmatic dependent launch: a kernel starts (and loads its weights) while the previous one ends, in "
     "steps of up to 16 rows (measured on 9B Q4_0: +5% at B = 1; B = 64 and pp512 faster without it; bit-identical)"},
    {"MEMRA_CUDA_STREAM_PARTS", Kind::Int, "0", 0, 4,
     "warps each (row group, K segment) unit of a one-row matmul is split over: 0 picks by matrix size "
     "(small matrices 4), 1 never splits; capped at 8 / K segments (one warp a unit from 8192 columns); "
     "the bits never change"},
    {"MEMRA_CUDA_KV", Kind::String, "f16", 0, 0,
     "CUDA KV cache: f16, or q8_0 (8-bit blocks with an f16 scale per 32 values: 47% less KV memory "
     "and traffic)",
     "f16|q8_0"},
    {"MEMRA_SSM_STATE", Kind::String, "f32", 0, 0,
     "recurrent (Gated DeltaNet) state between tokens: f32, or bf16 (half the state's memory and traffic, "
     "+5% aggregate decode from 16 sequences; rounded after every token, so logits drift from f32's; still "
     "exact under batching)",
     "f32|bf16"},
    {"MEMRA_CUDA_PROFILE", Kind::Bool, "0", 0, 1, "print per-op GPU times at exit (disables graphs)"},
    {"MEMRA_VERBOSE", Kind::Bool, "0", 0, 1, "verbose logging (also --verbose)"},
    {"MEMRA_PREFIX_CACHE_MB", Kind::Int, "4096", 0, int64_t{1} << 30,
     "prefix reuse pool (MiB of device memory: recurrent-state snapshots + parked KV); 0: no reuse"},
    {"MEMRA_PREFIX_SPACING", Kind::Int, "0", 0, 1 << 20,
     "prompt tokens between recurrent-state snapshots, any number (0: the prefill chunk); a prompt also "
     "keeps one 16 tokens before its end, one at its end and one after its answer"},
};

}  // namespace

std::span<const Knob> all() { return kKnobs; }

namespace {

const Knob& find(const char* name) {
  for (const Knob& k : kKnobs)
    if (std::strcmp(k.name, name) == 0) return k;
  MEMRA_ASSERT(false, "unregistered knob {}", name);
  std::abort();
}

const char* raw(const Knob& k) {
  const char* v = std::getenv(k.name);
  return (v && *v) ? v : nullptr;
}

int64_t parse_int(const Knob& k, const char* s) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < k.min || v > k.max)
    fail("environment variable {}='{}' is not an integer in [{}, {}] ({})", k.name, s, k.min, k.max, k.help);
  return v;
}

bool parse_bool(const Knob& k, const char* s) {
  std::string v(s);
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  fail("environment variable {}='{}' must be 0 or 1 ({})", k.name, s, k.help);
}

}  // namespace

int64_t get_int(const char* name) {
  const Knob& k = find(name);
  MEMRA_ASSERT(k.kind == Kind::Int);
  const char* v = raw(k);
  return parse_int(k, v ? v : k.dflt);
}

bool get_bool(const char* name) {
  const Knob& k = find(name);
  MEMRA_ASSERT(k.kind == Kind::Bool);
  const char* v = raw(k);
  return parse_bool(k, v ? v : k.dflt);
}

std::string get_string(const char* name) {
  const Knob& k = find(name);
  MEMRA_ASSERT(k.kind == Kind::String);
  const char* v = raw(k);
  if (!v) return k.dflt;
  if (k.choices) {
    const std::string choices = k.choices, value = v;
    bool ok = false;
    for (size_t at = 0; at <= choices.size();) {
      const size_t bar = std::min(choices.find('|', at), choices.size());
      ok = ok || (bar - at == value.size() && choices.compare(at, bar - at, value) == 0);
      at = bar + 1;
    }
    if (!ok) fail("environment variable {}='{}' is not one of {} ({})", k.name, value, k.choices, k.help);
  }
  return v;
}

std::string describe_all() {
  std::string s;
  for (const Knob& k : kKnobs) {
    const char* v = raw(k);
    s += fmt::format("  {:<22} = {:<8} {}{}\n", k.name, v ? v : k.dflt, v ? "" : "(default) ", k.help);
  }
  return s;
}

}  // namespace memra::knobs
