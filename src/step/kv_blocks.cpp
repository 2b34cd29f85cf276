#include "step/kv_blocks.h"

#include <algorithm>

#include "common/error.h"
#include "quant/quant.h"

namespace memra {

KvBlockPool::KvBlockPool(DeviceMemory& memory, const CacheShape& shape, int64_t keep_free)
    : memory_(memory), keep_free_(keep_free) {
  MEMRA_ASSERT(keep_free >= 0);
  row_bytes_ = shape.kv_dim > 0 ? quant::row_bytes(shape.kv_type, shape.kv_dim) : 0;
}

KvBlockPool::~KvBlockPool() {
  // Holders (sequences) keep the pool alive through shared_ptr, so nothing is in use here.
  MEMRA_ASSERT(in_use_ == 0, "KV block pool destroyed with {} blocks in use", in_use_);
  for (uint8_t* p : mem_)
    if (p) memory_.free(p);
}

int32_t KvBlockPool::acquire() {
  int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    if (!vacant_.empty()) {
      id = vacant_.back();
      vacant_.pop_back();
    } else {
      id = static_cast<int32_t>(mem_.size());
      mem_.push_back(nullptr);
      refs_.push_back(0);
    }
    mem_[id] = static_cast<uint8_t*>(memory_.alloc(std::max<size_t>(block_bytes(), 1)));
    ++allocated_;
  }
  MEMRA_ASSERT(refs_[id] == 0);
  refs_[id] = 1;
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
  if (static_cast<int64_t>(free_.size()) < keep_free_) {
    free_.push_back(id);
    return;
  }
  memory_.free(mem_[id]);
  mem_[id] = nullptr;
  --allocated_;
  vacant_.push_back(id);
}

int32_t KvBlockPool::refs(int32_t id) const {
  MEMRA_ASSERT(id >= 0 && id < static_cast<int32_t>(refs_.size()));
  return refs_[id];
}

uint8_t* KvBlockPool::data(int32_t id) const {
  MEMRA_ASSERT(id >= 0 && id < static_cast<int32_t>(mem_.size()) && refs_[id] > 0, "KV block {} is not in use", id);
  return mem_[id];
}

}  // namespace memra
