// memra inspect: a GGUF file's header, metadata and tensor table, as text or JSON.
// Long arrays are summarised as `[N x type] first few...` and long strings cut (with their
// length) unless --full is given, so a 150k-token vocabulary prints as one line.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

namespace memra::cli::cmd_inspect {
namespace {

using gguf::Value;
using gguf::ValueType;
using Json = nlohmann::ordered_json;

struct Args {
  std::string path;
  bool json = false;
  bool full = false;
};

// How much of long values to show when not --full.
struct Limits {
  size_t string_bytes = 64;       // metadata string values
  size_t elem_string_bytes = 24;  // each string shown from a string array
  size_t numbers = 8;             // leading elements of numeric arrays
  size_t strings = 6;             // leading elements of string arrays
};
constexpr size_t kUnlimited = ~size_t{0};

// Cuts `s` to at most `max` bytes without splitting a UTF-8 sequence.
std::string_view cut_utf8(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // s[n] continues a sequence
  return s.substr(0, n);
}

// Quoted, with control characters escaped so a value cannot garble the terminal.
std::string quote(std::string_view s, size_t max) {
  std::string_view shown = cut_utf8(s, max);
  std::string out = "\"";
  for (char c : shown) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (u < 0x20 || u == 0x7f)
          out += fmt::format("\\x{:02x}", u);
        else
          out += c;
    }
  }
  out += '"';
  if (shown.size() < s.size()) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

// Escaped like quote(), without the quotes (keys, tensor names, paths).
std::string plain(std::string_view s) {
  std::string q = quote(s, kUnlimited);
  return q.substr(1, q.size() - 2);
}

// Element `i` of a packed numeric array, decoded as a scalar Value.
Value element(const Value& arr, uint64_t i) {
  Value v;
  v.type = arr.elem_type;
  size_t size = 0;
  switch (arr.elem_type) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: size = 1; break;
    case ValueType::U16: case ValueType::I16: size = 2; break;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: size = 4; break;
    default: size = 8;
  }
  const uint8_t* p = arr.elems + i * size;
  auto load = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (arr.elem_type) {
    case ValueType::U8: case ValueType::BOOL: v.u = load(uint8_t{}); break;
    case ValueType::I8: v.i = load(int8_t{}); break;
    case ValueType::U16: v.u = load(uint16_t{}); break;
    case ValueType::I16: v.i = load(int16_t{}); break;
    case ValueType::U32: v.u = load(uint32_t{}); break;
    case ValueType::I32: v.i = load(int32_t{}); break;
    case ValueType::U64: v.u = load(uint64_t{}); break;
    case ValueType::I64: v.i = load(int64_t{}); break;
    case ValueType::F32: v.f = load(float{}); break;
    case ValueType::F64: v.f = load(double{}); break;
    default: break;
  }
  return v;
}

bool is_signed(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}

// f32 values print in their shortest form (1e-06, not 9.99999997e-07).
std::string scalar_text(const Value& v) {
  switch (v.type) {
    case ValueType::BOOL: return v.u ? "true" : "false";
    case ValueType::F32: return fmt::format("{}", static_cast<float>(v.f));
    case ValueType::F64: return fmt::format("{}", v.f);
    default: return is_signed(v.type) ? fmt::format("{}", v.i) : fmt::format("{}", v.u);
  }
}

Json scalar_json(const Value& v) {
  switch (v.type) {
    case ValueType::BOOL: return v.u != 0;
    // Through the shortest decimal form so JSON shows 1e-06 for an f32 1e-6, not its double expansion.
    case ValueType::F32: return std::isfinite(v.f) ? Json(std::stod(fmt::format("{}", static_cast<float>(v.f)))) : Json();
    case ValueType::F64: return std::isfinite(v.f) ? Json(v.f) : Json();
    default: return is_signed(v.type) ? Json(v.i) : Json(v.u);
  }
}

std::string type_text(const Value& v) {
  if (v.type == ValueType::ARRAY)
    return fmt::format("[{} x {}]", v.count, gguf::value_type_name(v.elem_type));
  return gguf::value_type_name(v.type);
}

std::string value_text(const Value& v, const Limits& lim) {
  if (v.type == ValueType::STRING) return quote(v.str, lim.string_bytes);
  if (v.type != ValueType::ARRAY) return scalar_text(v);
  std::string out;
  const bool strings = v.elem_type == ValueType::STRING;
  const uint64_t shown = std::min<uint64_t>(v.count, strings ? lim.strings : lim.numbers);
  for (uint64_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    out += strings ? quote(v.strings[i], lim.elem_string_bytes) : scalar_text(element(v, i));
  }
  if (shown < v.count) out += ", ...";
  return out;
}

Json value_json(const Value& v, const Limits& lim) {
  Json j;
  j["type"] = gguf::value_type_name(v.type);
  if (v.type == ValueType::STRING) {
    std::string_view shown = cut_utf8(v.str, lim.string_bytes);
    j["value"] = std::string(shown);
    j["length"] = v.str.size();
    if (shown.size() < v.str.size()) j["truncated"] = true;
  } else if (v.type == ValueType::ARRAY) {
    j["elem_type"] = gguf::value_type_name(v.elem_type);
    j["count"] = v.count;
    const bool strings = v.elem_type == ValueType::STRING;
    const uint64_t shown = std::min<uint64_t>(v.count, strings ? lim.strings : lim.numbers);
    Json values = Json::array();
    for (uint64_t i = 0; i < shown; ++i)
      values.push_back(strings ? Json(std::string(cut_utf8(v.strings[i], lim.elem_string_bytes)))
                               : scalar_json(element(v, i)));
    j["values"] = std::move(values);
    if (shown < v.count) j["truncated"] = true;
  } else {
    j["value"] = scalar_json(v);
  }
  return j;
}

std::string shape_text(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", t.ne[d]);
  return s + "]";
}

std::string mib(uint64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1 << 20)); }

void print_text(const gguf::File& f, const Limits& lim) {
  fmt::print("file       {}\n", plain(f.path()));
  fmt::print("size       {} bytes ({})\n", f.file_size(), mib(f.file_size()));
  if (f.part_count() > 1)  // tensor offsets are then within their part's data section
    fmt::print("parts      {} (this is the first; each tensor's part is after its offset)\n", f.part_count());
  fmt::print("version    {}\n", f.version());
  fmt::print("alignment  {}\n", f.alignment());
  fmt::print("data at    byte {}\n", f.data_offset());
  fmt::print("metadata   {} keys\n", f.metadata().size());
  size_t key_width = 0, type_width = 0;
  for (const auto& [key, v] : f.metadata()) {
    key_width = std::max(key_width, std::min<size_t>(key.size(), 48));
    type_width = std::max(type_width, std::min<size_t>(type_text(v).size(), 20));
  }
  for (const auto& [key, v] : f.metadata())
    fmt::print("  {:<{}}  {:<{}}  {}\n", plain(key), key_width, type_text(v), type_width, value_text(v, lim));
  fmt::print("tensors    {}\n", f.tensors().size());
  if (f.tensors().empty()) return;
  size_t name_width = 4, shape_width = 5;
  for (const auto& t : f.tensors()) {
    name_width = std::max(name_width, std::min<size_t>(t.name.size(), 64));
    shape_width = std::max(shape_width, shape_text(t).size());
  }
  fmt::print("  {:<{}}  {:<8} {:<{}} {:>14} {:>14}\n", "name", name_width, "type", "shape", shape_width, "bytes",
             "offset");
  uint64_t elements = 0, bytes = 0;
  std::map<std::string, size_t> by_type;
  for (const auto& t : f.tensors()) {
    fmt::print("  {:<{}}  {:<8} {:<{}} {:>14} {:>14}{}\n", plain(t.name), name_width, quant::type_name(t.type),
               shape_text(t), shape_width, t.n_bytes, t.offset,
               f.part_count() > 1 ? fmt::format("  part {}", t.part + 1) : std::string());
    elements += t.n_elements;
    bytes += t.n_bytes;
    ++by_type[quant::type_name(t.type)];
  }
  std::string types;
  for (const auto& [name, n] : by_type) types += fmt::format("{}{} x{}", types.empty() ? "" : ", ", name, n);
  fmt::print("total      {} tensors ({}), {} elements, {} bytes ({})\n", f.tensors().size(), types, elements, bytes,
             mib(bytes));
}

void print_json(const gguf::File& f, const Limits& lim) {
  Json j;
  j["file"] = f.path();
  j["file_size"] = f.file_size();
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  j["parts"] = f.part_count();
  Json meta = Json::object();
  for (const auto& [key, v] : f.metadata()) meta[key] = value_json(v, lim);
  j["metadata"] = std::move(meta);
  Json tensors = Json::array();
  uint64_t elements = 0, bytes = 0;
  for (const auto& t : f.tensors()) {
    Json shape = Json::array();
    for (uint32_t d = 0; d < t.n_dims; ++d) shape.push_back(t.ne[d]);
    tensors.push_back(Json{{"name", t.name},
                           {"type", quant::type_name(t.type)},
                           {"shape", std::move(shape)},
                           {"n_elements", t.n_elements},
                           {"bytes", t.n_bytes},
                           {"offset", t.offset},
                           {"part", t.part + 1}});
    elements += t.n_elements;
    bytes += t.n_bytes;
  }
  j["tensors"] = std::move(tensors);
  j["totals"] = Json{{"tensors", f.tensors().size()}, {"elements", elements}, {"bytes", bytes}};
  // Strings in GGUF files are not guaranteed UTF-8: replace invalid bytes instead of throwing.
  std::string out = j.dump(2, ' ', false, Json::error_handler_t::replace);
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void run(const Args& a) {
  auto f = gguf::File::open(a.path);
  Limits lim;
  if (a.full) lim = Limits{kUnlimited, kUnlimited, kUnlimited, kUnlimited};
  if (a.json)
    print_json(*f, lim);
  else
    print_text(*f, lim);
  std::fflush(stdout);
}

CommandRegistrar reg("inspect", [](CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("inspect", "Show a GGUF file's header, metadata and tensor table");
  cmd->add_option("model", args->path, "GGUF file")->required();
  cmd->add_flag("--json", args->json, "print JSON instead of text");
  cmd->add_flag("--full", args->full, "print whole strings and arrays instead of summaries");
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace memra::cli::cmd_inspect
