// Validated options and the llama-quantize type rules (internal to src/synth).
#pragma once

#include <cstdint>

#include "common/ggml_type.h"
#include "synth/shapes.h"
#include "synth/synth.h"

namespace memra::synth {

struct TypeChoice {
  const char* name;   // CLI name
  GgmlType type;      // 2-D weights (and token_embd unless it is the tied output head)
  GgmlType head;      // output head: llama-quantize keeps it at Q6_K for 4-6 bit files
  uint32_t file_type; // llama_ftype number written to general.file_type
};

struct Resolved {
  ModelShape shape;
  int64_t n_layers;  // blocks actually written
  TypeChoice type;
};

// Validates arch, shape, type and n_layers; throws memra::Error listing the valid values.
Resolved resolve(const SynthOptions& options);

// The type a tensor with row length ne0 gets when `want` is asked for: K-quants need
// ne0 % 256 == 0 and fall back as llama-quantize does (q4_k -> q5_0, q5_k -> q5_1,
// q6_k -> q8_0, q3_k and iq4_xs -> iq4_nl); any type whose block does not
// divide ne0 falls back to f16.
GgmlType fit_type(GgmlType want, int64_t ne0);

}  // namespace memra::synth
