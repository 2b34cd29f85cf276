// Prefix and state reuse: a request whose prompt extends a prompt seen before starts from the
// state the earlier prefill reached and prefills only the rest.
//
// A hybrid model's sequence state has two parts. The KV rows of the full-attention layers are
// per position: rows [0, n) of any sequence that consumed the same first n tokens are the same
// bits, so they can be taken from it. The Gated DeltaNet layers keep one recurrent state (conv
// window + delta-rule state) that cannot be rolled back: it is kept as snapshots, copies taken
// while the prompt is prefilled.
//
// Exactness: a resumed prompt must give the bits a cold prefill gives. Both backends give a
// sequence the same bits however its tokens are cut into steps, decode steps included
// (tests/split_prefill_test.cpp on the CPU, GpuDeltaNetPrefill.SplitsGiveTheBitsOfOneStep and
// the batch-invariant matmul and attention on the GPU): the recurrent state is stored as float32
// after every token, and every row's numbers are its own. So the state at any position p is that
// of a cold run of the same tokens, and a snapshot may sit anywhere: a prompt resumed at p and
// cut on its chunk grid from there (or at its own snapshot points) gives the cold run's bits.
//
// Where snapshots are taken, for a prompt of n tokens (the prefill is cut at each, so the
// sequence stands on it between steps):
//   - every `spacing` tokens (a prompt that shares a long prefix with another);
//   - `tail` tokens before its end: the next turn of a chat repeats a prompt up to about there,
//     and no further (the chat template's generation prompt, `<|im_start|>assistant\n` and a
//     `<think>` opener, is not what it renders for that turn in the history);
//   - at its end, with the logits after it (the same prompt again needs no prefill at all, and a
//     prompt that extends it resumes there);
//   - when its request ends (retire()): after the prompt and the answer's tokens that were fed,
//     so the next turn of a chat, which renders that answer into its history, resumes after it.
//
// What is kept per prompt (an entry): its tokens, the sequence whose KV rows hold them (the live
// sequence of the running request, parked here when the request retires: trimmed to the rows of
// the prompt and of the answer tokens retire() took in), and its snapshots. KV is paged
// (step/kv_blocks.h): the resuming sequence shares the full blocks of the prefix by reference
// count and copies only the partial last block (copy-on-write), so no KV is copied per request.
// Snapshots are immutable and shared by reference: a resumed prompt's entry holds the snapshots
// it resumed from, counted once.
//
// Memory: every snapshot and every parked sequence counts against one byte budget (a KV block
// held by several parked sequences counted once); entries are evicted least recently used first. An entry still held by a request (recording its prefill or
// its sequence decoding) is never evicted; a snapshot that does not fit after evicting what can
// be evicted is not taken.
//
// Not thread-safe: one thread (the engine's user) calls everything, between steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "step/cache_shape.h"
#include "step/device_memory.h"
#include "step/sequence_cache.h"

namespace memra {

// Typed from the MEMRA_PREFIX_* knobs (engine/options.cpp). Defaults are the knobs' defaults.
struct PrefixCacheOptions {
  int64_t budget_mb = 4096;  // MEMRA_PREFIX_CACHE_MB: snapshots + parked sequences; 0: no reuse
  int32_t spacing = 0;       // MEMRA_PREFIX_SPACING: tokens between snapshots; 0: the prefill chunk
  int32_t tail = 16;         // a snapshot this many tokens before a prompt's end (0: none)
  bool operator==(const PrefixCacheOptions&) const = default;
};

struct PrefixCacheStats {
  int64_t lookups = 0;        // resume() calls
  int64_t hits = 0;           // ... that reused at least one token
  int64_t reused_tokens = 0;  // prompt tokens not prefilled thanks to the cache
  int64_t evictions = 0;      // entries evicted for the budget
  int64_t skipped = 0;        // snapshots not taken: nothing evictable left to make room
  int64_t bytes = 0;          // snapshots + parked sequences now (a shared KV block once)
  int64_t budget_bytes = 0;
  int64_t entries = 0;
  int64_t snapshots = 0;
  int64_t kv_blocks = 0;      // distinct KV blocks held by parked sequences
};

class PrefixCache {
 public:
  struct Entry;
  struct Snapshot;

  // `chunk`: the engine's prefill chunk (the default spacing).
  PrefixCache(DeviceMemory& memory, const CacheShape& shape, int32_t chunk, const PrefixCacheOptions& options);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Resume {
    int32_t tokens = 0;          // prompt tokens now in the sequence (0: nothing reused)
    std::vector<float> logits;   // when tokens == the whole prompt: the logits after it
    std::shared_ptr<const Entry> source;
  };
  // Restores into `seq` (a fresh sequence) the longest reusable prefix of `prompt`: the KV rows
  // and the recurrent state at the best snapshot p <= the shared length, where p is short of the
  // whole prompt, or the whole prompt itself when it was seen with its logits.
  Resume resume(SequenceCache& seq, std::span<const int32_t> prompt);

  using Handle = std::shared_ptr<Entry>;
  // Starts recording the prefill of `prompt` into `seq` (resumed by `from`, or fresh): the entry
  // is found by later lookups as the prefill advances. Null when the whole prompt was a hit (its
  // entry exists already).
  Handle record(std::shared_ptr<SequenceCache> seq, std::span<const int32_t> prompt, const Resume& from);
  // Where the prefill of `h` must stop next for a snapshot: the next snapshot point after the
  // tokens already in, or the prompt's end. INT32_MAX for no handle (nothing recorded).
  int32_t next_stop(const Handle& h) const;
  // After each prefill step: takes a snapshot when the sequence stands on a snapshot point.
  void progress(const Handle& h);
  // The prompt is in: its final state and logits.
  void finish(const Handle& h, std::span<const float> logits);
  // The request of `h` ended normally and `seq` (the sequence recorded) holds `tokens`: the
  // prompt and the answer's tokens fed so far. A snapshot there, and the entry now covers them.
  // Nothing happens when `seq` is not the recorded one (another choice of n > 1).
  void retire(const Handle& h, const SequenceCache& seq, std::span<const int32_t> tokens);
  // The sequence's state is in doubt (a failed step): the entry is forgotten.
  void drop(const Handle& h);
  // Parks the sequences their requests released (trimmed to the prompt) and evicts down to the
  // budget. Call between steps.
  void maintain();

  PrefixCacheStats stats() const;
  int32_t chunk() const { return chunk_; }
  int32_t spacing() const { return spacing_; }
  // Bytes of one snapshot of this model (all Gated DeltaNet layers' conv windows and states).
  size_t snapshot_bytes() const { return snap_bytes_; }

 private:
  friend struct Snapshot;
  std::shared_ptr<Snapshot> take_snapshot(const SequenceCache& seq, const Entry* recording);
  void restore(SequenceCache& seq, const Snapshot& s) const;
  // Evicts least recently used evictable entries (never `keep`) until `need` more bytes fit.
  bool make_room(size_t need, const Entry* keep);
  // Counts a released sequence's state in bytes_ (its KV blocks once each), and back.
  void park(Entry& e);
  void unpark(Entry& e);

  DeviceMemory& memory_;
  const CacheShape shape_;
  const int32_t chunk_;
  int32_t spacing_ = 0;
  int32_t tail_ = 0;
  size_t snap_bytes_ = 0;
  int64_t budget_ = 0;
  int64_t bytes_ = 0;
  uint64_t clock_ = 0;
  std::list<std::shared_ptr<Entry>> entries_;
  std::unordered_map<const void*, int32_t> held_blocks_;  // KV block address -> parked holders
  PrefixCacheStats counters_;
};

}  // namespace memra
