// The device-side view of a StepPlan, uploaded once per step by CudaBackend::on_step (one copy
// from a pinned staging buffer). Kernels read rows, positions and each sequence's cache pointers
// from here, so a captured CUDA graph replays for any plan of the same shape.
#pragma once

#include <cstdint>

namespace memra::cuda {

struct DeviceStep {
  int32_t n_rows = 0;
  int32_t n_seqs = 0;
  int32_t max_seq_rows = 0;  // largest n_rows of one sequence (1 in decode)
  int32_t max_kv_len = 0;    // largest pos0 + n_rows (keys a query may see)
  // per row
  const int32_t* tokens = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* row_seq = nullptr;   // sequence index of each row
  // per sequence
  const int32_t* seq_row0 = nullptr;
  const int32_t* seq_n_rows = nullptr;
  const int32_t* seq_pos0 = nullptr;
  // per (layer, sequence): index layer * n_seqs + s. Null where the layer has no such cache.
  // The sequence's KV block table for the layer (step/kv_blocks.h): block b's base address, its
  // kKvBlock K rows then its kKvBlock V rows (f16, or 8-bit: kv_cache_q8.h); position t is row
  // t % kKvBlock of block t / kKvBlock. Owned by the SequenceCache, uploaded when it changes.
  uint8_t* const* const* kv_blocks = nullptr;
  float* const* conv = nullptr;  // [kernel-1][channels], oldest first
  void* const* ssm = nullptr;    // [n_v][d_k][d_v], float32 or bf16 (ssm_bf16)
  // The recurrent states' element type (CacheShape::ssm_type), the same for every sequence of an
  // engine: the launches pick their kernels by it on the host.
  bool ssm_bf16 = false;
  // Mixed-depth decode steps (StepPlan::mixed_depths): the split attention's work list. Sequence
  // s's splits are entries attn_item_off[s] .. attn_item_off[s + 1] of attn_items, each
  // s * 65536 + split. Null otherwise (every sequence x max_kv_len's splits).
  const int32_t* attn_items = nullptr;
  const int32_t* attn_item_off = nullptr;
};

}  // namespace memra::cuda
