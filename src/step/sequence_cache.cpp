#include "step/sequence_cache.h"

#include <algorithm>

#include "common/error.h"
#include "quant/quant.h"

namespace memra {

SequenceCache::SequenceCache(DeviceMemory& memory, const CacheShape& shape, int32_t max_capacity)
    : kv_type(shape.kv_type), memory_(memory), shape_(shape), max_capacity_(max_capacity) {
  MEMRA_ASSERT(max_capacity > 0);
  const int64_t kv_dim = shape.kv_dim;
  // The 8-bit KV layout (kv_cache_q8.h) keeps whole 64-value pieces per row.
  if (kv_type == GgmlType::Q8_0 && kv_dim % 64 != 0)
    fail("MEMRA_CUDA_KV=q8_0 needs n_head_kv * head_dim to be a multiple of 64 (this model has {}); "
         "use MEMRA_CUDA_KV=f16", kv_dim);
  kv_row_bytes = quant::row_bytes(kv_type, kv_dim);
  conv_bytes = static_cast<size_t>(shape.conv_floats) * sizeof(float);
  ssm_bytes = static_cast<size_t>(shape.ssm_floats) * sizeof(float);
  layers.resize(shape.layer_mixer.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    if (shape.layer_mixer[l] == MixerKind::GatedDeltaNet) {
      layers[l].conv = static_cast<float*>(memory_.alloc(std::max<size_t>(conv_bytes, 4)));
      layers[l].ssm = static_cast<float*>(memory_.alloc(ssm_bytes));
    }
  }
}

SequenceCache::~SequenceCache() {
  for (auto& L : layers) {
    if (L.k) memory_.free(L.k);
    if (L.v) memory_.free(L.v);
    if (L.conv) memory_.free(L.conv);
    if (L.ssm) memory_.free(L.ssm);
  }
}

void SequenceCache::reserve(int32_t n) {
  if (n > max_capacity_)
    fail("sequence of {} tokens exceeds the context size {} (raise --ctx)", n, max_capacity_);
  if (n <= capacity_) return;
  // Grow geometrically so a long generation reallocates O(log n) times.
  int32_t cap = std::max<int32_t>(capacity_, 256);
  while (cap < n) cap = std::min<int64_t>(static_cast<int64_t>(cap) * 2, max_capacity_);
  for (size_t l = 0; l < layers.size(); ++l) {
    if (shape_.layer_mixer[l] != MixerKind::FullAttention) continue;
    for (void** p : {&layers[l].k, &layers[l].v}) {
      void* fresh = memory_.alloc(kv_row_bytes * cap);
      if (*p) {
        memory_.copy(fresh, *p, kv_row_bytes * pos_);
        memory_.free(*p);
      }
      *p = fresh;
    }
  }
  capacity_ = cap;
}

void SequenceCache::clear() {
  pos_ = 0;
  for (auto& L : layers) {
    if (L.conv) memory_.zero(L.conv, conv_bytes);
    if (L.ssm) memory_.zero(L.ssm, ssm_bytes);
  }
}

void SequenceCache::copy_from(const SequenceCache& o) {
  MEMRA_ASSERT(o.shape_ == shape_, "cache copy across cache shapes");
  reserve(std::max(o.pos_, 1));
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerCache& s = o.layers[l];
    LayerCache& d = layers[l];
    if (s.k) {
      memory_.copy(d.k, s.k, kv_row_bytes * o.pos_);
      memory_.copy(d.v, s.v, kv_row_bytes * o.pos_);
    }
    if (s.conv) memory_.copy(d.conv, s.conv, conv_bytes);
    if (s.ssm) memory_.copy(d.ssm, s.ssm, ssm_bytes);
  }
  pos_ = o.pos_;
}

void SequenceCache::copy_kv_prefix_from(const SequenceCache& o, int32_t n) {
  MEMRA_ASSERT(o.shape_ == shape_, "KV copy across cache shapes");
  MEMRA_ASSERT(pos_ == 0 && n >= 0 && n <= o.capacity_, "KV prefix copy of {} rows (source holds {})", n,
               o.capacity_);
  reserve(std::max(n, 1));
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerCache& s = o.layers[l];
    if (!s.k) continue;
    memory_.copy(layers[l].k, s.k, kv_row_bytes * static_cast<size_t>(n));
    memory_.copy(layers[l].v, s.v, kv_row_bytes * static_cast<size_t>(n));
  }
}

void SequenceCache::shrink_kv(int32_t n) {
  MEMRA_ASSERT(n >= 0 && n <= capacity_, "shrink_kv to {} rows of {}", n, capacity_);
  pos_ = std::min(pos_, n);
  const int32_t cap = std::max(n, 1);
  if (cap >= capacity_) return;
  for (size_t l = 0; l < layers.size(); ++l) {
    if (shape_.layer_mixer[l] != MixerKind::FullAttention) continue;
    for (void** p : {&layers[l].k, &layers[l].v}) {
      void* fresh = memory_.alloc(kv_row_bytes * cap);
      if (*p) {
        memory_.copy(fresh, *p, kv_row_bytes * static_cast<size_t>(n));
        memory_.free(*p);
      }
      *p = fresh;
    }
  }
  capacity_ = cap;
}

size_t SequenceCache::state_bytes() const {
  size_t total = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    if (shape_.layer_mixer[l] == MixerKind::FullAttention) total += 2 * kv_row_bytes * static_cast<size_t>(capacity_);
    else total += conv_bytes + ssm_bytes;
  }
  return total;
}

}  // namespace memra
