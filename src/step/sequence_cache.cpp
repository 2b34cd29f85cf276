#include "step/sequence_cache.h"

#include <algorithm>

#include "common/error.h"
#include "quant/quant.h"

namespace memra {

namespace {

int32_t blocks_for(int32_t positions) { return (positions + kKvBlock - 1) / kKvBlock; }

}  // namespace

SequenceCache::SequenceCache(DeviceMemory& memory, const CacheShape& shape, int32_t max_capacity)
    : SequenceCache(std::make_shared<KvBlockPool>(memory, shape), shape, max_capacity) {}

SequenceCache::SequenceCache(std::shared_ptr<KvBlockPool> pool, const CacheShape& shape, int32_t max_capacity)
    : kv_type(shape.kv_type), pool_(std::move(pool)), memory_(pool_->memory()), shape_(shape),
      max_capacity_(max_capacity) {
  MEMRA_ASSERT(max_capacity > 0);
  // The pool checked that the rows' layout is one the backends support (8-bit: kv_dim % 64).
  kv_row_bytes = quant::row_bytes(kv_type, shape.kv_dim);
  MEMRA_ASSERT(pool_->row_bytes() == kv_row_bytes, "KV block pool of {}-byte rows for a cache of {}-byte rows",
               pool_->row_bytes(), kv_row_bytes);
  MEMRA_ASSERT(shape.ssm_type == GgmlType::F32 || shape.ssm_type == GgmlType::BF16, "recurrent state of type {}",
               static_cast<int>(shape.ssm_type));
  conv_bytes = shape.conv_bytes();
  ssm_bytes = shape.ssm_bytes();
  max_blocks_ = blocks_for(max_capacity);
  layers.resize(shape.layer_mixer.size());
  attn_index_.assign(layers.size(), -1);
  for (size_t l = 0; l < layers.size(); ++l) {
    if (shape.layer_mixer[l] == MixerKind::GatedDeltaNet) {
      layers[l].conv = static_cast<float*>(memory_.alloc(std::max<size_t>(conv_bytes, 4)));
      layers[l].ssm = memory_.alloc(ssm_bytes);
    } else {
      attn_index_[l] = n_attn_++;
    }
  }
  if (n_attn_ > 0) {
    const size_t n = static_cast<size_t>(n_attn_) * max_blocks_;
    host_tables_.assign(n, nullptr);
    dev_tables_ = static_cast<uint8_t**>(memory_.alloc(n * sizeof(uint8_t*)));  // zero: no blocks
  }
}

SequenceCache::~SequenceCache() {
  release_kv();
  for (auto& L : layers) {
    if (L.conv) memory_.free(L.conv);
    if (L.ssm) memory_.free(L.ssm);
  }
  if (dev_tables_) memory_.free(dev_tables_);
}

void SequenceCache::release_kv() {
  for (auto& L : layers) {
    for (int32_t id : L.blocks) pool_->release(id);
    L.blocks.clear();
  }
  if (n_blocks_ > 0) tables_changed();
  n_blocks_ = 0;
}

// Rows [0, rows) of K and of V of block `src_block` of `src_pool` into this pool's `dst_block`.
void SequenceCache::copy_rows(int32_t dst_block, const KvBlockPool& src_pool, int32_t src_block, int32_t rows) {
  if (rows <= 0) return;
  const size_t bytes = kv_row_bytes * static_cast<size_t>(rows);
  uint8_t* d = pool_->data(dst_block);
  const uint8_t* s = src_pool.data(src_block);
  memory_.copy(d, s, bytes);
  memory_.copy(d + pool_->v_offset(), s + src_pool.v_offset(), bytes);
}

void SequenceCache::reserve(int32_t n) {
  if (n > max_capacity_)
    fail("sequence of {} tokens exceeds the context size {} (raise --ctx)", n, max_capacity_);
  // Copy-on-write: a block holding positions at or after pos_ will be written; if another holder
  // shares it (possible only after shrink_kv or an unusual share), this sequence takes a copy of
  // its rows below pos_ first.
  for (int32_t b = pos_ / kKvBlock; b < n_blocks_; ++b) {
    for (size_t l = 0; l < layers.size(); ++l) {
      if (attn_index_[l] < 0) continue;
      int32_t& id = layers[l].blocks[static_cast<size_t>(b)];
      if (pool_->refs(id) == 1) continue;
      const int32_t fresh = pool_->acquire();
      copy_rows(fresh, *pool_, id, std::clamp(pos_ - b * kKvBlock, 0, kKvBlock));
      pool_->release(id);
      id = fresh;
      tables_changed();
    }
  }
  const int32_t need = blocks_for(n);
  if (need <= n_blocks_) return;
  for (size_t l = 0; l < layers.size(); ++l) {
    if (attn_index_[l] < 0) continue;
    while (static_cast<int32_t>(layers[l].blocks.size()) < need) layers[l].blocks.push_back(pool_->acquire());
  }
  n_blocks_ = need;
  tables_changed();
}

void SequenceCache::clear() {
  pos_ = 0;
  release_kv();
  for (auto& L : layers) {
    if (L.conv) memory_.zero(L.conv, conv_bytes);
    if (L.ssm) memory_.zero(L.ssm, ssm_bytes);
  }
}

// This sequence (its KV released) takes positions [0, n) of `o`: full blocks by reference when
// `share`, every other row copied into blocks of its own.
void SequenceCache::take_kv(const SequenceCache& o, int32_t n, bool share) {
  MEMRA_ASSERT(o.shape_ == shape_, "KV taken across cache shapes");
  MEMRA_ASSERT(&o != this);
  MEMRA_ASSERT(n >= 0 && n <= o.capacity() && n <= max_capacity_, "KV prefix of {} rows (source holds {})", n,
               o.capacity());
  release_kv();
  share = share && o.pool_ == pool_;
  const int32_t full = n / kKvBlock;
  const int32_t need = blocks_for(n);
  for (size_t l = 0; l < layers.size(); ++l) {
    if (attn_index_[l] < 0) continue;
    const std::vector<int32_t>& src = o.layers[l].blocks;
    std::vector<int32_t>& dst = layers[l].blocks;
    for (int32_t b = 0; b < need; ++b) {
      const int32_t rows = std::min(kKvBlock, n - b * kKvBlock);
      if (share && b < full) {
        pool_->retain(src[static_cast<size_t>(b)]);
        dst.push_back(src[static_cast<size_t>(b)]);
      } else {
        dst.push_back(pool_->acquire());
        copy_rows(dst.back(), *o.pool_, src[static_cast<size_t>(b)], rows);
      }
    }
  }
  n_blocks_ = need;
  tables_changed();
}

void SequenceCache::copy_from(const SequenceCache& o, bool share_kv) {
  take_kv(o, o.pos_, share_kv);
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerCache& s = o.layers[l];
    LayerCache& d = layers[l];
    if (s.conv) memory_.copy(d.conv, s.conv, conv_bytes);
    if (s.ssm) memory_.copy(d.ssm, s.ssm, ssm_bytes);
  }
  pos_ = o.pos_;
  reserve(std::max(pos_, 1));
}

void SequenceCache::share_kv_prefix_from(const SequenceCache& o, int32_t n) {
  MEMRA_ASSERT(pos_ == 0, "KV prefix shared into a sequence at position {}", pos_);
  take_kv(o, n, true);
  pos_ = n;
}

void SequenceCache::shrink_kv(int32_t n) {
  MEMRA_ASSERT(n >= 0 && n <= capacity(), "shrink_kv to {} rows of {}", n, capacity());
  pos_ = std::min(pos_, n);
  const int32_t keep = blocks_for(n);
  if (keep >= n_blocks_) return;
  for (auto& L : layers) {
    if (L.blocks.empty()) continue;
    for (size_t b = static_cast<size_t>(keep); b < L.blocks.size(); ++b) pool_->release(L.blocks[b]);
    L.blocks.resize(static_cast<size_t>(keep));
  }
  n_blocks_ = keep;
  tables_changed();
}

void SequenceCache::check_writable(int32_t from, int32_t to) const {
  MEMRA_ASSERT(from >= 0 && from <= to, "KV rows [{}, {}) written", from, to);
  if (from == to) return;
  // Rows beyond the reserved blocks are the attention op's to refuse (a step of other ops may
  // name an unreserved sequence).
  const int32_t end = std::min((to - 1) / kKvBlock + 1, n_blocks_);
  for (size_t l = 0; l < layers.size(); ++l) {
    if (attn_index_[l] < 0) continue;
    for (int32_t b = from / kKvBlock; b < end; ++b) {
      const int32_t id = layers[l].blocks[static_cast<size_t>(b)];
      MEMRA_ASSERT(pool_->refs(id) == 1, "a step writes KV rows [{}, {}) of layer {} into block {} shared by {} holders",
                   from, to, l, id, pool_->refs(id));
    }
  }
}

uint8_t* SequenceCache::kv_row(int layer, int32_t pos, bool v) const {
  MEMRA_ASSERT(layer >= 0 && layer < static_cast<int>(layers.size()) && attn_index_[layer] >= 0,
               "layer {} has no KV", layer);
  MEMRA_ASSERT(pos >= 0 && pos < capacity(), "KV row {} of {}", pos, capacity());
  const int32_t id = layers[layer].blocks[static_cast<size_t>(pos / kKvBlock)];
  return pool_->data(id) + (v ? pool_->v_offset() : 0) + kv_row_bytes * static_cast<size_t>(pos % kKvBlock);
}

uint8_t* const* SequenceCache::kv_block_table(int layer) {
  if (layer < 0 || layer >= static_cast<int>(layers.size()) || attn_index_[layer] < 0) return nullptr;
  if (tables_dirty_) {
    // One upload of every layer's table. The host copy is consumed before to_device returns (a
    // pageable-memory upload on CUDA is staged), and it is ordered before the step's kernels.
    for (size_t l = 0; l < layers.size(); ++l) {
      if (attn_index_[l] < 0) continue;
      uint8_t** row = host_tables_.data() + static_cast<size_t>(attn_index_[l]) * max_blocks_;
      for (int32_t b = 0; b < max_blocks_; ++b)
        row[b] = b < n_blocks_ ? pool_->data(layers[l].blocks[static_cast<size_t>(b)]) : nullptr;
    }
    memory_.to_device(dev_tables_, host_tables_.data(), host_tables_.size() * sizeof(uint8_t*));
    tables_dirty_ = false;
  }
  return dev_tables_ + static_cast<size_t>(attn_index_[layer]) * max_blocks_;
}

size_t SequenceCache::recurrent_bytes() const { return shape_.recurrent_bytes(); }

}  // namespace memra
