// GGUF v3 writer. Everything it writes passes the reader's validation: keys and names are
// checked, shapes are checked against the block size, raw values are decoded with the reader's
// own decoder, and the file appears under its final name only once finish() succeeds (it is
// written to "<path>.partial" and renamed), so a crash or exception never leaves a half file
// that looks complete.
#include "gguf/writer.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "gguf/cursor.h"
#include "quant/quant.h"

namespace memra::gguf {

namespace {

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof v);
}
void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

// ggml keeps tensor names in a 64-byte buffer with a terminator; longer names would not load
// in llama.cpp, so the writer refuses them even though memra's reader would accept them.
constexpr size_t kMaxGgmlNameBytes = 63;

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

Writer::Writer(std::string path, uint64_t alignment) : path_(std::move(path)), alignment_(alignment) {
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0 || alignment_ > detail::kMaxAlignment)
    fail("{}: GGUF alignment {} is invalid (must be a power of two, at most {})", path_, alignment_,
         detail::kMaxAlignment);
  tmp_path_ = path_ + ".partial";
}

Writer::~Writer() {
  if (f_ != nullptr) std::fclose(f_);
  if (!finished_ && header_done_) std::remove(tmp_path_.c_str());
}

void Writer::add_kv(const std::string& key, ValueType type, const void* value, size_t n) {
  if (header_done_) fail("{}: metadata key '{}' added after write_header()", path_, detail::printable(key));
  if (std::string problem = detail::key_problem(key); !problem.empty()) fail("{}: {}", path_, problem);
  if (key == "general.alignment")
    fail("{}: set the alignment with the Writer's constructor, not as metadata key 'general.alignment'", path_);
  if (!keys_.insert(key).second) fail("{}: duplicate metadata key '{}'", path_, key);
  put_string(meta_, key);
  put<uint32_t>(meta_, static_cast<uint32_t>(type));
  put_bytes(meta_, value, n);
  ++n_kv_;
}

void Writer::add_u8(const std::string& key, uint8_t v) { add_kv(key, ValueType::U8, &v, sizeof v); }
void Writer::add_u16(const std::string& key, uint16_t v) { add_kv(key, ValueType::U16, &v, sizeof v); }
void Writer::add_u32(const std::string& key, uint32_t v) { add_kv(key, ValueType::U32, &v, sizeof v); }
void Writer::add_i32(const std::string& key, int32_t v) { add_kv(key, ValueType::I32, &v, sizeof v); }
void Writer::add_u64(const std::string& key, uint64_t v) { add_kv(key, ValueType::U64, &v, sizeof v); }
void Writer::add_f32(const std::string& key, float v) { add_kv(key, ValueType::F32, &v, sizeof v); }
void Writer::add_bool(const std::string& key, bool v) {
  uint8_t b = v ? 1 : 0;
  add_kv(key, ValueType::BOOL, &b, 1);
}
void Writer::add_string(const std::string& key, const std::string& v) {
  std::vector<uint8_t> bytes;
  put_string(bytes, v);
  add_kv(key, ValueType::STRING, bytes.data(), bytes.size());
}
void Writer::add_string_array(const std::string& key, const std::vector<std::string>& v) {
  std::vector<uint8_t> bytes;
  put<uint32_t>(bytes, static_cast<uint32_t>(ValueType::STRING));
  put<uint64_t>(bytes, v.size());
  for (const auto& s : v) put_string(bytes, s);
  add_kv(key, ValueType::ARRAY, bytes.data(), bytes.size());
}
void Writer::add_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  std::vector<uint8_t> bytes;
  put<uint32_t>(bytes, static_cast<uint32_t>(ValueType::I32));
  put<uint64_t>(bytes, v.size());
  put_bytes(bytes, v.data(), v.size() * sizeof(int32_t));
  add_kv(key, ValueType::ARRAY, bytes.data(), bytes.size());
}
void Writer::add_f32_array(const std::string& key, const std::vector<float>& v) {
  std::vector<uint8_t> bytes;
  put<uint32_t>(bytes, static_cast<uint32_t>(ValueType::F32));
  put<uint64_t>(bytes, v.size());
  put_bytes(bytes, v.data(), v.size() * sizeof(float));
  add_kv(key, ValueType::ARRAY, bytes.data(), bytes.size());
}

void Writer::add_raw(const std::string& key, ValueType type, std::vector<uint8_t> value_bytes) {
  if (!detail::is_known_value_type(static_cast<uint32_t>(type)))
    fail("{}: add_raw('{}'): unknown value type {}", path_, detail::printable(key), static_cast<uint32_t>(type));
  // Decode with the reader's decoder so a malformed value fails here, not when read back.
  const std::string where = fmt::format("{}: raw value of '{}'", path_, detail::printable(key));
  detail::Cursor c(value_bytes.data(), value_bytes.size(), where);
  Value v;
  detail::read_value(c, type, key, v);
  if (c.left() != 0)
    fail("{}: {} has {} bytes after the {} value ends", path_, where, c.left(), value_type_name(type));
  add_kv(key, type, value_bytes.data(), value_bytes.size());
}

void Writer::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne) {
  if (header_done_) fail("{}: tensor '{}' added after write_header()", path_, detail::printable(name));
  if (std::string problem = detail::tensor_name_problem(name); !problem.empty()) fail("{}: {}", path_, problem);
  if (name.size() > kMaxGgmlNameBytes)
    fail("{}: tensor name '{}' is {} bytes; ggml allows at most {}", path_, name, name.size(), kMaxGgmlNameBytes);
  const quant::TypeInfo* ti = quant::type_info(static_cast<uint32_t>(type));
  if (ti == nullptr) fail("{}: tensor '{}' has unknown ggml type id {}", path_, name, static_cast<uint32_t>(type));
  if (ne.empty() || ne.size() > detail::kMaxDims)
    fail("{}: tensor '{}' has {} dimensions (1 to {} supported)", path_, name, ne.size(), detail::kMaxDims);
  uint64_t bytes = 0;
  bool overflow = false;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 1) fail("{}: tensor '{}' has dimension ne[{}] = {} (must be >= 1)", path_, name, d, ne[d]);
    if (d == 0) {
      if (ne[0] % ti->block_elems != 0)
        fail("{}: tensor '{}' of type {} has ne[0] = {}, not a multiple of the block size {}", path_, name,
             ti->name, ne[0], ti->block_elems);
      overflow |= __builtin_mul_overflow(static_cast<uint64_t>(ne[0] / ti->block_elems),
                                         static_cast<uint64_t>(ti->block_bytes), &bytes);
    } else {
      overflow |= __builtin_mul_overflow(bytes, static_cast<uint64_t>(ne[d]), &bytes);
    }
  }
  int64_t n_elements = 1;
  for (int64_t x : ne) overflow |= __builtin_mul_overflow(n_elements, x, &n_elements);
  if (overflow) fail("{}: tensor '{}' is too large (its size overflows 64 bits)", path_, name);
  if (!tensor_names_.insert(name).second) fail("{}: duplicate tensor name '{}'", path_, name);
  uint64_t offset = 0;
  if (!tensors_.empty()) {
    const Pending& last = tensors_.back();
    offset = align_up(last.offset + last.bytes, alignment_);
  }
  tensors_.push_back(Pending{name, type, std::move(ne), bytes, offset});
}

void Writer::write_bytes(const void* p, size_t n) {
  if (n == 0) return;
  if (std::fwrite(p, 1, n, f_) != n) fail("{}: write failed: {}", tmp_path_, std::strerror(errno));
}

void Writer::write_zeros(uint64_t n) {
  static const uint8_t kZeros[256] = {};
  while (n > 0) {
    size_t k = n < sizeof kZeros ? static_cast<size_t>(n) : sizeof kZeros;
    write_bytes(kZeros, k);
    n -= k;
  }
}

void Writer::write_header() {
  if (header_done_) fail("{}: write_header() called twice", path_);
  std::vector<uint8_t> out;
  put_bytes(out, "GGUF", 4);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  const bool write_alignment = alignment_ != detail::kDefaultAlignment;
  put<uint64_t>(out, n_kv_ + (write_alignment ? 1 : 0));
  if (write_alignment) {
    put_string(out, "general.alignment");
    put<uint32_t>(out, static_cast<uint32_t>(ValueType::U32));
    put<uint32_t>(out, static_cast<uint32_t>(alignment_));
  }
  put_bytes(out, meta_.data(), meta_.size());
  for (const Pending& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t x : t.ne) put<uint64_t>(out, static_cast<uint64_t>(x));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, t.offset);
  }
  out.resize(align_up(out.size(), alignment_), 0);

  f_ = std::fopen(tmp_path_.c_str(), "wb");
  if (f_ == nullptr) fail("{}: cannot create: {}", tmp_path_, std::strerror(errno));
  header_done_ = true;  // from here on the destructor removes the partial file
  write_bytes(out.data(), out.size());
  meta_.clear();
  meta_.shrink_to_fit();
}

void Writer::write_tensor_data(const void* data, size_t bytes) {
  if (!header_done_) fail("{}: write_tensor_data() before write_header()", path_);
  if (finished_) fail("{}: write_tensor_data() after finish()", path_);
  if (bytes == 0) return;
  if (current_ >= tensors_.size())
    fail("{}: {} bytes of tensor data written after all {} declared tensors were complete", path_, bytes,
         tensors_.size());
  Pending& t = tensors_[current_];
  if (bytes > t.bytes - current_written_)
    fail("{}: {} bytes written for tensor '{}', but only {} of its {} bytes remain", path_, bytes, t.name,
         t.bytes - current_written_, t.bytes);
  if (current_written_ == 0) {
    write_zeros(t.offset - data_pos_);
    data_pos_ = t.offset;
  }
  write_bytes(data, bytes);
  current_written_ += bytes;
  data_pos_ += bytes;
  if (current_written_ == t.bytes) {
    ++current_;
    current_written_ = 0;
  }
}

void Writer::finish() {
  if (!header_done_) fail("{}: finish() before write_header()", path_);
  if (finished_) fail("{}: finish() called twice", path_);
  if (current_ < tensors_.size()) {
    const Pending& t = tensors_[current_];
    fail("{}: tensor '{}' has {} of its {} bytes written ({} tensors declared, {} complete)", path_, t.name,
         current_written_, t.bytes, tensors_.size(), current_);
  }
  // ggml pads after every tensor, the last one included, so the file ends aligned.
  write_zeros(align_up(data_pos_, alignment_) - data_pos_);
  std::FILE* f = f_;
  f_ = nullptr;
  const bool write_error = std::fflush(f) != 0 || std::ferror(f) != 0;
  const int saved_errno = errno;
  if (std::fclose(f) != 0 || write_error)
    fail("{}: write failed: {}", tmp_path_, std::strerror(write_error ? saved_errno : errno));
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    fail("{}: cannot rename {} to it: {}", path_, tmp_path_, std::strerror(errno));
  finished_ = true;
}

}  // namespace memra::gguf
