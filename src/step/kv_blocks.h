// Paged attention KV: the rows of a full-attention layer live in fixed blocks of kKvBlock
// positions, handed out by one reference-counted pool per model, so sequences that share a prefix
// (a prompt resumed from the prefix cache, the n choices of a request) share its blocks instead
// of copying them.
//
// A block holds kKvBlock positions of one layer: the K rows of positions 0..kKvBlock-1 of the
// block, then their V rows (row = kv_row_bytes: the cache shape's kv_dim values of its kv_type,
// f32 on the CPU, f16 or 8-bit blocks on CUDA). Position t of a sequence lives in its block
// t / kKvBlock at row t % kKvBlock.
//
// kKvBlock is the attention's split size (kSplit in src/backend/cuda/k_attention.cu, which
// static_asserts they match): a split of keys then reads one block, its base pointer read once,
// and the order in which a row's keys are reduced (per split of 128, splits merged in a fixed
// tree) is what it was with one contiguous buffer, bit for bit.
//
// Sharing rule (copy-on-write at block granularity): a block whose reference count is above 1 is
// read-only. A sequence only writes (appends) into a block it owns alone; SequenceCache copies a
// partially filled shared block before it would append there, and Backend::set_step checks it
// before every step (always on).
//
// Not thread-safe: the engine's one thread calls everything, between steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "step/cache_shape.h"
#include "step/device_memory.h"

namespace memra {

inline constexpr int32_t kKvBlock = 128;  // positions per block (= the attention split size)

class KvBlockPool {
 public:
  // Blocks of kKvBlock K rows + kKvBlock V rows of `shape` (kv_row_bytes each), allocated
  // `slab_blocks` at a time in one allocation (0: about kSlabBytes per slab), so a long prompt
  // costs few device allocations. Up to `keep_free` released blocks keep their memory for the
  // next acquire (freeing device memory synchronises the CUDA stream); beyond that a slab whose
  // blocks are all free is given back.
  static constexpr size_t kSlabBytes = size_t{8} << 20;
  KvBlockPool(DeviceMemory& memory, const CacheShape& shape, int64_t keep_free = 256, int32_t slab_blocks = 0);
  ~KvBlockPool();
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;

  // A block with reference count 1. Its rows hold whatever they held (never read before written).
  int32_t acquire();
  void retain(int32_t id);
  // Drops one reference; at 0 the block goes back to the pool.
  void release(int32_t id);
  int32_t refs(int32_t id) const;
  // Device address of the block's first K row; its V rows start v_offset() bytes later.
  uint8_t* data(int32_t id) const;

  DeviceMemory& memory() const { return memory_; }
  size_t row_bytes() const { return row_bytes_; }
  size_t v_offset() const { return row_bytes_ * kKvBlock; }
  size_t block_bytes() const { return 2 * v_offset(); }
  int64_t blocks_in_use() const { return in_use_; }      // referenced by at least one holder
  int64_t blocks_allocated() const { return allocated_; }  // in use + kept free
  int32_t slab_blocks() const { return slab_blocks_; }
  int64_t bytes_in_use() const { return in_use_ * static_cast<int64_t>(block_bytes()); }

 private:
  // Block id = slab * slab_blocks_ + index in the slab.
  DeviceMemory& memory_;
  size_t row_bytes_ = 0;
  int64_t keep_free_ = 0;
  int32_t slab_blocks_ = 1;
  std::vector<uint8_t*> slabs_;       // null when the slab was given back
  std::vector<int32_t> slab_used_;    // referenced blocks per slab
  std::vector<int32_t> refs_;         // per id
  std::vector<int32_t> free_;         // ids in live slabs with no references
  std::vector<int32_t> vacant_;       // slab numbers without memory
  int64_t in_use_ = 0;
  int64_t allocated_ = 0;
};

}  // namespace memra
