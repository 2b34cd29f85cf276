// The device-side view of a StepPlan, uploaded once per step by CudaBackend::on_step (one copy
// from a pinned staging buffer). Kernels read rows, positions and each sequence's cache pointers
// from here, so a captured CUDA graph replays for any plan of the same shape.
#pragma once

#include <cstddef>
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
  // A recorded graph's kernels hold the DeviceStep of the step that recorded it (CudaBackend
  // checks the equality at every replay).
  bool operator==(const DeviceStep&) const = default;
};

// Where CudaBackend::on_step puts the parts of a step's upload (bytes from its start): the int32
// tables (tokens, positions, row_seq: n_rows each; seq_row0, seq_n_rows, seq_pos0: n_seqs each;
// a mixed step's attn_item_off: n_seqs + 1), the three pointer tables (kv_blocks, conv, ssm:
// n_layers x n_seqs each) from ptr_off, then a mixed step's attn_items from items_off. Every
// offset but the total depends on the step's shape alone (rows, sequences, layers, the mixed bit),
// which the engine's graph key fixes, never on the list's length (its entries change with the
// sequences' depths): a recorded graph's kernels read the tables where the next step's upload
// puts them.
struct StepUploadLayout {
  size_t ptr_off = 0;
  size_t items_off = 0;
  size_t total = 0;
};
inline StepUploadLayout step_upload_layout(size_t n_rows, size_t n_seqs, size_t n_layers, bool mixed, size_t n_items) {
  StepUploadLayout l;
  const size_t n_ints = 3 * n_rows + 3 * n_seqs + (mixed ? n_seqs + 1 : 0);
  l.ptr_off = (n_ints * sizeof(int32_t) + 15) / 16 * 16;
  l.items_off = l.ptr_off + 3 * n_layers * n_seqs * sizeof(void*);
  l.total = l.items_off + (mixed ? n_items : 0) * sizeof(int32_t);
  return l;
}

}  // namespace memra::cuda
