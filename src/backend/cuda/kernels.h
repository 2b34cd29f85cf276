// Launchers of the CUDA kernels, one op per file (k_<op>.cu: kernel, then launcher, then the
// launch check). All take device pointers and run on `stream`; shapes are asserted on entry.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/device_step.h"

namespace memra::cuda {

// ---- activations in the 8-bit form the quantized matmuls consume ----
// Per 32-element block of a row: int8 q[32], float d (scale), int32 s (sum of q). x = d * q.
// Blocks are stored in slots (matmul_order.h): block b of a row at slot slot_of_block(b, cols/32).
struct Q8Act {
  int8_t* q = nullptr;    // rows x slots x 32
  float* d = nullptr;     // rows x slots
  int32_t* s = nullptr;   // rows x slots
  int64_t rows = 0, cols = 0;
  int64_t slots = 0;      // n_slots(cols / 32)
};
// cols must be a multiple of 32. Slots beyond the row's blocks are not written.
void quantize_q8(const float* x, const Q8Act& out, cudaStream_t stream);

// ---- matmul ----
// Device layout of a weight (weight_layout.h) is the backend's repacked form.
struct DevWeight;
// out[r, j] (+)= x[r, :] . W[mat][j, :] for r < rows, in the canonical reduction order
// (matmul_order.h), so a row's result never depends on `rows`.
void matmul_q8(const DevWeight& w, int64_t mat, const Q8Act& x, float* out, int64_t out_stride, bool accumulate,
               cudaStream_t stream, int splitk = 0);
// The same bits on the int8 tensor cores (k_matmul_mma.cu); matmul_q8 uses it for many rows.
void matmul_q8_mma(const DevWeight& w, int64_t mat, const Q8Act& x, float* out, int64_t out_stride, bool accumulate,
                   cudaStream_t stream);
// Whether 16+ activation rows go to the tensor-core kernel (identical bits either way).
void set_mma_enabled(bool on);
// MEMRA_CUDA_PDL: programmatic dependent launch for every kernel launched through launch.cuh.
void set_pdl_enabled(bool on);
// Up to 4 projections of the same input in one launch; all weights of one device type and n_in.
struct MatmulTarget {
  const DevWeight* w;
  int64_t mat;
  float* out;
  int64_t out_stride;
  bool accumulate;
};
void matmul_q8_multi(const MatmulTarget* targets, int n, const Q8Act& x, cudaStream_t stream, int splitk = 0);
// act = silu(x . gate) * (x . up), bit-identical to two matmul_q8 calls and silu_mul. With act_q8
// (x.rows x gate.n_out, n_out % 32 == 0) act is also quantized there (quantize_q8's bits);
// counters: x.rows * n_out / 32 zeros, left at zero.
void matmul_q8_swiglu(const DevWeight& gate, const DevWeight& up, const Q8Act& x, float* act, const Q8Act* act_q8,
                      unsigned* counters, cudaStream_t stream, int splitk = 0);
// Kernel argument of the GEMV launches (k_matmul_q8.cu).
struct GemvJob {
  int n = 0;
  const uint8_t* mat[4] = {};
  float* out[4] = {};
  int64_t out_stride[4] = {};
  int64_t row_begin[5] = {};
  bool accumulate[4] = {};
  // SwiGLU launches: the 8-bit form of out[0] when q8.q is set (k_matmul_q8.cu), and the
  // per-(row pass, 32-row block) counters of warps done.
  Q8Act q8;
  unsigned* q8_count = nullptr;
  bool prefetch_l2 = false;  // pull the next work items into L2 before the PDL wait
};
// The inexact comparison tier (k_matmul_q8_splitk.cu): splitk = 2 or 4 warps per output row
// (MEMRA_CUDA_SPLITK) for launches below the tensor-core threshold; 0 keeps the exact GEMV.
void matmul_q8_splitk(const DevWeight& w, const GemvJob& job, const Q8Act& x, bool swiglu, int splitk,
                      cudaStream_t stream);
void matmul_f(const DevWeight& w, int64_t mat, const float* x, int64_t rows, float* out, int64_t out_stride,
              bool accumulate, cudaStream_t stream);

// ---- row-wise ----
void embed_rows(const DevWeight& table, const DeviceStep& step, int64_t n_rows, float* out, cudaStream_t stream);
void rms_norm(const float* x, const float* w, float* out, int64_t rows, int64_t dim, float eps, cudaStream_t stream);
// rms_norm, also writing the 8-bit form of `out` (bit-identical to quantize_q8(out)): the norm
// that feeds a group of quantized matmuls saves a launch and a pass. dim % 32 == 0.
void rms_norm_q8(const float* x, const float* w, float* out, const Q8Act& q, int64_t rows, int64_t dim, float eps,
                 cudaStream_t stream);
void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);
// silu_mul of rows x cols (cols % 32 == 0) that also writes the 8-bit form of out into q8.
void silu_mul_q8(const float* gate, const float* up, float* out, int64_t rows, int64_t cols, const Q8Act& q8,
                 cudaStream_t stream);
// out *= sigmoid(gate), per head; with q8_out (rows x n_head*head_dim, a multiple of 32) the
// result is also quantized there, the bits quantize_q8 would give.
void sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim, int64_t gate_row_stride,
                      int gate_head_stride, const Q8Act* q8_out, cudaStream_t stream);
void gather_rows(const float* x, const int32_t* src_rows_dev, int64_t n, int64_t cols, float* out, cudaStream_t stream);

// ---- full attention ----
// inv_freq: n_rot/2 floats (theta^(-2i/n_rot), computed on the host in double, rounded once).
void qk_norm_rope(float* q, float* k, const float* q_norm, const float* k_norm, const float* inv_freq,
                  const DeviceStep& step, int64_t n_rows, const AttnShape& s, float eps, cudaStream_t stream);
// Writes k, v (f32 rows) into each sequence's f16 cache of `layer` at the rows' positions.
void kv_append(int layer, const float* k, const float* v, const DeviceStep& step, int64_t n_rows, int kv_dim,
               GgmlType kv_type, cudaStream_t stream);
// Causal attention of q over each sequence's cache (positions 0..pos of the row). out: rows x
// n_head*head_dim. Keys of a sequence are split by a rule of that sequence's length only.
// `work` is scratch of attention_work_floats() floats.
int64_t attention_work_floats(const DeviceStep& host_step_shape, int64_t n_rows, const AttnShape& s);
// kv_type: F16, or Q8_0 for the 8-bit cache (kv_cache_q8.h; n_head_kv * head_dim % 64 == 0).
void attention(int layer, const float* q, const DeviceStep& step, int64_t n_rows, const AttnShape& s, GgmlType kv_type,
               float* out, float* work, cudaStream_t stream);

// ---- Gated DeltaNet ----
void conv1d_silu(int layer, const float* x, const float* w, float* out, int channels, int kernel,
                 const DeviceStep& step, cudaStream_t stream);
// l2norm(q,k), gates, delta rule over each sequence's rows (in order), then the gated RMSNorm
// with z: y rows x n_v*d (and, with y_q8, its 8-bit form: quantize_q8's bits). Updates each
// sequence's state. chunked_prompts (MEMRA_CUDA_GDN_CHUNKED): sequences with 2+ rows in the step
// go through the chunked form (k_deltanet_chunked.cu) where it is built for the head size;
// single rows (decode) always take the recurrent kernel.
void deltanet_core(int layer, const float* conv_out, const float* z, const float* beta_raw, const float* alpha_raw,
                   const float* ssm_a, const float* dt_bias, const float* norm_w, float* y, const GdnShape& s,
                   float eps, const Q8Act* y_q8, bool chunked_prompts, const DeviceStep& step, cudaStream_t stream);

// ---- measurement ----
// Median bandwidth (bytes/s) of a read-only streaming kernel over `bytes` of device memory.
double measure_read_bandwidth(size_t bytes, int reps, cudaStream_t stream);

// ---- sampling ----
// out[r] = argmax of row r (lowest id on ties; NaN never wins). `work`: argmax_work_bytes().
size_t argmax_work_bytes(int64_t rows, int64_t n);
void argmax_rows(const float* logits, int64_t rows, int64_t n, int32_t* out, void* work, cudaStream_t stream);

}  // namespace memra::cuda
