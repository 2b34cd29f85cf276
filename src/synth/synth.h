// `memra synth`: GGUF files with random weights in exactly the layout of a real
// llama.cpp-converted-and-quantized model of a given shape (tensor names, ggml shapes, types,
// order, metadata), written by streaming so that even 397B-A17B needs only a few tens of MB of RAM.
//
// The layout is computed without touching data (`plan_tensors`, `plan_metadata`), so tests can
// check a 5 GB file's table without writing it. Values are a pure function of (seed, tensor name,
// element index): the same seed gives the same bytes at any thread count, and cutting layers
// with n_layers leaves the remaining tensors' values unchanged, except the residual-output
// projections, whose scale follows the number of blocks written.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ggml_type.h"

namespace memra::synth {

struct SynthOptions {
  std::string arch;   // "qwen35", "qwen35moe", "qwen3next", "qwen3"
  std::string shape;  // "9b", "35b-a3b", "tiny", ... (see known_shapes)
  std::string type;   // "q4_0", "q8_0", "q4_k", "q5_k", "q6_k", "bf16", "f16", "f32", "q3_k", "q5_0"
  uint64_t seed = 0;
  int n_layers = 0;   // 0 = all layers of the shape; otherwise the first n_layers blocks
  std::string path;   // output file (written as path + ".partial", renamed when complete)
  // > 1: a split model (gguf.h) of this many files of about equal size, path's stem +
  // "-0000i-of-0000N.gguf" (path must end in .gguf), every one renamed only when all are complete.
  int parts = 1;
  // 1..parts: write only that part (its bytes are those of the whole run), so the parts of one
  // model can go to different disks (the others found beside the first, e.g. through links).
  int only_part = 0;
};
// The file names of a split model written to `path` in `parts` parts (just `path` for 1).
std::vector<std::string> part_paths(const std::string& path, int parts);

// One architecture/shape pair `synth` knows.
struct ShapeEntry {
  std::string arch;
  std::string shape;
  std::string summary;  // one line: hidden, layers, heads, FFN / experts, vocab
};
const std::vector<ShapeEntry>& known_shapes();

// Elements of a tensor are drawn from one of these (see values.h for the distributions).
enum class Init : uint8_t {
  Embedding,     // token_embd
  Matrix,        // 2-D projection feeding the residual stream's branches
  ResidualOut,   // projection that writes back into the residual stream
  Norm,          // RMSNorm weights (already including HF's +1)
  SsmA,          // -exp(A_log)
  SsmDtBias,
  SsmConv,
  SsmNorm,
  Router,
};

struct PlannedTensor {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;  // ggml order, ne[0] fastest
  uint64_t n_bytes = 0;
  Init init = Init::Matrix;
  float scale = 1;          // distribution scale (std for Matrix-like inits)
};

// The tensor table in file order. Throws memra::Error for unknown arch/shape/type or a bad
// n_layers, listing the valid values.
std::vector<PlannedTensor> plan_tensors(const SynthOptions& options);

// One metadata pair, in file order. Only the value kinds the layout uses.
struct MetaEntry {
  enum class Kind : uint8_t { U32, F32, String, StringArray, I32Array };
  std::string key;
  Kind kind = Kind::U32;
  uint32_t u32 = 0;
  float f32 = 0;
  std::string str;
  std::vector<std::string> strings;
  std::vector<int32_t> i32s;
};
// All metadata, including the synthetic tokenizer (fast: well under a second for 248k tokens).
std::vector<MetaEntry> plan_metadata(const SynthOptions& options);

struct SynthProgress {
  size_t tensor_index = 0;  // tensor being written (== n_tensors when done)
  size_t n_tensors = 0;
  std::string_view tensor_name;
  uint64_t data_bytes_written = 0;
  uint64_t data_bytes_total = 0;
  double seconds = 0;       // since synth_model started
  bool done = false;
};
// Called after every chunk (often: a few MB) and once more with done = true after the file is
// complete. It may throw to cancel; the unfinished file is then removed.
using ProgressFn = std::function<void(const SynthProgress&)>;

// Writes the file. Throws memra::Error on bad options or I/O failure; never leaves a partial
// file under `options.path`.
void synth_model(const SynthOptions& options, const ProgressFn& progress = {});

}  // namespace memra::synth
