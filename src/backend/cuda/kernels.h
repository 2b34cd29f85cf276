// Launchers of the CUDA kernels, one op per file (k_<op>.cu: kernel, then launcher, then the
// launch check). All take device pointers and run on `stream`; shapes are asserted on entry.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/device_step.h"

namespace memra::cuda {

// Model dimensions the kernels are built for (CudaBackend::unsupported refuses a model past them).
constexpr int kMaxConvKernel = 8;      // k_deltanet.cu: the convolution window held per channel
constexpr int kMaxExperts = 4096;      // k_moe.cu: routing
constexpr int kMaxExpertsUsed = 64;    // k_moe.cu: top-k per token

// ---- activations in the f16 form the matmuls consume (matmul_order.h) ----
// Row r of x, scaled by 2^-exps[r] and rounded to f16, in the tensor-core B-fragment order:
// frag[n8][kt][b][g][t] is 16 bytes = the 4 half2 pairs (p = 0..3) of elements
// kt*256 + 32b + 8p + 2t + {0, 1} of row 8*n8 + g. sums[n8][kt][g][t] is 8 bytes: the K-quants'
// min-term B fragment of lane (g, t) (matmul_order.h): the f16 hi and lo parts of s_b 2^-5 for
// blocks b = t and t + 4, where s_b is the float sum of the block's 32 f16 values in warp_sum's
// butterfly; 32 bytes a row and k-tile. frag_lo (same layout) holds the
// f16 rounding of what frag leaves out (x' - hi), which the float weight types also multiply, so
// their products see ~22 bits of each activation. Rows are padded with zeros to whole n-tiles of
// 8 and columns to whole k-tiles of 256.
struct F16Act {
  uint8_t* frag = nullptr;
  uint8_t* frag_lo = nullptr;
  uint8_t* sums = nullptr;
  int32_t* exps = nullptr;
  int64_t rows = 0, cols = 0, n_kt = 0;
};
// Bytes of each array for rows x cols (frag_lo: as frag).
size_t act_f16_frag_bytes(int64_t rows, int64_t cols);
size_t act_f16_sums_bytes(int64_t rows, int64_t cols);
void act_f16(const float* x, const F16Act& out, cudaStream_t stream);

// ---- matmul (k_matmul.cu) ----
struct DevWeight;
// One projection of a launch: out[r * out_stride + j] (+)= x[r, :] . W[mat][j, :].
struct MatmulTarget {
  const DevWeight* w;
  int64_t mat;
  float* out;
  int64_t out_stride;
  bool accumulate;
};
// Up to 4 projections of the same input in one launch (one weight type and width). Every result
// follows matmul_order.h whatever the number of rows or projections.
void matmul(const MatmulTarget* targets, int n, const F16Act& x, cudaStream_t stream);
// act[r, j] = silu(x . gate[j]) * (x . up[j]), the bits of two matmul() calls and silu_mul.
void matmul_swiglu(const DevWeight& gate, const DevWeight& up, const F16Act& x, float* act, cudaStream_t stream);
// A grouped launch's blocks, listed by moe_route: entry i (grid z = i) is slot z and row tile xt as
// xt * slots + z (slots = groups, + 1 with the shared slot), -1 past the last. The shared slot's
// tiles come first (its blocks have the most rows: launched first, they do not trail), then each
// used slot's, in slot order; empty slots have none.
struct GroupTiles {
  int32_t* tile = nullptr;
  int rows = 0;  // rows a block covers (grouped_tile_rows); 0: no list
  int capacity = 0;
};
// The entries a list needs for R-row tiles: each slot's tiles of its rows, where a used slot's last
// tile is its only partial one.
inline int64_t group_tiles_capacity(int64_t shared_rows, int64_t selections, int groups, int R) {
  return (shared_rows + R - 1) / R + (selections + R - 1) / R + groups;
}
// Rows of a grouped (mixture-of-experts) launch, device tables written by moe_route: group slot
// z uses matrix grp_expert[z] (-1: the launch's `shared` matrix, the shared expert) and the grouped
// rows grp_off[z] .. grp_off[z + 1] (empty past the used slots); grouped row i reads F16Act row
// act_row[i] (null: row i) and writes output row i.
struct GroupedRows {
  const int32_t* grp_off = nullptr;     // groups + 1
  const int32_t* grp_expert = nullptr;  // groups
  const int32_t* act_row = nullptr;
  int groups = 0;        // group slots (an upper bound on the groups used)
  int64_t max_rows = 0;  // an upper bound on the rows of one group
  // The launch's block list (written by moe_route; rows = grouped_tile_rows() of this launch), or
  // none (rows 0): a block for every slot and every tile of max_rows, most of them empty at B =
  // 32-64 and in prefill.
  GroupTiles list;
};
// Rows one block of matmul_grouped covers (8 times its shape's n-tiles): what a block list for
// that launch (GroupTiles::rows) must be built with.
int grouped_tile_rows(const DevWeight& w, bool swiglu, int groups, int64_t max_rows);
// out[i, j] = x[act_row[i], :] . W[grp_expert[z]][j, :] for each grouped row i of slot z; with
// `up`, out[i, j] = silu(that) * (x . up[grp_expert[z]][j, :]). The bits of matmul() on that row.
// `shared` / `shared_up`: the matrices of slot -1 (w's type and geometry), or null.
void matmul_grouped(const DevWeight& w, const DevWeight* up, const F16Act& x, const GroupedRows& g, float* out,
                    cudaStream_t stream, const DevWeight* shared = nullptr, const DevWeight* shared_up = nullptr);
// MEMRA_CUDA_PDL: programmatic dependent launch for every kernel launched through launch.cuh.
void set_pdl_enabled(bool on);
// MEMRA_CUDA_STREAM_PARTS: warps per unit of the one-row streaming matmul (0: k_matmul.cu's rule).
void set_stream_parts(int parts);

// ---- mixture of experts (k_moe.cu) ----
// Device buffers of one layer's routing: per row the k selected experts and their weights (rank
// order), each selection's grouped row, and the GroupedRows tables (groups = min(rows * k,
// n_expert) slots).
struct MoeRouting {
  int32_t* sel = nullptr;       // rows * k
  float* weight = nullptr;      // rows * k
  int32_t* pos = nullptr;       // rows * k
  int32_t* grp_off = nullptr;   // groups + 1
  int32_t* grp_expert = nullptr;  // groups
  int32_t* act_row = nullptr;   // rows * k (+ shared_rows)
  int groups = 0;
  // > 0 (= rows): one more slot, `groups`, for the shared expert (grp_expert -1) over grouped rows
  // rows * k .. rows * k + rows, row i reading row i (grp_off and grp_expert one entry longer).
  int64_t shared_rows = 0;
  GroupTiles tiles[2];  // the block lists of the gate+up and the down launches
};
// Per row: softmax over the router logits in float64, the top k (ties: the lowest expert id),
// weights renormalised to sum 1 when norm_topk; then the selections grouped by expert.
void moe_route(const float* logits, int64_t rows, int n_expert, int k, bool norm_topk, const MoeRouting& r,
               cudaStream_t stream);
// out[r, :] += sum over i in rank order of weight_i * y[pos_i, :] (a float fma chain), then
// + sigmoid(gate_logit[r]) * shared[r, :] (gate 1 without gate_logit; no term without shared).
void moe_combine(const float* y, const MoeRouting& r, int k, const float* shared, const float* gate_logit, float* out,
                 int64_t rows, int64_t hidden, cudaStream_t stream);

// ---- row-wise ----
void embed_rows(const DevWeight& table, const DeviceStep& step, int64_t n_rows, float* out, cudaStream_t stream);
// RMSNorm that also writes the f16 form of `out` (act_f16's bits): the norm that feeds a group of
// matmuls saves a launch and a pass.
void rms_norm_act(const float* x, const float* w, float* out, const F16Act& act, int64_t rows, int64_t dim, float eps,
                  cudaStream_t stream);
void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);
// out *= sigmoid(gate), per head.
void sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim, int64_t gate_row_stride,
                      int gate_head_stride, cudaStream_t stream);
void gather_rows(const float* x, const int32_t* src_rows_dev, int64_t n, int64_t cols, float* out, cudaStream_t stream);

// ---- full attention ----
// inv_freq: n_rot/2 floats (theta^(-2i/n_rot), computed on the host in double, rounded once).
void qk_norm_rope(float* q, float* k, const float* q_norm, const float* k_norm, const float* inv_freq,
                  const DeviceStep& step, int64_t n_rows, const AttnShape& s, float eps, cudaStream_t stream);
// qk_norm_rope, then kv_append of the k rows it made and of v: the same q, k and cache bytes in one
// launch.
void qk_norm_rope_append(int layer, float* q, float* k, const float* v, const float* q_norm, const float* k_norm,
                         const float* inv_freq, const DeviceStep& step, int64_t n_rows, const AttnShape& s, float eps,
                         GgmlType kv_type, cudaStream_t stream);
// Writes k, v (f32 rows) into each sequence's f16 cache of `layer` at the rows' positions.
void kv_append(int layer, const float* k, const float* v, const DeviceStep& step, int64_t n_rows, int kv_dim,
               GgmlType kv_type, cudaStream_t stream);
// Causal attention of q over each sequence's cache (positions 0..pos of the row). out: rows x
// n_head*head_dim. Keys of a sequence are split by a rule of that sequence's length only.
// `work` is scratch of attention_work_floats() floats.
int64_t attention_work_floats(const DeviceStep& host_step_shape, int64_t n_rows, const AttnShape& s);
// kv_type: F16, or Q8_0 for the 8-bit cache (kv_cache_q8.h; n_head_kv * head_dim % 64 == 0).
// tensor_cores (CudaOptions::attn_tc, on): the split step on the tensor cores where
// attention_tc_supported, the CUDA-core kernel elsewhere; either way one kernel for every row of a
// shape, prompt or decode, so a row's bits never depend on how its sequence was cut into steps.
// gate.x set: out[r, h*hd + i] *= sigmoid(gate.x[r*row_stride + h*head_stride + i]) as the rows are
// written (sigmoid_gate_mul's bits).
struct AttnOutGate {
  const float* x = nullptr;
  int64_t row_stride = 0;
  int head_stride = 0;
};
void attention(int layer, const float* q, const DeviceStep& step, int64_t n_rows, const AttnShape& s, GgmlType kv_type,
               bool tensor_cores, float* out, float* work, cudaStream_t stream, const AttnOutGate& gate = {});
// The split step on the tensor cores (k_attention_tc.cu): the partials attention()'s merge reads,
// for rows [row0, row0 + rows) of the step, in the order its file comment gives.
struct AttnTcLaunch {
  int layer;
  const float* q;
  const DeviceStep* step;
  const AttnShape* s;
  int64_t row0, rows;
  int max_splits;
  float* part_o;
  float* part_ml;
  cudaStream_t stream;
  bool kv_q8;  // the 8-bit cache (kv_cache_q8.h), else f16
};
bool attention_tc_supported(const AttnShape& s, GgmlType kv_type);
void attention_tc_split(const AttnTcLaunch& a);

// ---- Gated DeltaNet ----
void conv1d_silu(int layer, const float* x, const float* w, float* out, int channels, int kernel,
                 const DeviceStep& step, cudaStream_t stream);
// l2norm(q,k), gates, delta rule over each sequence's rows (in order), then the gated RMSNorm
// with z: y rows x n_v*d. Updates each sequence's state. A step with a sequence of at least
// kGdnPromptFormMinRows rows and head size 128 runs the prompt form (k_deltanet_prompt.cu: the same
// bits in three launches); `work` is then scratch of deltanet_work_floats() floats (else unused).
constexpr int kGdnPromptFormMinRows = 8;
int64_t deltanet_work_floats(const DeviceStep& host_step_shape, const GdnShape& s);
void deltanet_core(int layer, const float* conv_out, const float* z, const float* beta_raw, const float* alpha_raw,
                   const float* ssm_a, const float* dt_bias, const float* norm_w, float* y, const GdnShape& s,
                   float eps, const DeviceStep& step, float* work, cudaStream_t stream);

// ---- measurement ----
// Median bandwidth (bytes/s) of a read-only streaming kernel over `bytes` of device memory.
double measure_read_bandwidth(size_t bytes, int reps, cudaStream_t stream);

// ---- sampling ----
// out[r] = argmax of row r (lowest id on ties; NaN never wins). `work`: argmax_work_bytes().
size_t argmax_work_bytes(int64_t rows, int64_t n);
void argmax_rows(const float* logits, int64_t rows, int64_t n, int32_t* out, void* work, cudaStream_t stream);

}  // namespace memra::cuda
