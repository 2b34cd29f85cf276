#include "step/kv_blocks.h"

#include <algorithm>

#include "common/error.h"
#include "quant/quant.h"

namespace memra {

KvBlockPool::KvBlockPool(DeviceMemory& memory, const CacheShape& shape, int64_t keep_free, int32_t slab_blocks)
    : memory_(memory), keep_free_(keep_free) {
  MEMRA_ASSERT(keep_free >= 0 && slab_blocks >= 0);
  // The 8-bit KV layout (kv_cache_q8.h) keeps whole 64-value pieces per row.
  if (shape.kv_type == GgmlType::Q8_0 && shape.kv_dim % 64 != 0)
    fail("MEMRA_CUDA_KV=q8_0 needs n_head_kv * head_dim to be a multiple of 64 (this model has {}); "
         "use MEMRA_CUDA_KV=f16", shape.kv_dim);
  row_bytes_ = shape.kv_dim > 0 ? quant::row_bytes(shape.kv_type, shape.kv_dim) : 0;
  slab_blocks_ = slab_blocks > 0 ? slab_blocks
                                 : static_cast<int32_t>(std::clamp<size_t>(kSlabBytes / std::max<size_t>(block_bytes(), 1),
                                                                           1, 64));
}

KvBlockPool::~KvBlockPool() {
  // Holders (sequences) keep the pool alive through shared_ptr, so nothing is in use here.
  MEMRA_ASSERT(in_use_ == 0, "KV block pool destroyed with {} blocks in use", in_use_);
  for (uint8_t* p : slabs_)
    if (p) memory_.free(p);
}

int32_t KvBlockPool::acquire() {
  if (free_.empty()) {
    int32_t slab;
    if (!vacant_.empty()) {
      slab = vacant_.back();
      vacant_.pop_back();
    } else {
      slab = static_cast<int32_t>(slabs_.size());
      MEMRA_ASSERT(static_cast<int64_t>(slab + 1) * slab_blocks_ < INT32_MAX, "KV block ids exhausted");
      slabs_.push_back(nullptr);
      slab_used_.push_back(0);
      refs_.resize(refs_.size() + static_cast<size_t>(slab_blocks_), 0);
    }
    slabs_[slab] = static_cast<uint8_t*>(memory_.alloc(std::max<size_t>(block_bytes() * slab_blocks_, 1)));
    allocated_ += slab_blocks_;
    // Pushed so that the slab's first block is taken first (ids ascending within a slab).
    for (int32_t i = slab_blocks_ - 1; i >= 0; --i) free_.push_back(slab * slab_blocks_ + i);
  }
  const int32_t id = free_.back();
  free_.pop_back();
  MEMRA_ASSERT(refs_[id] == 0);
  refs_[id] = 1;
  ++slab_used_[id / slab_blocks_];
  ++in_use_;
  return id;
}

void KvBlockPool::retain(int32_t id) {
  MEMRA_ASSERT(id >= 0 && id < static_cast<int32_t>(refs_.size()) && refs_[id] > 0, "retain of free KV block {}", id);
  ++refs_[id];
}

void KvBlockPool::release(int32_t id) {
  MEMRA_ASSERT(id >= 0 && id < static_cast<int32_t>(refs_.size()) && refs_[id] > 0, "release of free KV block {}",
               id);
  if (--refs_[id] > 0) return;
  --in_use_;
  free_.push_back(id);
  const int32_t slab = id / slab_blocks_;
  if (--slab_used_[slab] > 0 || static_cast<int64_t>(free_.size()) - slab_blocks_ < keep_free_) return;
  // The slab is all free and the blocks kept free beyond it are enough: give it back.
  std::erase_if(free_, [&](int32_t f) { return f / slab_blocks_ == slab; });
  memory_.free(slabs_[slab]);
  slabs_[slab] = nullptr;
  allocated_ -= slab_blocks_;
  vacant_.push_back(slab);
}

int32_t KvBlockPool::refs(int32_t id) const {
  MEMRA_ASSERT(id >= 0 && id < static_cast<int32_t>(refs_.size()));
  return refs_[id];
}

uint8_t* KvBlockPool::data(int32_t id) const {
  MEMRA_ASSERT(id >= 0 && id < static_cast<int32_t>(refs_.size()) && refs_[id] > 0, "KV block {} is not in use", id);
  return slabs_[id / slab_blocks_] + block_bytes() * static_cast<size_t>(id % slab_blocks_);
}

}  // namespace memra
