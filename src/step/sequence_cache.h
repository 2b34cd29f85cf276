// Per-sequence caches: for each full-attention layer a KV cache, for each Gated DeltaNet layer
// the conv window and the recurrent state, laid out by a CacheShape. Allocated in device memory;
// batched kernels reach them through the step plan, so a sequence's caches never move while it
// lives (except when the KV capacity grows between steps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/ggml_type.h"
#include "step/cache_shape.h"
#include "step/device_memory.h"

namespace memra {

struct LayerCache {
  // Full attention: capacity x (n_head_kv * head_dim) elements of kv_type each, row = position.
  void* k = nullptr;
  void* v = nullptr;
  // Gated DeltaNet: conv window (kernel-1) x channels, oldest input first; recurrent state
  // n_v x d_k x d_v, float32 (S[h][i][j]: key dim i, value dim j).
  float* conv = nullptr;
  float* ssm = nullptr;
};

class SequenceCache {
 public:
  // `capacity`: the context limit (positions) this sequence may grow to.
  SequenceCache(DeviceMemory& memory, const CacheShape& shape, int32_t capacity);
  ~SequenceCache();
  SequenceCache(const SequenceCache&) = delete;
  SequenceCache& operator=(const SequenceCache&) = delete;

  int32_t pos() const { return pos_; }      // tokens consumed so far
  int32_t capacity() const { return capacity_; }
  int32_t max_capacity() const { return max_capacity_; }
  // Makes room for `n` positions in total (grows the KV caches, copying). Throws memra::Error if
  // n exceeds the context limit given at construction.
  void reserve(int32_t n);
  void advance(int32_t n) { pos_ += n; }
  // Back to an empty sequence (zeroes the recurrent state).
  void clear();
  // Copies another cache of the same shape (the n choices of a request fork this way).
  void copy_from(const SequenceCache& other);
  // An empty sequence takes the KV rows of positions [0, n) from `other` (same shape, at least n
  // positions); its recurrent state is left as it is (prefix reuse restores it from a snapshot).
  void copy_kv_prefix_from(const SequenceCache& other, int32_t n);
  // Keeps only the KV rows of positions [0, n) and gives the rest of the capacity back (a sequence
  // parked in the prefix cache holds its prompt's rows and nothing more).
  void shrink_kv(int32_t n);

  const CacheShape& shape() const { return shape_; }
  std::vector<LayerCache> layers;
  GgmlType kv_type;
  size_t kv_row_bytes = 0;    // bytes per position per layer, K (same for V)
  size_t conv_bytes = 0;      // per linear layer
  size_t ssm_bytes = 0;       // per linear layer
  // Bytes the recurrent / KV state occupies now.
  size_t state_bytes() const;

 private:
  DeviceMemory& memory_;
  const CacheShape shape_;
  int32_t pos_ = 0;
  int32_t capacity_ = 0;
  int32_t max_capacity_ = 0;
};

}  // namespace memra
