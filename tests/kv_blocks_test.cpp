// Paged attention KV (step/kv_blocks.h, step/sequence_cache.h): the reference-counted block pool,
// sharing by prefix (full blocks by reference, the partial last block copied), growth by appended
// blocks, shrinking by whole blocks, forks that share, the always-on check that no step writes
// into a shared block, and the prefix cache counting a shared block once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/device_step.h"
#include "common/error.h"
#include "step/kv_blocks.h"
#include "step/prefix_cache.h"
#include "step/sequence_cache.h"
#include "step/step_plan.h"

namespace memra {
namespace {

// Host memory standing in for a device: counts live allocations.
class HostMemory final : public DeviceMemory {
 public:
  ~HostMemory() { EXPECT_EQ(live, 0); }
  void* alloc(size_t bytes) override {
    ++live;
    return std::calloc(bytes, 1);
  }
  void free(void* p) override {
    if (!p) return;
    --live;
    std::free(p);
  }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void zero(void* dst, size_t bytes) override { std::memset(dst, 0, bytes); }
  void to_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  int64_t live = 0;
};

// Two full-attention layers around one Gated DeltaNet layer; f32 rows of 8 values.
CacheShape hybrid_shape() {
  CacheShape s;
  s.layer_mixer = {MixerKind::FullAttention, MixerKind::GatedDeltaNet, MixerKind::FullAttention};
  s.kv_type = GgmlType::F32;
  s.kv_dim = 8;
  s.conv_values = 6;
  s.ssm_values = 16;
  return s;
}

constexpr int kAttn[2] = {0, 2};

// The value a test writes at (layer, position, K|V, element): distinct everywhere.
float mark(int layer, int32_t pos, bool v, int i, int salt = 0) {
  return static_cast<float>(((salt * 4 + layer) * 2 + (v ? 1 : 0)) * 100000 + pos * 8 + i);
}

// Writes positions [from, to) as a step would (the sequence advances to `to`).
void fill(SequenceCache& s, int32_t from, int32_t to, int salt = 0) {
  s.reserve(to);
  s.check_writable(from, to);
  for (int layer : kAttn)
    for (int32_t t = from; t < to; ++t)
      for (bool v : {false, true}) {
        float* row = reinterpret_cast<float*>(s.kv_row(layer, t, v));
        for (int i = 0; i < 8; ++i) row[i] = mark(layer, t, v, i, salt);
      }
  s.advance(to - s.pos());
}

// Whether positions [0, n) hold what fill() wrote (salt per position from `salt_of`).
template <typename SaltOf>
bool holds(const SequenceCache& s, int32_t n, SaltOf salt_of) {
  for (int layer : kAttn)
    for (int32_t t = 0; t < n; ++t)
      for (bool v : {false, true}) {
        const float* row = reinterpret_cast<const float*>(s.kv_row(layer, t, v));
        for (int i = 0; i < 8; ++i)
          if (row[i] != mark(layer, t, v, i, salt_of(t))) return false;
      }
  return true;
}
bool holds(const SequenceCache& s, int32_t n) {
  return holds(s, n, [](int32_t) { return 0; });
}

TEST(KvBlocks, PoolCountsReferencesAndReusesBlocks) {
  HostMemory mem;
  {
    KvBlockPool pool(mem, hybrid_shape(), /*keep_free=*/1, /*slab_blocks=*/1);
    EXPECT_EQ(pool.row_bytes(), 8 * sizeof(float));
    EXPECT_EQ(pool.block_bytes(), 2 * kKvBlock * 8 * sizeof(float));
    const int32_t a = pool.acquire(), b = pool.acquire();
    EXPECT_NE(a, b);
    EXPECT_NE(pool.data(a), pool.data(b));
    EXPECT_EQ(pool.refs(a), 1);
    pool.retain(a);
    EXPECT_EQ(pool.refs(a), 2);
    EXPECT_EQ(pool.blocks_in_use(), 2);
    EXPECT_EQ(pool.bytes_in_use(), 2 * static_cast<int64_t>(pool.block_bytes()));
    pool.release(a);
    EXPECT_EQ(pool.refs(a), 1);
    EXPECT_EQ(pool.blocks_in_use(), 2);
    uint8_t* a_mem = pool.data(a);
    pool.release(a);  // kept free (keep_free 1)
    EXPECT_EQ(pool.refs(a), 0);
    EXPECT_EQ(pool.blocks_in_use(), 1);
    EXPECT_EQ(pool.blocks_allocated(), 2);
    const int32_t c = pool.acquire();  // the kept block again, no allocation
    EXPECT_EQ(c, a);
    EXPECT_EQ(pool.data(c), a_mem);
    EXPECT_EQ(mem.live, 2);
    pool.release(b);
    pool.release(c);  // beyond keep_free: freed
    EXPECT_EQ(pool.blocks_in_use(), 0);
    EXPECT_EQ(pool.blocks_allocated(), 1);
    EXPECT_EQ(mem.live, 1);
  }
  EXPECT_EQ(mem.live, 0);
}

TEST(KvBlocks, PoolAllocatesSlabsOfBlocks) {
  HostMemory mem;
  {
    KvBlockPool pool(mem, hybrid_shape(), /*keep_free=*/0, /*slab_blocks=*/4);
    std::vector<int32_t> ids;
    for (int i = 0; i < 5; ++i) ids.push_back(pool.acquire());
    EXPECT_EQ(mem.live, 2);  // two slabs of 4 blocks
    EXPECT_EQ(pool.blocks_allocated(), 8);
    for (int i = 1; i < 4; ++i) EXPECT_EQ(pool.data(ids[i]), pool.data(ids[0]) + i * pool.block_bytes());
    std::set<uint8_t*> distinct;
    for (int32_t id : ids) distinct.insert(pool.data(id));
    EXPECT_EQ(distinct.size(), 5u);
    for (int i = 0; i < 3; ++i) pool.release(ids[i]);
    EXPECT_EQ(mem.live, 2);  // a slab with a block in use stays
    pool.release(ids[3]);
    EXPECT_EQ(mem.live, 1);  // all free, nothing to keep: given back
    pool.release(ids[4]);
    EXPECT_EQ(mem.live, 0);
    EXPECT_EQ(pool.blocks_in_use(), 0);
    EXPECT_EQ(pool.blocks_allocated(), 0);
    const int32_t again = pool.acquire();  // a vacant slab number is reused
    EXPECT_GE(again, 0);
    EXPECT_EQ(mem.live, 1);
    pool.release(again);
  }
  EXPECT_EQ(mem.live, 0);
  // The default slab is about kSlabBytes (at most 64 blocks).
  KvBlockPool big(mem, hybrid_shape());
  EXPECT_EQ(big.slab_blocks(), 64);
}

TEST(KvBlocks, GrowthAppendsBlocksAndCopiesNothing) {
  HostMemory mem;
  auto pool = std::make_shared<KvBlockPool>(mem, hybrid_shape());
  SequenceCache s(pool, hybrid_shape(), 1000);
  s.reserve(100);
  EXPECT_EQ(s.kv_blocks_per_layer(), 1);
  EXPECT_EQ(s.capacity(), kKvBlock);
  fill(s, 0, 100);
  const std::vector<int32_t> first = s.layers[0].blocks;
  uint8_t* row0 = s.kv_row(0, 0, false);
  s.reserve(kKvBlock + 1);
  EXPECT_EQ(s.kv_blocks_per_layer(), 2);
  EXPECT_EQ(s.layers[0].blocks[0], first[0]);  // the old block stays where it was
  EXPECT_EQ(s.kv_row(0, 0, false), row0);
  fill(s, 100, 700);
  EXPECT_EQ(s.kv_blocks_per_layer(), (700 + kKvBlock - 1) / kKvBlock);
  EXPECT_EQ(pool->blocks_in_use(), 2 * s.kv_blocks_per_layer());  // both attention layers
  EXPECT_TRUE(holds(s, 700));
  EXPECT_TRUE(s.layers[1].blocks.empty());  // the Gated DeltaNet layer has no KV
  EXPECT_THROW(s.reserve(1001), Error);     // beyond the context limit
  // Position t is row t % kKvBlock of block t / kKvBlock, V rows after the block's K rows.
  EXPECT_EQ(s.kv_row(2, 300, true),
            pool->data(s.layers[2].blocks[2]) + pool->v_offset() + (300 - 2 * kKvBlock) * s.kv_row_bytes);
}

TEST(KvBlocks, ShrinkGivesBackWholeBlocks) {
  HostMemory mem;
  auto pool = std::make_shared<KvBlockPool>(mem, hybrid_shape());
  SequenceCache s(pool, hybrid_shape(), 1000);
  fill(s, 0, 600);
  EXPECT_EQ(pool->blocks_in_use(), 2 * 5);
  s.shrink_kv(300);
  EXPECT_EQ(s.pos(), 300);
  EXPECT_EQ(s.kv_blocks_per_layer(), 3);
  EXPECT_EQ(pool->blocks_in_use(), 2 * 3);
  EXPECT_TRUE(holds(s, 300));
  s.shrink_kv(256);  // a block boundary: block 2 goes too
  EXPECT_EQ(s.kv_blocks_per_layer(), 2);
  EXPECT_EQ(pool->blocks_in_use(), 2 * 2);
  s.shrink_kv(0);
  EXPECT_EQ(pool->blocks_in_use(), 0);
  EXPECT_EQ(s.capacity(), 0);
}

TEST(KvBlocks, SharedPrefixSharesFullBlocksAndCopiesThePartialOne) {
  HostMemory mem;
  auto pool = std::make_shared<KvBlockPool>(mem, hybrid_shape());
  auto a = std::make_unique<SequenceCache>(pool, hybrid_shape(), 1000);
  fill(*a, 0, 400);
  const int64_t a_blocks = pool->blocks_in_use();  // 2 layers x 4 blocks
  SequenceCache b(pool, hybrid_shape(), 1000);
  b.share_kv_prefix_from(*a, 300);
  EXPECT_EQ(b.pos(), 300);
  EXPECT_EQ(b.kv_blocks_per_layer(), 3);
  for (int layer : kAttn) {
    for (int blk = 0; blk < 2; ++blk) {  // positions 0..255: shared
      EXPECT_EQ(b.layers[layer].blocks[blk], a->layers[layer].blocks[blk]);
      EXPECT_EQ(pool->refs(b.layers[layer].blocks[blk]), 2);
    }
    // Positions 256..299: a copy of its own, so b can append at 300 while a keeps its rows.
    EXPECT_NE(b.layers[layer].blocks[2], a->layers[layer].blocks[2]);
    EXPECT_EQ(pool->refs(b.layers[layer].blocks[2]), 1);
  }
  EXPECT_EQ(pool->blocks_in_use(), a_blocks + 2);  // one copied block per layer, nothing more
  EXPECT_TRUE(holds(b, 300));
  // b appends its own rows after 300; a's rows 300..399 (same block index) are untouched.
  fill(b, 300, 500, /*salt=*/1);
  EXPECT_TRUE(holds(b, 500, [](int32_t t) { return t < 300 ? 0 : 1; }));
  EXPECT_TRUE(holds(*a, 400));
  // A prefix on a block boundary shares every block and copies none.
  SequenceCache c(pool, hybrid_shape(), 1000);
  const int64_t before = pool->blocks_in_use();
  c.share_kv_prefix_from(*a, 256);
  EXPECT_EQ(pool->blocks_in_use(), before);
  c.reserve(257);  // the next block is new
  EXPECT_EQ(pool->blocks_in_use(), before + 2);
  fill(c, 256, 260, /*salt=*/2);
  EXPECT_TRUE(holds(*a, 400));
  // The source going away leaves the sharers their rows.
  a.reset();
  EXPECT_TRUE(holds(b, 500, [](int32_t t) { return t < 300 ? 0 : 1; }));
  EXPECT_TRUE(holds(c, 260, [](int32_t t) { return t < 256 ? 0 : 2; }));
  for (int layer : kAttn) EXPECT_EQ(pool->refs(b.layers[layer].blocks[0]), 2);  // b and c
}

TEST(KvBlocks, ForksShareFullBlocks) {
  HostMemory mem;
  auto pool = std::make_shared<KvBlockPool>(mem, hybrid_shape());
  SequenceCache a(pool, hybrid_shape(), 1000);
  fill(a, 0, 333);
  for (auto& L : a.layers)
    if (L.ssm) static_cast<float*>(L.ssm)[3] = 42.0f;
  const int64_t a_blocks = pool->blocks_in_use();
  SequenceCache fork(pool, hybrid_shape(), 1000);
  fork.copy_from(a);
  EXPECT_EQ(fork.pos(), 333);
  EXPECT_EQ(static_cast<float*>(fork.layers[1].ssm)[3], 42.0f);  // the recurrent state is copied
  EXPECT_EQ(pool->blocks_in_use(), a_blocks + 2);  // only the partial block (256..332) per layer
  for (int layer : kAttn) {
    EXPECT_EQ(fork.layers[layer].blocks[0], a.layers[layer].blocks[0]);
    EXPECT_EQ(fork.layers[layer].blocks[1], a.layers[layer].blocks[1]);
    EXPECT_NE(fork.layers[layer].blocks[2], a.layers[layer].blocks[2]);
  }
  EXPECT_TRUE(holds(fork, 333));
  // Both choices decode on, each into blocks of its own.
  fill(a, 333, 400, 1);
  fill(fork, 333, 450, 2);
  EXPECT_TRUE(holds(a, 400, [](int32_t t) { return t < 333 ? 0 : 1; }));
  EXPECT_TRUE(holds(fork, 450, [](int32_t t) { return t < 333 ? 0 : 2; }));
  // A deep copy shares nothing (memra bench's sequences).
  SequenceCache deep(pool, hybrid_shape(), 1000);
  const int64_t before = pool->blocks_in_use();
  deep.copy_from(a, /*share_kv=*/false);
  EXPECT_EQ(pool->blocks_in_use(), before + 2 * 4);
  EXPECT_TRUE(holds(deep, 400, [](int32_t t) { return t < 333 ? 0 : 1; }));
  // Sequences of different pools copy.
  SequenceCache other(mem, hybrid_shape(), 1000);
  other.copy_from(a);
  EXPECT_TRUE(holds(other, 400, [](int32_t t) { return t < 333 ? 0 : 1; }));
  EXPECT_EQ(other.pool().blocks_in_use(), 2 * 4);
}

TEST(KvBlocks, NoStepWritesIntoASharedBlock) {
  HostMemory mem;
  auto pool = std::make_shared<KvBlockPool>(mem, hybrid_shape());
  SequenceCache a(pool, hybrid_shape(), 1000);
  fill(a, 0, 300);
  SequenceCache b(pool, hybrid_shape(), 1000);
  b.share_kv_prefix_from(a, 256);  // blocks 0 and 1 shared
  b.check_writable(256, 300);      // block 2 is b's own
  a.check_writable(300, 301);
  // Shrunk back into a shared block, `a` must not write there...
  a.shrink_kv(200);
  EXPECT_DEATH(a.check_writable(200, 201), "shared by 2 holders");
  // ... nor may a step plan it (Backend::set_step checks every sequence of the plan).
  CpuBackend cpu;
  StepPlan plan;
  const int32_t tok = 0;
  plan.add(&a, &tok, 1, a.pos());
  EXPECT_DEATH(cpu.set_step(plan), "shared by 2 holders");
  // reserve() copies the shared block first (copy-on-write of rows 128..199), then it is a's.
  const int32_t shared_id = a.layers[0].blocks[1];
  a.reserve(201);
  EXPECT_NE(a.layers[0].blocks[1], shared_id);
  EXPECT_EQ(pool->refs(shared_id), 1);  // b's alone now
  a.check_writable(200, 201);
  cpu.set_step(plan);
  fill(a, 200, 260, 1);
  EXPECT_TRUE(holds(a, 260, [](int32_t t) { return t < 200 ? 0 : 1; }));
  EXPECT_TRUE(holds(b, 256));  // b's rows 200..255 are what a wrote before
}

TEST(KvBlocks, ClearReleasesTheBlocks) {
  HostMemory mem;
  auto pool = std::make_shared<KvBlockPool>(mem, hybrid_shape());
  SequenceCache a(pool, hybrid_shape(), 1000);
  fill(a, 0, 200);
  SequenceCache b(pool, hybrid_shape(), 1000);
  b.copy_from(a);
  b.clear();
  EXPECT_EQ(b.pos(), 0);
  EXPECT_EQ(b.capacity(), 0);
  fill(b, 0, 10, 1);  // new blocks: a's rows stay
  EXPECT_TRUE(holds(a, 200));
}

// The prefix cache parks sequences that share blocks (a prompt resumed from another): each
// distinct block is counted once in its bytes and in its kv_blocks.
TEST(KvBlocks, PrefixCacheCountsASharedBlockOnce) {
  HostMemory mem;
  const CacheShape shape = hybrid_shape();
  auto pool = std::make_shared<KvBlockPool>(mem, shape);
  {
    PrefixCache pc(mem, shape, /*chunk=*/64, PrefixCacheOptions{64, 64, 0});
    const std::vector<float> logits(4, 0.5f);
    std::vector<int32_t> prompt_a(300);
    for (int32_t i = 0; i < 300; ++i) prompt_a[static_cast<size_t>(i)] = i;
    std::vector<int32_t> prompt_b = prompt_a;
    for (int32_t i = 300; i < 420; ++i) prompt_b.push_back(i);

    // Prompt A, cold, prefilled in steps that stop at the cache's snapshot points.
    auto run = [&](const std::vector<int32_t>& prompt) {
      auto seq = std::make_shared<SequenceCache>(pool, shape, 1000);
      const PrefixCache::Resume r = pc.resume(*seq, prompt);
      PrefixCache::Handle h = pc.record(seq, prompt, r);
      while (seq->pos() < static_cast<int32_t>(prompt.size())) {
        fill(*seq, seq->pos(), std::min<int32_t>(pc.next_stop(h), static_cast<int32_t>(prompt.size())));
        pc.progress(h);
      }
      pc.finish(h, logits);
      return r.tokens;
    };
    EXPECT_EQ(run(prompt_a), 0);
    pc.maintain();
    PrefixCacheStats s = pc.stats();
    EXPECT_EQ(s.kv_blocks, 2 * 3);  // 300 positions: 3 blocks per attention layer
    EXPECT_EQ(pool->blocks_in_use(), 2 * 3);
    const int64_t snap = static_cast<int64_t>(pc.snapshot_bytes());
    const int64_t recurrent = static_cast<int64_t>((shape.conv_values + shape.ssm_values) * sizeof(float));
    const int64_t block = static_cast<int64_t>(pool->block_bytes());
    EXPECT_EQ(s.bytes, s.snapshots * snap + recurrent + 6 * block);

    // Prompt B extends A: resumed at 300 (A's end), it shares A's blocks 0 and 1 and copies the
    // partial block 2; it then holds 420 positions (4 blocks per layer).
    EXPECT_EQ(run(prompt_b), 300);
    pc.maintain();
    s = pc.stats();
    EXPECT_EQ(s.entries, 2);
    EXPECT_EQ(s.kv_blocks, 2 * (3 + 2));  // A's 3, B's blocks 2 and 3: blocks 0, 1 once
    EXPECT_EQ(pool->blocks_in_use(), 2 * 5);
    EXPECT_EQ(s.bytes, s.snapshots * snap + 2 * recurrent + 10 * block);
  }
  EXPECT_EQ(pool->blocks_in_use(), 0);  // the cache let go of everything
}

// The decode step's mixed-depth test (the CUDA split attention's work list, and a decode graph key):
// true only for one row a sequence whose own KV blocks are under 3/4 of every sequence at the deepest.
TEST(StepPlanMixedDepths, OneDeepSequenceAmongShallowOnesIsMixed) {
  const int32_t tok[4] = {1, 2, 3, 4};
  auto plan_of = [&](const std::vector<std::pair<int32_t, int32_t>>& depth_rows) {
    StepPlan p;
    for (const auto& [depth, rows] : depth_rows) p.add(nullptr, tok, rows, depth);
    return p;
  };
  const int32_t b = kKvBlock;
  EXPECT_FALSE(plan_of({}).mixed_depths(b));
  EXPECT_FALSE(plan_of({{10, 1}}).mixed_depths(b));
  EXPECT_FALSE(plan_of({{512, 1}, {500, 1}, {520, 1}}).mixed_depths(b));        // equal block counts
  EXPECT_TRUE(plan_of({{32000, 1}, {512, 1}, {512, 1}, {512, 1}}).mixed_depths(b));
  EXPECT_FALSE(plan_of({{32000, 1}, {512, 1}, {512, 4}}).mixed_depths(b));       // a prompt chunk
  // The threshold, own blocks < 3/4 of every sequence at the deepest: two sequences, the deepest 3
  // blocks (6 x 3/4 = 4.5): 3 + 1 = 4 blocks is mixed, 3 + 2 = 5 is not.
  EXPECT_TRUE(plan_of({{3 * b - 1, 1}, {0, 1}}).mixed_depths(b));
  EXPECT_FALSE(plan_of({{3 * b - 1, 1}, {2 * b - 1, 1}}).mixed_depths(b));
}

// The step upload's layout (backend/cuda/device_step.h): every offset a recorded graph's kernels
// read depends on the step's shape, not on the attention work list's length.
TEST(StepUploadLayout, TablesStayPutWhateverTheListLength) {
  for (const bool mixed : {false, true}) {
    const cuda::StepUploadLayout a = cuda::step_upload_layout(5, 5, 32, mixed, 31);
    for (const size_t items : {0, 1, 4, 35, 4000}) {
      const cuda::StepUploadLayout b = cuda::step_upload_layout(5, 5, 32, mixed, items);
      EXPECT_EQ(a.ptr_off, b.ptr_off) << items;
      EXPECT_EQ(a.items_off, b.items_off) << items;
      EXPECT_EQ(b.total, b.items_off + (mixed ? items * sizeof(int32_t) : 0)) << items;
      EXPECT_EQ(b.ptr_off % 16, 0u);
      EXPECT_GE(b.ptr_off, (15 + (mixed ? 6 : 0)) * sizeof(int32_t));  // the int tables fit before the pointers
      EXPECT_EQ(b.items_off, b.ptr_off + 3 * 32 * 5 * sizeof(void*));
    }
  }
}

}  // namespace
}  // namespace memra
