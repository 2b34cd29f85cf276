// CudaBackend::sample: every row's token computed on the device (k_sample.cu) with
// step/sampling.h's semantics bit for bit; only the B token ids come back. The host validates
// like sample_token(), builds the per-row tables (sample_host.h) and uploads them in one copy.
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/sample_host.h"
#include "backend/cuda/sample_kernels.h"
#include "common/error.h"
#include "step/sampling.h"

namespace memra::cuda {
namespace {

// Rows per launch sequence (grid.y limit 65535; far above any decode batch).
constexpr int64_t kMaxRowsPerCall = 4096;

// Byte offsets of the uploaded tables inside one staging block (16-byte aligned sections).
class Staging {
 public:
  template <class T>
  size_t add(const std::vector<T>& v) {
    const size_t at = size_;
    size_ = (size_ + v.size() * sizeof(T) + 15) / 16 * 16;
    parts_.push_back({at, v.data(), v.size() * sizeof(T)});
    return at;
  }
  size_t size() const { return size_; }
  void fill(std::vector<uint8_t>& out) const {
    out.assign(size_, 0);
    for (const Part& p : parts_)
      if (p.bytes) std::memcpy(out.data() + p.at, p.src, p.bytes);
  }

 private:
  struct Part {
    size_t at;
    const void* src;
    size_t bytes;
  };
  std::vector<Part> parts_;
  size_t size_ = 0;
};

void sample_chunk(CudaBackend& be, const float* logits, int64_t rows, int64_t n, const RowSampling* per_row,
                  int32_t* out_host) {
  const int seg = sample_segment(rows, n);
  const size_t words = static_cast<size_t>((n + 31) / 32);

  std::vector<SampleRowDesc> desc(static_cast<size_t>(rows));
  std::vector<SamplePatchOp> ops;
  std::vector<int32_t> patch_ids, patch_seg, temp_rows, topk_rows, topp_rows;
  std::vector<float> bias;
  std::vector<uint32_t> masks;
  struct Refs {
    size_t patch_begin = 0, seg_begin = 0, mask_begin = 0;
    bool mask = false;
  };
  std::vector<Refs> refs(static_cast<size_t>(rows));

  for (int64_t r = 0; r < rows; ++r) {
    const RowSampling& rs = per_row[r];
    MEMRA_ASSERT(rs.params != nullptr, "row {} has no sampling parameters", r);
    SampleRowDesc& d = desc[static_cast<size_t>(r)];
    const RowPhases ph = describe_row(*rs.params, rs.token_index, n, d);
    const int32_t row = static_cast<int32_t>(r);
    if (ph.temperature) temp_rows.push_back(row);
    if (ph.top_k) topk_rows.push_back(row);
    if (ph.top_p) topp_rows.push_back(row);

    Refs& ref = refs[static_cast<size_t>(r)];
    ref.patch_begin = patch_ids.size();
    append_row_patches(*rs.params, std::span<const int32_t>(rs.history, static_cast<size_t>(rs.history_len)), n, row,
                       ops, patch_ids, bias);
    d.n_patch = static_cast<int32_t>(patch_ids.size() - ref.patch_begin);
    if (d.n_patch > 0) {
      ref.seg_begin = patch_seg.size();
      append_patch_segments(std::span<const int32_t>(patch_ids).subspan(ref.patch_begin), n, seg, patch_seg);
    }
    if (rs.allowed_words > 0) {
      MEMRA_ASSERT(rs.allowed != nullptr && static_cast<size_t>(rs.allowed_words) >= words,
                   "mask has {} words for {} ids", rs.allowed_words, n);
      ref.mask = true;
      ref.mask_begin = masks.size();
      masks.insert(masks.end(), rs.allowed, rs.allowed + words);
    }
  }

  // Device memory: the staging block, the patched values, the tokens, the kernels' work area.
  Staging st;
  const size_t at_desc = st.add(desc), at_ops = st.add(ops), at_ids = st.add(patch_ids), at_bias = st.add(bias),
               at_seg = st.add(patch_seg), at_masks = st.add(masks), at_temp = st.add(temp_rows),
               at_topk = st.add(topk_rows), at_topp = st.add(topp_rows);
  auto* dev = reinterpret_cast<uint8_t*>(be.scratch(st.size() / sizeof(float)));
  float* patch_values = be.scratch(ops.size());
  auto* tokens = reinterpret_cast<int32_t*>(be.scratch(static_cast<size_t>(rows)));
  void* work = be.scratch((sample_work_bytes(rows, n, seg) + sizeof(float) - 1) / sizeof(float));

  for (int64_t r = 0; r < rows; ++r) {
    SampleRowDesc& d = desc[static_cast<size_t>(r)];
    const Refs& ref = refs[static_cast<size_t>(r)];
    d.logits = logits + r * n;
    d.allowed = ref.mask ? reinterpret_cast<const uint32_t*>(dev + at_masks) + ref.mask_begin : nullptr;
    if (d.n_patch > 0) {
      d.patch_id = reinterpret_cast<const int32_t*>(dev + at_ids) + ref.patch_begin;
      d.patch_val = patch_values + ref.patch_begin;
      d.patch_seg = reinterpret_cast<const int32_t*>(dev + at_seg) + ref.seg_begin;
    }
  }
  std::vector<uint8_t> block;
  st.fill(block);
  be.to_device(dev, block.data(), block.size());

  SampleBatch b;
  b.desc = reinterpret_cast<const SampleRowDesc*>(dev + at_desc);
  b.rows = rows;
  b.n = n;
  b.seg = seg;
  b.ops = reinterpret_cast<const SamplePatchOp*>(dev + at_ops);
  b.n_ops = static_cast<int32_t>(ops.size());
  b.bias_values = reinterpret_cast<const float*>(dev + at_bias);
  b.patch_values = patch_values;
  b.temp_rows = reinterpret_cast<const int32_t*>(dev + at_temp);
  b.n_temp = static_cast<int32_t>(temp_rows.size());
  b.topk_rows = reinterpret_cast<const int32_t*>(dev + at_topk);
  b.n_topk = static_cast<int32_t>(topk_rows.size());
  b.topp_rows = reinterpret_cast<const int32_t*>(dev + at_topp);
  b.n_topp = static_cast<int32_t>(topp_rows.size());
  b.tokens = tokens;
  sample_rows(b, work, be.stream());
  be.to_host(out_host, tokens, static_cast<size_t>(rows) * sizeof(int32_t));
}

}  // namespace

void CudaBackend::sample(const float* logits, int64_t rows, int64_t n, const RowSampling* per_row,
                         int32_t* out_host) {
  OpProfiler::Scope prof(profiler_, "sample", 0);
  if (rows <= 0) return;
  MEMRA_ASSERT(n > 0, "sampling a vocabulary of {} ids", n);
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxRowsPerCall) {
    const int64_t count = std::min(kMaxRowsPerCall, rows - r0);
    const size_t mark = scratch_mark();
    try {
      sample_chunk(*this, logits + r0 * n, count, n, per_row + r0, out_host + r0);
    } catch (...) {
      scratch_release(mark);
      throw;
    }
    scratch_release(mark);
  }
}

}  // namespace memra::cuda
