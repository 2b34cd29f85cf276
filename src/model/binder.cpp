// Tensor lookup, shape checks and upload.
#include "model/binder.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quant.h"

namespace memra {

namespace {
std::string shape_str(const int64_t* ne, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}
bool earlier_in_file(const gguf::TensorInfo* a, const gguf::TensorInfo* b) {
  return a->part != b->part ? a->part < b->part : a->offset < b->offset;
}
}  // namespace

TensorBinder::TensorBinder(const gguf::File& file, Backend& backend, Model& model)
    : file_(file), backend_(backend), model_(model) {
  for (const auto& t : file_.tensors()) {
    file_bytes_ += t.n_bytes;
    file_order_.push_back(&t);
  }
  std::sort(file_order_.begin(), file_order_.end(), earlier_in_file);
  start_ = last_report_ = std::chrono::steady_clock::now();
}

void TensorBinder::progress(uint64_t bytes) {
  constexpr auto kFirst = std::chrono::seconds(5), kEvery = std::chrono::seconds(10);
  bound_bytes_ += bytes;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < kFirst || (reported_ && now - last_report_ < kEvery)) return;
  reported_ = true;
  last_report_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  fmt::print(stderr, "memra: loading weights: {:.1f} of {:.1f} GB ({:.0f}%), {:.0f} s\n", bound_bytes_ / 1e9,
             file_bytes_ / 1e9, file_bytes_ ? 100.0 * static_cast<double>(bound_bytes_) / file_bytes_ : 100.0, s);
}

const gguf::TensorInfo& TensorBinder::find(const std::string& name) const {
  const gguf::TensorInfo* t = file_.find_tensor(name);
  if (!t) fail("{}: tensor '{}' is missing (architecture {})", file_.path(), name, model_.cfg_.arch_str);
  return *t;
}

bool TensorBinder::has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

int64_t TensorBinder::dim(const std::string& name, int i) const { return find(name).ne[i]; }

WeightRef TensorBinder::matrix(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_mat) {
  const gguf::TensorInfo& t = find(name);
  int64_t want[4] = {n_in, n_out, n_mat, 1};
  bool ok = t.ne[0] == n_in && t.ne[1] == n_out && t.ne[2] == n_mat && t.ne[3] == 1;
  if (!ok)
    fail("{}: tensor '{}' has shape {}, expected {} for this configuration", file_.path(), name,
         shape_str(t.ne, static_cast<int>(std::max<uint32_t>(t.n_dims, 1))), shape_str(want, n_mat > 1 ? 3 : 2));
  const quant::TypeInfo& info = quant::type_info(t.type);
  if (!info.decodable)
    fail("{}: tensor '{}' has type {}, which memra does not support (supported: {})", file_.path(), name, info.name,
         quant::decodable_type_names());
  WeightRef w;
  w.name = name;  // before the upload: its notices and errors name the tensor
  w.type = t.type;
  w.n_in = n_in;
  w.n_out = n_out;
  w.n_mat = n_mat;
  w.row_bytes = quant::row_bytes(t.type, n_in);
  w.mat_bytes = w.row_bytes * static_cast<size_t>(n_out);
  MEMRA_ASSERT(w.mat_bytes * static_cast<size_t>(n_mat) == t.n_bytes, "size mismatch for {}", name);
  if (!backend_.is_cpu()) {
    // A copying backend reads every byte now: ask for this tensor's bytes and the next one's in
    // the file at once (on a disk, page-by-page faults from the repacking threads read slowly).
    file_.prefetch(t);
    auto it = std::lower_bound(file_order_.begin(), file_order_.end(), &t, earlier_in_file);
    if (it != file_order_.end() && ++it != file_order_.end()) file_.prefetch(**it);
  }
  backend_.upload_matrix(w, file_.tensor_data(t));
  model_.total_weight_bytes_ += t.n_bytes;
  used_.push_back(name);
  progress(t.n_bytes);
  return w;
}

WeightRef TensorBinder::matrix_opt(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_mat) {
  if (!has(name)) return {};
  return matrix(name, n_in, n_out, n_mat);
}

VecRef TensorBinder::vec_shaped(const std::string& name, std::vector<int64_t> ne) {
  const gguf::TensorInfo& t = find(name);
  int64_t n = 1;
  bool ok = true;
  for (size_t i = 0; i < 4; ++i) {
    int64_t want = i < ne.size() ? ne[i] : 1;
    ok = ok && t.ne[i] == want;
    n *= want;
  }
  if (!ok)
    fail("{}: tensor '{}' has shape {}, expected {}", file_.path(), name,
         shape_str(t.ne, static_cast<int>(std::max<uint32_t>(t.n_dims, 1))),
         shape_str(ne.data(), static_cast<int>(ne.size())));
  const quant::TypeInfo& info = quant::type_info(t.type);
  if (!info.decodable) fail("{}: tensor '{}' has unsupported type {}", file_.path(), name, info.name);
  std::vector<float> host(static_cast<size_t>(n));
  quant::dequantize_row(t.type, file_.tensor_data(t), host.data(), n);
  void* dev = backend_.alloc(host.size() * sizeof(float));
  backend_.to_device(dev, host.data(), host.size() * sizeof(float));
  model_.owned_.push_back(dev);
  model_.total_weight_bytes_ += t.n_bytes;
  used_.push_back(name);
  progress(t.n_bytes);
  return VecRef{static_cast<const float*>(dev), n};
}

VecRef TensorBinder::vec(const std::string& name, int64_t n) { return vec_shaped(name, {n}); }

void TensorBinder::check_fits() const {
  uint64_t bytes = 0;
  for (const auto& t : file_.tensors()) {
    if (!quant::type_info(t.type).decodable) continue;  // refused by name when bound
    if (t.n_dims >= 2)
      bytes += backend_.matrix_device_bytes(t.type, t.ne[0], t.ne[1], t.ne[2] * t.ne[3]);
    else
      bytes += t.n_elements * sizeof(float);
  }
  backend_.check_fits(bytes, fmt::format("{}: the model's weights", file_.path()));
}

void TensorBinder::check_all_used() const {
  if (reported_) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    fmt::print(stderr, "memra: loaded {:.1f} GB of weights in {:.0f} s ({:.2f} GB/s)\n", bound_bytes_ / 1e9, s,
               bound_bytes_ / 1e9 / std::max(s, 1e-9));
  }
  for (const auto& t : file_.tensors()) {
    if (std::find(used_.begin(), used_.end(), t.name) == used_.end())
      fail("{}: tensor '{}' is not used by the {} architecture as memra reads it; the file may be of a "
           "variant memra does not support",
           file_.path(), t.name, model_.cfg_.arch_str);
  }
}

}  // namespace memra
