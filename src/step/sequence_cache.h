// Per-sequence caches: for each full-attention layer a KV block table, for each Gated DeltaNet
// layer the conv window and the recurrent state, laid out by a CacheShape. Allocated in device
// memory; batched kernels reach them through the step plan.
//
// KV is paged (step/kv_blocks.h): position t of a full-attention layer lives in the layer's block
// t / kKvBlock, row t % kKvBlock. Blocks come from a reference-counted pool shared by the
// sequences of one engine, so a resumed prompt and the n choices of a request share the blocks of
// their common prefix (share_kv_prefix_from, copy_from) instead of copying them. A block shared by
// two holders is read-only: a sequence only appends into blocks it owns alone (reserve() copies a
// shared block before the sequence would write into it; check_writable() asserts it before each
// step). Blocks never move while they live, so growing appends blocks and copies nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/ggml_type.h"
#include "step/cache_shape.h"
#include "step/device_memory.h"
#include "step/kv_blocks.h"

namespace memra {

struct LayerCache {
  // Full attention: the block table, block ids of the pool (kv_blocks.h); block b holds positions
  // [b * kKvBlock, (b + 1) * kKvBlock). Every attention layer of a sequence has as many blocks.
  std::vector<int32_t> blocks;
  // Gated DeltaNet: conv window (kernel-1) x channels, oldest input first; recurrent state
  // n_v x d_k x d_v of the shape's ssm_type, float32 or bf16 (S[h][i][j]: key dim i, value dim j).
  float* conv = nullptr;
  void* ssm = nullptr;
};

class SequenceCache {
 public:
  // `capacity`: the context limit (positions) this sequence may grow to. KV blocks come from
  // `pool` (the engine's, shared by its sequences); the first form makes a pool of its own.
  SequenceCache(DeviceMemory& memory, const CacheShape& shape, int32_t capacity);
  SequenceCache(std::shared_ptr<KvBlockPool> pool, const CacheShape& shape, int32_t capacity);
  ~SequenceCache();
  SequenceCache(const SequenceCache&) = delete;
  SequenceCache& operator=(const SequenceCache&) = delete;

  int32_t pos() const { return pos_; }      // tokens consumed so far
  int32_t capacity() const { return n_blocks_ * kKvBlock; }  // positions the blocks hold
  int32_t max_capacity() const { return max_capacity_; }
  // Makes room for `n` positions in total (appends blocks; a shared block at or after pos() is
  // first copied, so appends never write into a shared block). Throws memra::Error if n exceeds
  // the context limit given at construction.
  void reserve(int32_t n);
  void advance(int32_t n) { pos_ += n; }
  // Back to an empty sequence: its KV blocks are released and the recurrent state zeroed.
  void clear();
  // Takes another cache of the same shape: its recurrent state is copied; its KV blocks are
  // shared (full blocks by reference, the partly filled last one copied, so both can append),
  // or copied whole when `share_kv` is false or the two use different pools. The n choices of a
  // request fork this way.
  void copy_from(const SequenceCache& other, bool share_kv = true);
  // An empty sequence takes positions [0, n) of `other` (same shape, at least n positions) and
  // stands at n: the full blocks among them are shared, the partial last block (n not a multiple
  // of kKvBlock) is copied. Its recurrent state is left as it is (prefix reuse restores it from a
  // snapshot).
  void share_kv_prefix_from(const SequenceCache& other, int32_t n);
  // Keeps only positions [0, n) and gives the whole blocks beyond them back (a sequence parked in
  // the prefix cache holds its prompt's rows and nothing more).
  void shrink_kv(int32_t n);
  // Always-on check before a step writes positions [from, to): every reserved block they fall in
  // is owned by this sequence alone.
  void check_writable(int32_t from, int32_t to) const;

  // Device address of the K row (v: the V row) of position `pos` of attention layer `layer`.
  uint8_t* kv_row(int layer, int32_t pos, bool v) const;
  // Device array of the layer's block base addresses (uint8_t* per block, in table order): what
  // the CUDA kernels read, one pointer per split of kKvBlock keys. Uploaded here when the table
  // changed since the last call. Null for a layer without KV.
  uint8_t* const* kv_block_table(int layer);

  const CacheShape& shape() const { return shape_; }
  KvBlockPool& pool() const { return *pool_; }
  std::vector<LayerCache> layers;
  GgmlType kv_type;
  size_t kv_row_bytes = 0;    // bytes per position per layer, K (same for V)
  size_t conv_bytes = 0;      // per linear layer
  size_t ssm_bytes = 0;       // per linear layer
  int32_t kv_blocks_per_layer() const { return n_blocks_; }
  // Bytes of the recurrent state (conv windows and delta-rule states of every linear layer).
  size_t recurrent_bytes() const;

 private:
  void release_kv();
  void take_kv(const SequenceCache& o, int32_t n, bool share);
  void copy_rows(int32_t dst_block, const KvBlockPool& src_pool, int32_t src_block, int32_t rows);
  void tables_changed() { tables_dirty_ = true; }

  std::shared_ptr<KvBlockPool> pool_;
  DeviceMemory& memory_;
  const CacheShape shape_;
  int32_t pos_ = 0;
  int32_t n_blocks_ = 0;
  int32_t max_capacity_ = 0;
  int32_t max_blocks_ = 0;
  std::vector<int> attn_index_;      // per layer: its row in the device tables, -1 without KV
  int n_attn_ = 0;
  uint8_t** dev_tables_ = nullptr;   // device: [n_attn][max_blocks] block base addresses
  std::vector<uint8_t*> host_tables_;
  bool tables_dirty_ = false;
};

}  // namespace memra
