#include "step/prefix_cache.h"

#include <algorithm>
#include <climits>

#include "common/error.h"

namespace memra {

// The recurrent state of every Gated DeltaNet layer at one position, in one device allocation
// (per layer: conv window, then delta-rule state), and for the end of a prompt its logits.
struct PrefixCache::Snapshot {
  PrefixCache* owner = nullptr;
  void* mem = nullptr;
  size_t bytes = 0;
  int32_t pos = 0;
  bool has_logits = false;
  std::vector<float> logits;
  Snapshot() = default;
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
  ~Snapshot() {
    if (mem) owner->memory_.free(mem);
    owner->bytes_ -= static_cast<int64_t>(bytes);
    --owner->counters_.snapshots;
  }
};

struct PrefixCache::Entry {
  std::vector<int32_t> tokens;           // the prompt
  std::shared_ptr<SequenceCache> seq;    // holds KV rows [0, valid) of the prompt
  int32_t valid = 0;                     // prompt tokens prefilled into seq so far
  std::vector<std::shared_ptr<Snapshot>> snaps;  // ascending positions
  uint64_t last_used = 0;
  bool parked = false;                   // seq released by its request, trimmed, counted in bytes_
  bool has_snapshot_at(int32_t pos) const {
    return std::any_of(snaps.begin(), snaps.end(), [&](const auto& s) { return s->pos == pos; });
  }
};

PrefixCache::PrefixCache(DeviceMemory& memory, const CacheShape& shape, int32_t chunk,
                         const PrefixCacheOptions& options)
    : memory_(memory), shape_(shape), chunk_(chunk) {
  if (chunk < 1) fail("the prefill chunk must be at least 1 token, got {}", chunk);
  if (options.budget_mb < 0) fail("MEMRA_PREFIX_CACHE_MB must be at least 0, got {}", options.budget_mb);
  if (options.spacing < 0) fail("MEMRA_PREFIX_SPACING must be at least 0, got {}", options.spacing);
  if (options.tail < 0) fail("the prefix cache's tail must be at least 0, got {}", options.tail);
  spacing_ = options.spacing == 0 ? chunk : options.spacing;
  tail_ = options.tail;
  budget_ = options.budget_mb << 20;
  snap_bytes_ = shape.recurrent_bytes();
}

PrefixCache::~PrefixCache() {
  for (const auto& e : entries_) unpark(*e);
  entries_.clear();
}

// A parked sequence counts its recurrent state, and each KV block it holds that no other parked
// sequence holds already: blocks shared by prefix (a prompt resumed from another, the choices of
// one request) are counted once. A parked sequence does not change until it is unparked.
void PrefixCache::park(Entry& e) {
  MEMRA_ASSERT(!e.parked);
  e.parked = true;
  const SequenceCache& seq = *e.seq;
  bytes_ += static_cast<int64_t>(seq.recurrent_bytes());
  const int64_t block_bytes = static_cast<int64_t>(seq.pool().block_bytes());
  for (const LayerCache& L : seq.layers)
    for (int32_t id : L.blocks)
      if (++held_blocks_[seq.pool().data(id)] == 1) bytes_ += block_bytes;
}

void PrefixCache::unpark(Entry& e) {
  if (!e.parked) return;
  e.parked = false;
  const SequenceCache& seq = *e.seq;
  bytes_ -= static_cast<int64_t>(seq.recurrent_bytes());
  const int64_t block_bytes = static_cast<int64_t>(seq.pool().block_bytes());
  for (const LayerCache& L : seq.layers) {
    for (int32_t id : L.blocks) {
      auto it = held_blocks_.find(seq.pool().data(id));
      MEMRA_ASSERT(it != held_blocks_.end() && it->second > 0, "prefix cache: KV block accounting");
      if (--it->second == 0) {
        held_blocks_.erase(it);
        bytes_ -= block_bytes;
      }
    }
  }
}

void PrefixCache::restore(SequenceCache& seq, const Snapshot& s) const {
  const size_t conv = shape_.conv_bytes(), ssm = shape_.ssm_bytes();
  const char* at = static_cast<const char*>(s.mem);
  for (size_t l = 0; l < seq.layers.size(); ++l) {
    if (shape_.layer_mixer[l] != MixerKind::GatedDeltaNet) continue;
    if (conv) memory_.copy(seq.layers[l].conv, at, conv);
    memory_.copy(seq.layers[l].ssm, at + conv, ssm);
    at += conv + ssm;
  }
}

std::shared_ptr<PrefixCache::Snapshot> PrefixCache::take_snapshot(const SequenceCache& seq, const Entry* recording) {
  if (!make_room(snap_bytes_, recording)) {
    ++counters_.skipped;
    return nullptr;
  }
  auto s = std::make_shared<Snapshot>();
  s->owner = this;
  s->pos = seq.pos();
  if (snap_bytes_) s->mem = memory_.alloc(snap_bytes_);
  s->bytes = snap_bytes_;
  bytes_ += static_cast<int64_t>(snap_bytes_);
  ++counters_.snapshots;
  const size_t conv = shape_.conv_bytes(), ssm = shape_.ssm_bytes();
  char* at = static_cast<char*>(s->mem);
  for (size_t l = 0; l < seq.layers.size(); ++l) {
    if (shape_.layer_mixer[l] != MixerKind::GatedDeltaNet) continue;
    if (conv) memory_.copy(at, seq.layers[l].conv, conv);
    memory_.copy(at + conv, seq.layers[l].ssm, ssm);
    at += conv + ssm;
  }
  return s;
}

PrefixCache::Resume PrefixCache::resume(SequenceCache& seq, std::span<const int32_t> prompt) {
  MEMRA_ASSERT(seq.pos() == 0, "resume into a sequence at position {}", seq.pos());
  ++counters_.lookups;
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());
  std::shared_ptr<Entry> best;
  const Snapshot* best_snap = nullptr;
  for (const auto& e : entries_) {
    const int32_t n = std::min<int32_t>(e->valid, n_prompt);
    int32_t lcp = 0;
    while (lcp < n && e->tokens[static_cast<size_t>(lcp)] == prompt[static_cast<size_t>(lcp)]) ++lcp;
    for (auto it = e->snaps.rbegin(); it != e->snaps.rend(); ++it) {
      const Snapshot& s = **it;
      if (s.pos > lcp || s.pos == 0) continue;
      // Any point short of the prompt (the state there is a cold run's, however it was cut), or
      // the whole prompt with its logits (nothing left to feed).
      const bool usable = s.pos < n_prompt || (s.pos == n_prompt && s.has_logits);
      if (!usable) continue;
      if (!best_snap || s.pos > best_snap->pos || (s.pos == best_snap->pos && e->last_used > best->last_used)) {
        best = e;
        best_snap = &s;
      }
      break;
    }
  }
  Resume r;
  if (!best) return r;
  const int32_t p = best_snap->pos;
  // The prefix's full KV blocks are shared with the entry's sequence, its partial last block
  // copied (kv_blocks.h); the sequence stands at p and grows by blocks of its own.
  seq.share_kv_prefix_from(*best->seq, p);
  restore(seq, *best_snap);
  seq.reserve(n_prompt);
  if (best_snap->has_logits && p == n_prompt) r.logits = best_snap->logits;
  r.tokens = p;
  r.source = best;
  best->last_used = ++clock_;
  ++counters_.hits;
  counters_.reused_tokens += p;
  return r;
}

PrefixCache::Handle PrefixCache::record(std::shared_ptr<SequenceCache> seq, std::span<const int32_t> prompt,
                                        const Resume& from) {
  if (from.tokens == static_cast<int32_t>(prompt.size())) return nullptr;
  MEMRA_ASSERT(seq->pos() == from.tokens, "recording a sequence at {} resumed at {}", seq->pos(), from.tokens);
  auto e = std::make_shared<Entry>();
  e->tokens.assign(prompt.begin(), prompt.end());
  e->seq = std::move(seq);
  e->valid = from.tokens;
  e->last_used = ++clock_;
  // The snapshots it resumed through are its own too (shared, counted once).
  if (from.source)
    for (const auto& s : from.source->snaps)
      if (s->pos <= from.tokens) e->snaps.push_back(s);
  entries_.push_back(e);
  return e;
}

namespace {

// Whether a prompt of n tokens takes a snapshot at pos (0 < pos < n).
bool snapshot_point(int32_t pos, int32_t n, int32_t spacing, int32_t tail) {
  return pos % spacing == 0 || (tail > 0 && pos == n - tail);
}

}  // namespace

int32_t PrefixCache::next_stop(const Handle& h) const {
  if (!h) return INT32_MAX;
  const int32_t pos = h->valid, n = static_cast<int32_t>(h->tokens.size());
  int32_t stop = std::min(n, (pos / spacing_ + 1) * spacing_);
  if (tail_ > 0 && n - tail_ > pos) stop = std::min(stop, n - tail_);
  return stop;
}

void PrefixCache::progress(const Handle& h) {
  if (!h) return;
  Entry& e = *h;
  e.valid = e.seq->pos();
  const int32_t pos = e.valid, n = static_cast<int32_t>(e.tokens.size());
  if (pos >= n || !snapshot_point(pos, n, spacing_, tail_) || e.has_snapshot_at(pos)) return;
  if (auto s = take_snapshot(*e.seq, &e)) e.snaps.push_back(std::move(s));
  e.last_used = ++clock_;
}

void PrefixCache::retire(const Handle& h, const SequenceCache& seq, std::span<const int32_t> tokens) {
  if (!h || h->seq.get() != &seq) return;
  Entry& e = *h;
  const int32_t pos = seq.pos();
  MEMRA_ASSERT(pos == static_cast<int32_t>(tokens.size()) && e.valid == static_cast<int32_t>(e.tokens.size()) &&
                   pos >= e.valid && std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin()),
               "prefix cache: retire at {} with {} tokens, recorded {} of {}", pos, tokens.size(), e.valid,
               e.tokens.size());
  if (pos == e.valid) return;
  // The answer's tokens went in one decode step each: the same bits as a prefill of them.
  auto s = take_snapshot(seq, &e);
  if (!s) return;
  e.snaps.push_back(std::move(s));
  e.tokens.assign(tokens.begin(), tokens.end());
  e.valid = pos;
  e.last_used = ++clock_;
}

void PrefixCache::finish(const Handle& h, std::span<const float> logits) {
  if (!h) return;
  Entry& e = *h;
  e.valid = e.seq->pos();
  MEMRA_ASSERT(e.valid == static_cast<int32_t>(e.tokens.size()), "prefix cache: finish at {} of {}", e.valid,
               e.tokens.size());
  if (auto s = take_snapshot(*e.seq, &e)) {
    s->has_logits = true;
    s->logits.assign(logits.begin(), logits.end());
    e.snaps.push_back(std::move(s));
  }
  e.last_used = ++clock_;
}

void PrefixCache::drop(const Handle& h) {
  if (!h) return;
  unpark(*h);
  std::erase(entries_, h);
}

bool PrefixCache::make_room(size_t need, const Entry* keep) {
  while (bytes_ + static_cast<int64_t>(need) > budget_) {
    std::shared_ptr<Entry> victim;
    for (const auto& e : entries_) {
      // Held by a request (recording, or its sequence still decoding): never evicted.
      const bool held = e.use_count() > 1 || (e->seq && e->seq.use_count() > 1);
      if (held || e.get() == keep) continue;
      if (!victim || e->last_used < victim->last_used) victim = e;
    }
    if (!victim) return false;
    unpark(*victim);
    std::erase(entries_, victim);
    ++counters_.evictions;
  }
  return true;
}

void PrefixCache::maintain() {
  for (const auto& e : entries_) {
    if (e->parked || !e->seq || e->seq.use_count() > 1) continue;
    // Its request let go of the sequence: keep the prompt's KV rows only.
    e->seq->shrink_kv(e->valid);
    park(*e);
  }
  make_room(0, nullptr);
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = counters_;
  s.bytes = bytes_;
  s.budget_bytes = budget_;
  s.entries = static_cast<int64_t>(entries_.size());
  s.kv_blocks = static_cast<int64_t>(held_blocks_.size());
  return s;
}

}  // namespace memra
