// Streaming writer of synthetic models: metadata and tensor table first, then each tensor's
// data generated and encoded a bounded chunk of rows at a time (kChunkElems floats), so the
// resident memory is the vocabulary (a few MB) plus two chunk buffers, whatever the model size.
//
// The gguf::Writer writes `<path>.partial` and renames it to `<path>` only in finish(): an
// interrupted or failed write never leaves a file under the requested name, and the Writer
// removes the unfinished `.partial` when it is destroyed early (a throw from the progress
// callback, an I/O error).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"
#include "gguf/writer.h"
#include "quant/quant.h"
#include "synth/synth.h"
#include "synth/values.h"

namespace memra::synth {
namespace {

// 2M floats per chunk: 8 MB of values plus at most 8 MB of encoded blocks; large enough that
// a chunk spreads over all threads, small enough to keep the footprint flat.
constexpr int64_t kChunkElems = int64_t{1} << 21;
constexpr int64_t kParallelMinElems = int64_t{1} << 17;  // tests rely on tiny token_embd (131,072) reaching it

void add_metadata(gguf::Writer& w, const std::vector<MetaEntry>& meta) {
  for (const MetaEntry& e : meta) {
    switch (e.kind) {
      case MetaEntry::Kind::U32: w.add_u32(e.key, e.u32); break;
      case MetaEntry::Kind::F32: w.add_f32(e.key, e.f32); break;
      case MetaEntry::Kind::String: w.add_string(e.key, e.str); break;
      case MetaEntry::Kind::StringArray: w.add_string_array(e.key, e.strings); break;
      case MetaEntry::Kind::I32Array: w.add_i32_array(e.key, e.i32s); break;
    }
  }
}

// Fails early, with the OS's reason, if the output cannot be created (before the vocabulary is
// built or any data generated).
void check_output_path(const std::string& path, const std::string& partial) {
  if (path.empty()) fail("no output file given: pass -o FILE.gguf");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail("cannot write output file '{}': it is a directory; pass a file name", path);
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (!f) fail("cannot write output file '{}': {}", path, std::strerror(errno));
  std::fclose(f);
  std::remove(partial.c_str());
}

}  // namespace

std::vector<std::string> part_paths(const std::string& path, int parts) {
  if (parts <= 1) return {path};
  const std::string ext = ".gguf";
  if (path.size() <= ext.size() || path.compare(path.size() - ext.size(), ext.size(), ext) != 0)
    fail("--parts {}: the output name must end in .gguf (the parts are named <stem>-00001-of-{:05d}.gguf ...)", parts,
         parts);
  std::vector<std::string> out;
  for (int i = 1; i <= parts; ++i)
    out.push_back(fmt::format("{}-{:05d}-of-{:05d}.gguf", path.substr(0, path.size() - ext.size()), i, parts));
  return out;
}

void synth_model(const SynthOptions& options, const ProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  const std::vector<PlannedTensor> plan = plan_tensors(options);  // validates the options
  for (const PlannedTensor& t : plan)
    if (!quant::type_info(t.type).encodable)
      fail("cannot encode tensor {} as {}: memra has no encoder for it", t.name, quant::type_name(t.type));
  const int n_parts = options.parts;
  if (n_parts < 1 || n_parts > 9999 || static_cast<size_t>(n_parts) > plan.size())
    fail("--parts {}: give 1 (one file) up to the model's {} tensors", n_parts, plan.size());
  if (options.only_part < 0 || options.only_part > n_parts || (options.only_part > 0 && n_parts == 1))
    fail("--only-part {}: give a part of a split model, 1 to --parts ({})", options.only_part, n_parts);
  auto writes = [&](int p) { return options.only_part == 0 || options.only_part == p + 1; };
  const std::vector<std::string> paths = part_paths(options.path, n_parts);
  for (int p = 0; p < n_parts; ++p) {
    const std::string& path = paths[static_cast<size_t>(p)];
    if (writes(p)) check_output_path(path, path + ".partial");  // the Writer's temporary name
  }

  uint64_t total = 0;
  for (const PlannedTensor& t : plan) total += t.n_bytes;
  // Part of each tensor: the tensors in order, a new part when the bytes so far pass the next
  // 1/n_parts of the total, at least one tensor a part.
  std::vector<int> part_of(plan.size());
  {
    uint64_t before = 0;
    int part = 0;
    for (size_t ti = 0; ti < plan.size(); ++ti) {
      if (ti > 0 && part + 1 < n_parts) {
        const bool share_done = before * static_cast<uint64_t>(n_parts) >= total * static_cast<uint64_t>(part + 1);
        const bool one_each_left = plan.size() - ti == static_cast<size_t>(n_parts - 1 - part);
        if (share_done || one_each_left) ++part;
      }
      part_of[ti] = part;
      before += plan[ti].n_bytes;
    }
  }

  {
    std::vector<std::unique_ptr<gguf::Writer>> parts(static_cast<size_t>(n_parts));
    uint64_t total_written = 0;
    for (size_t ti = 0; ti < plan.size(); ++ti)
      if (writes(part_of[ti])) total_written += plan[ti].n_bytes;
    for (int p = 0; p < n_parts; ++p) {
      if (!writes(p)) continue;
      parts[static_cast<size_t>(p)] = std::make_unique<gguf::Writer>(paths[static_cast<size_t>(p)]);
      gguf::Writer& w = *parts[static_cast<size_t>(p)];
      if (p == 0) {
        const std::vector<MetaEntry> meta = plan_metadata(options);
        add_metadata(w, meta);
      }  // the vocabulary's strings are serialized into the writer; drop our copy
      if (n_parts > 1) {  // llama.cpp's split keys and types
        w.add_u16("split.no", static_cast<uint16_t>(p));
        w.add_u16("split.count", static_cast<uint16_t>(n_parts));
        w.add_i32("split.tensors.count", static_cast<int32_t>(plan.size()));
      }
      for (size_t ti = 0; ti < plan.size(); ++ti)
        if (part_of[ti] == p) w.add_tensor(plan[ti].name, plan[ti].type, plan[ti].ne);
      w.write_header();
    }

    std::vector<float> values;
    std::vector<uint8_t> encoded;
    uint64_t written = 0;
    for (size_t ti = 0; ti < plan.size(); ++ti) {
      if (!writes(part_of[ti])) continue;
      const PlannedTensor& t = plan[ti];
      const int64_t row = t.ne[0];
      int64_t n_rows = 1;
      for (size_t d = 1; d < t.ne.size(); ++d) n_rows *= t.ne[d];
      const size_t row_bytes = quant::row_bytes(t.type, row);
      const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkElems / row);
      const uint64_t key = tensor_key(options.seed, t.name);
      values.resize(static_cast<size_t>(std::min(rows_per_chunk, n_rows) * row));
      encoded.resize(static_cast<size_t>(std::min(rows_per_chunk, n_rows)) * row_bytes);

      for (int64_t r0 = 0; r0 < n_rows; r0 += rows_per_chunk) {
        const int64_t n = std::min(rows_per_chunk, n_rows - r0);
        float* vals = values.data();
        uint8_t* enc = encoded.data();
        // Rows are independent and each element depends only on its index: any thread split
        // gives the same bytes. (Nothing in here throws: every type was checked encodable.)
        // Small chunks stay on one thread: a parallel region costs more than they do, and far
        // more on a busy machine where idle workers spin.
#pragma omp parallel for schedule(static) if (n * row >= kParallelMinElems)
        for (int64_t i = 0; i < n; ++i) {
          float* v = vals + i * row;
          fill_values(t.init, t.scale, key, static_cast<uint64_t>((r0 + i) * row), static_cast<size_t>(row), v);
          quant::quantize_row(t.type, v, enc + static_cast<size_t>(i) * row_bytes, row);
        }
        const size_t bytes = static_cast<size_t>(n) * row_bytes;
        parts[static_cast<size_t>(part_of[ti])]->write_tensor_data(enc, bytes);
        written += bytes;
        if (progress) progress({ti, plan.size(), t.name, written, total_written, seconds(), false});
      }
    }
    for (auto& w : parts)
      if (w) w->finish();  // renamed only now, all together
    total = total_written;
  }

  if (progress) progress({plan.size(), plan.size(), {}, total, total, seconds(), true});
}

}  // namespace memra::synth
