// GGUF reader: opening (mmap), header/metadata/tensor-table parsing and validation.
//
// Policy decisions (the spec leaves them open; documented here and in the tests):
// - Versions 2 and 3 are read (identical for little-endian files); version 1 used 32-bit counts
//   and is refused; a byte-swapped 2/3 is reported as a big-endian file.
// - Tensors have 1..4 dimensions and every ne is >= 1. Zero-sized tensors are refused: no model
//   stores one, and consumers divide by and allocate from these dimensions.
// - ne[0] must be a whole number of the type's blocks; the element count must fit in int64 and
//   the byte count in uint64 (checked with overflow builtins, not by multiplying blindly).
// - `general.alignment`, when present, must be a u32 power of two no larger than 1 MiB.
// - Tensor offsets are multiples of the alignment, tensor data lies within the file, and no two
//   tensors' byte ranges overlap. Duplicate keys and duplicate tensor names are errors.
// - A file without tensors may end right after its tensor table (no padding), as vocab-only
//   files written by gguf-py do.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gguf/cursor.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

namespace memra::gguf {

using detail::Cursor;
using detail::printable;
using detail::What;

namespace {

struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

[[noreturn]] void fail_file(const std::string& path, const std::string& problem) {
  throw FormatError(fmt::format("{}: {}", path, problem));
}

}  // namespace

std::unique_ptr<File> File::open(const std::string& path) {
  std::unique_ptr<File> f = open_one(path);
  f->open_parts();
  return f;
}

void File::open_parts() {
  const std::optional<uint64_t> count = get_u64_opt("split.count");
  if (!count || *count <= 1) return;
  const uint64_t no = get_u64_opt("split.no").value_or(0);
  auto part_suffix = [&](uint64_t i) { return fmt::format("-{:05d}-of-{:05d}.gguf", i, *count); };
  if (*count > 9999) fail_file(path_, fmt::format("split.count is {} (at most 9999 parts are supported)", *count));
  const std::string first = part_suffix(1);
  const bool named = path_.size() > first.size() && path_.compare(path_.size() - first.size(), first.size(),
                                                                  part_suffix(no + 1)) == 0;
  const std::string prefix = named ? path_.substr(0, path_.size() - first.size()) : std::string();
  if (no != 0)
    fail_file(path_, fmt::format("is part {} of a model split into {} files; open the first part{}", no + 1, *count,
                                 named ? " (" + prefix + first + ")" : ""));
  if (!named)
    fail_file(path_, fmt::format("is the first of {} files of a split model, but its name does not end in '{}': the "
                                 "other parts are found by that name (<prefix>{} ...)",
                                 *count, first, first));
  for (uint64_t i = 2; i <= *count; ++i) {
    const std::string p = prefix + part_suffix(i);
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0)
      fail_file(path_, fmt::format("is part 1 of {}, and part {} ({}) cannot be read: {}", *count, i, p,
                                   std::strerror(errno)));
    std::unique_ptr<File> part = open_one(p);
    if (part->get_u64_opt("split.count") != count || part->get_u64_opt("split.no") != i - 1)
      fail_file(p, fmt::format("is not part {} of {}: its split.no / split.count keys say otherwise", i, *count));
    for (TensorInfo t : part->tensors_) {
      if (tensor_index_.count(t.name))
        fail_file(p, fmt::format("tensor '{}' is also in an earlier part", printable(t.name)));
      t.part = static_cast<uint32_t>(i - 1);
      tensor_index_.emplace(t.name, tensors_.size());
      tensors_.push_back(std::move(t));
    }
    parts_.push_back(std::move(part));
  }
  if (const auto n = get_u64_opt("split.tensors.count"); n && *n != tensors_.size())
    fail_file(path_, fmt::format("split.tensors.count is {}, but the {} parts hold {} tensors", *n, *count,
                                 tensors_.size()));
}

std::unique_ptr<File> File::open_one(const std::string& path) {
  // O_NONBLOCK so that a FIFO or device node cannot block the open; it is refused below anyway.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail_file(path, fmt::format("cannot open: {}", std::strerror(errno)));
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail_file(path, fmt::format("cannot stat: {}", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) fail_file(path, "is a directory, not a GGUF file");
  if (!S_ISREG(st.st_mode)) fail_file(path, "is not a regular file; give the path of a .gguf file");
  if (st.st_size == 0) fail_file(path, "file is empty (0 bytes), not a GGUF file");
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) fail_file(path, fmt::format("cannot map {} bytes: {}", size, std::strerror(errno)));
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  f->base_ = static_cast<const uint8_t*>(p);
  f->size_ = size;
  f->mapped_ = true;  // from here on ~File unmaps, also when parse() throws
  f->parse();
  return f;
}

void File::prefetch(const TensorInfo& t) const {
  const File& f = t.part == 0 ? *this : *parts_[t.part - 1];
  if (!f.mapped_ || t.n_bytes == 0) return;
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(f.data_ + t.offset) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(f.data_ + t.offset) + t.n_bytes;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

std::unique_ptr<File> File::from_memory(const uint8_t* data, size_t size, std::string name) {
  std::unique_ptr<File> f(new File());
  f->path_ = std::move(name);
  f->base_ = data;
  f->size_ = size;
  f->parse();
  return f;
}

File::~File() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

void check_version(Cursor& c, uint32_t version) {
  if (version == 2 || version == 3) return;
  if (version == 1)
    c.fail_at(4, "GGUF version 1 is not supported (only versions 2 and 3); re-convert the model with a current "
                 "llama.cpp");
  if (version == 0x02000000u || version == 0x03000000u)
    c.fail_at(4, "this is a big-endian GGUF file; only little-endian files are supported");
  c.fail_at(4, fmt::format("unsupported GGUF version {} (supported: 2 and 3)", version));
}

// Validates `general.alignment` and returns it (the default when absent).
uint64_t read_alignment(const Cursor& c, const Value* v, size_t value_offset) {
  if (v == nullptr) return detail::kDefaultAlignment;
  if (v->type != ValueType::U32)
    c.fail_at(value_offset, fmt::format("general.alignment has type {} (must be u32)",
                                        v->type == ValueType::ARRAY
                                            ? fmt::format("array of {}", value_type_name(v->elem_type))
                                            : std::string(value_type_name(v->type))));
  if (v->u == 0 || (v->u & (v->u - 1)) != 0)
    c.fail_at(value_offset, fmt::format("general.alignment is {} (must be a power of two)", v->u));
  if (v->u > detail::kMaxAlignment)
    c.fail_at(value_offset,
              fmt::format("general.alignment is {} (at most {} is supported)", v->u, detail::kMaxAlignment));
  return v->u;
}

}  // namespace

void File::parse() {
  Cursor c(base_, size_, path_);
  if (size_ < 4) c.fail_at(0, fmt::format("file is only {} bytes, too small to be a GGUF file", size_));
  if (std::memcmp(base_, "GGUF", 4) != 0)
    c.fail_at(0, fmt::format("not a GGUF file: it starts with bytes {:02x} {:02x} {:02x} {:02x}, not 'GGUF'",
                             base_[0], base_[1], base_[2], base_[3]));
  c.bytes(4, What{"magic"});
  version_ = c.u32(What{"version"});
  check_version(c, version_);

  const size_t counts_at = c.pos();
  const uint64_t n_tensors = c.u64(What{"tensor count"});
  const uint64_t n_kv = c.u64(What{"metadata key count"});
  if (n_kv > detail::kMaxKeys)
    c.fail_at(counts_at + 8, fmt::format("metadata key count {} is absurd (at most {} supported)", n_kv,
                                         detail::kMaxKeys));
  if (n_tensors > detail::kMaxTensors)
    c.fail_at(counts_at, fmt::format("tensor count {} is absurd (at most {} supported)", n_tensors,
                                     detail::kMaxTensors));
  // Reject counts the rest of the file cannot hold before reserving anything.
  if (n_kv > c.left() / detail::kMinKvBytes)
    c.fail_at(counts_at + 8, fmt::format("metadata key count {} is impossible: each entry needs at least {} bytes "
                                         "and only {} bytes follow the header",
                                         n_kv, detail::kMinKvBytes, c.left()));
  if (n_tensors > c.left() / detail::kMinTensorInfoBytes)
    c.fail_at(counts_at, fmt::format("tensor count {} is impossible: each tensor entry needs at least {} bytes "
                                     "and only {} bytes follow the header",
                                     n_tensors, detail::kMinTensorInfoBytes, c.left()));
  if (n_kv * detail::kMinKvBytes + n_tensors * detail::kMinTensorInfoBytes > c.left())
    c.fail_at(counts_at, fmt::format("{} metadata entries and {} tensor entries cannot fit in the {} bytes that "
                                     "follow the header",
                                     n_kv, n_tensors, c.left()));

  // ---- metadata ----
  kv_.reserve(std::min(n_kv, detail::kMaxReserve));
  size_t alignment_at = 0;
  for (uint64_t k = 0; k < n_kv; ++k) {
    const size_t key_at = c.pos();
    std::string_view key = c.string(What{"metadata key"}, detail::kMaxNameBytes);
    if (std::string problem = detail::key_problem(key); !problem.empty())
      c.fail_at(key_at, fmt::format("metadata entry {}: {}", k, problem));
    std::string key_str(key);
    if (kv_index_.count(key_str))
      c.fail_at(key_at, fmt::format("duplicate metadata key '{}'", printable(key)));
    ValueType type = detail::read_value_type(c, What{"value type", key});
    if (key == "general.alignment") alignment_at = c.pos();
    Value value;
    detail::read_value(c, type, key, value);
    kv_index_.emplace(key_str, kv_.size());
    kv_.emplace_back(std::move(key_str), std::move(value));
  }
  alignment_ = read_alignment(c, find("general.alignment"), alignment_at);

  // ---- tensor table ----
  if (n_tensors > c.left() / detail::kMinTensorInfoBytes)
    c.fail_at(counts_at, fmt::format("tensor count {} is impossible: each tensor entry needs at least {} bytes and "
                                     "only {} bytes follow the metadata",
                                     n_tensors, detail::kMinTensorInfoBytes, c.left()));
  tensors_.reserve(std::min(n_tensors, detail::kMaxReserve));
  std::vector<size_t> info_at;  // byte offset of each tensor entry, for error messages
  info_at.reserve(std::min(n_tensors, detail::kMaxReserve));
  for (uint64_t t = 0; t < n_tensors; ++t) {
    const size_t at = c.pos();
    info_at.push_back(at);
    std::string_view name = c.string(What{"tensor name"}, detail::kMaxNameBytes);
    if (std::string problem = detail::tensor_name_problem(name); !problem.empty())
      c.fail_at(at, fmt::format("tensor entry {}: {}", t, problem));
    const std::string pname = printable(name);
    TensorInfo info;
    info.name = std::string(name);
    if (tensor_index_.count(info.name)) c.fail_at(at, fmt::format("duplicate tensor name '{}'", pname));

    const size_t dims_at = c.pos();
    info.n_dims = c.u32(What{"dimension count", name});
    if (info.n_dims < 1 || info.n_dims > detail::kMaxDims)
      c.fail_at(dims_at, fmt::format("tensor '{}' has {} dimensions (1 to {} supported)", pname, info.n_dims,
                                     detail::kMaxDims));
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < info.n_dims; ++d) {
      const size_t ne_at = c.pos();
      uint64_t ne = c.u64(What{"dimension", name, d});
      if (ne == 0 || ne > static_cast<uint64_t>(INT64_MAX))
        c.fail_at(ne_at, fmt::format("tensor '{}' has dimension ne[{}] = {} (must be between 1 and 2^63-1)", pname,
                                     d, ne));
      info.ne[d] = static_cast<int64_t>(ne);
      if (__builtin_mul_overflow(n_elements, info.ne[d], &n_elements))
        c.fail_at(ne_at, fmt::format("tensor '{}' has shape {} whose element count overflows 64 bits", pname,
                                     fmt::join(std::span(info.ne, d + 1), " x ")));
    }
    const size_t type_at = c.pos();
    const uint32_t type_id = c.u32(What{"type", name});
    const quant::TypeInfo* ti = quant::type_info(type_id);
    if (ti == nullptr)
      c.fail_at(type_at, fmt::format("tensor '{}' has unknown ggml type id {}", pname, type_id));
    info.type = static_cast<GgmlType>(type_id);
    if (info.ne[0] % ti->block_elems != 0)
      c.fail_at(type_at, fmt::format("tensor '{}' of type {} has ne[0] = {}, not a multiple of the block size {}",
                                     pname, ti->name, info.ne[0], ti->block_elems));
    uint64_t n_bytes = static_cast<uint64_t>(info.ne[0] / ti->block_elems);
    bool overflow = __builtin_mul_overflow(n_bytes, static_cast<uint64_t>(ti->block_bytes), &n_bytes);
    for (uint32_t d = 1; d < info.n_dims; ++d)
      overflow |= __builtin_mul_overflow(n_bytes, static_cast<uint64_t>(info.ne[d]), &n_bytes);
    if (overflow) c.fail_at(type_at, fmt::format("tensor '{}' byte size overflows 64 bits", pname));
    info.n_elements = static_cast<uint64_t>(n_elements);
    info.n_bytes = n_bytes;
    const size_t offset_at = c.pos();
    info.offset = c.u64(What{"data offset", name});
    if (info.offset % alignment_ != 0)
      c.fail_at(offset_at, fmt::format("tensor '{}' data offset {} is not a multiple of the alignment {}", pname,
                                       info.offset, alignment_));
    tensor_index_.emplace(info.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }

  // ---- data section ----
  const uint64_t table_end = c.pos();
  const uint64_t data_start = (table_end + alignment_ - 1) / alignment_ * alignment_;  // alignment <= 1 MiB
  if (data_start > size_) {
    if (!tensors_.empty())
      c.fail_at(table_end, fmt::format("file ends before its data section (which starts at byte {}, file has {} "
                                       "bytes); the file is truncated",
                                       data_start, size_));
    data_ = base_ + size_;  // no tensors: vocab-only files may omit the final padding
  } else {
    data_ = base_ + data_start;
  }
  const uint64_t data_size = size_ - static_cast<uint64_t>(data_ - base_);
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const TensorInfo& ti = tensors_[t];
    if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset)
      c.fail_at(info_at[t], fmt::format("tensor '{}' data (offset {}, {} bytes) extends past the end of the file "
                                        "(the data section holds {} bytes); the file is truncated or corrupt",
                                        printable(ti.name), ti.offset, ti.n_bytes, data_size));
  }
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = tensors_[order[k - 1]];
    const TensorInfo& cur = tensors_[order[k]];
    if (prev.offset + prev.n_bytes > cur.offset)  // both within the file: no overflow
      c.fail_at(info_at[order[k]],
                fmt::format("tensors '{}' (bytes {}..{}) and '{}' (bytes {}..{}) overlap in the data section",
                            printable(prev.name), prev.offset, prev.offset + prev.n_bytes, printable(cur.name),
                            cur.offset, cur.offset + cur.n_bytes));
  }
}

}  // namespace memra::gguf
