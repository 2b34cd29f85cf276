// The op interface the model code is written against, once, for every backend.
//
// The CPU backend (backend/cpu) is the executable specification: float32 storage, float64
// accumulation, obviously correct. The CUDA backend implements the same ops fast; every CUDA op
// is tested against the CPU op.
//
// Conventions:
// - Activations are float32 row-major matrices living in backend memory: `rows` x `cols`,
//   row stride = cols unless an op says otherwise.
// - A forward call is described by a StepPlan (step_plan.h): which sequences take part, their
//   rows and positions. set_step() hands the plan to the backend before the ops of a step run;
//   per-sequence ops (KV append, attention, conv, delta rule) read it to find each sequence's
//   rows and caches.
// - Exactness: every op computes each output row from that row's inputs (and its own sequence's
//   caches) in a fixed order that does not depend on how many rows or sequences the step has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/options.h"
#include "common/ggml_type.h"
#include "step/device_memory.h"

namespace memra {

struct StepPlan;
struct RowSampling;

// A weight matrix (or a stack of n_mat matrices, for MoE experts) in backend memory, in GGUF's
// layout: n_out rows of n_in elements of `type`; matrix e starts at data + e * mat_bytes.
struct WeightRef {
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0;   // ggml ne[0]
  int64_t n_out = 0;  // ggml ne[1]
  int64_t n_mat = 1;  // ggml ne[2]
  const void* data = nullptr;
  size_t row_bytes = 0;
  size_t mat_bytes = 0;
  std::string name;
  bool valid() const { return data != nullptr; }
};

// A float32 vector in backend memory (norm weights, ssm_a, dt bias, conv taps, ...).
struct VecRef {
  const float* data = nullptr;
  int64_t n = 0;
  bool valid() const { return data != nullptr; }
};

// Which key head a Gated DeltaNet value head reads (MATH.md): qwen35* tile value heads over key
// heads (h % n_k); qwen3next groups them (h / (n_v / n_k)).
enum class GdnHeadMap : uint8_t { Tiled, Grouped };
// Where beta and alpha come from: two separate projections (qwen35*), or one fused `ssm_ba`
// projection laid out per key-head group as [b(g, 0..r-1), a(g, 0..r-1)] (qwen3next).
enum class GdnGateLayout : uint8_t { Separate, GroupedBA };

struct GdnShape {
  int n_k = 0;       // key heads
  int n_v = 0;       // value heads
  int d = 0;         // head size (keys and values)
  int conv_kernel = 0;
  GdnHeadMap head_map = GdnHeadMap::Tiled;
  GdnGateLayout gate_layout = GdnGateLayout::Separate;
  int conv_channels() const { return 2 * n_k * d + n_v * d; }
};

struct AttnShape {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_rot = 0;           // rotated dims per head (NeoX pairing i, i + n_rot/2)
  float rope_theta = 0;
  int q_head_stride = 0;   // floats between consecutive query heads in a row (2*hd when gated)
};

struct MoeWeights {
  WeightRef router;        // [H -> n_expert]
  WeightRef gate_exps, up_exps, down_exps;  // n_expert matrices each
  int n_expert = 0;
  int n_used = 0;
  bool norm_topk = true;   // renormalise the top-k weights to sum 1
  // shared expert (optional)
  WeightRef gate_shexp, up_shexp, down_shexp;
  WeightRef shexp_gate;    // [H -> 1], sigmoid gate; optional
};

// What a matmul reads: float rows, and optionally the token rms_norm returned when it wrote them
// (the reuse of the backend's matmul form is asked for here, never inferred from an address).
// A token that is not the latest norm's, or names other rows, is an internal error.
struct MatmulInput {
  const float* x = nullptr;
  uint64_t norm_token = 0;  // 0: convert x
  MatmulInput(const float* rows) : x(rows) {}  // NOLINT: a bare pointer is an input to convert
  MatmulInput(const float* rows, uint64_t token) : x(rows), norm_token(token) {}
};

// The dimensions of a model that a backend's kernels may be built for (0: the model has no such
// layers).
struct ModelDims {
  int attention_head_dim = 0;
  int deltanet_head_dim = 0;
  int conv_kernel = 0;  // the Gated DeltaNet's short convolution
  int n_expert = 0, n_expert_used = 0;
};

class Backend : public DeviceMemory {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual bool is_cpu() const = 0;

  // ---- memory ----
  // alloc, free, copy, zero and to_device: see DeviceMemory (step/device_memory.h).
  // Weight bytes from the (mmapped) file. The CPU backend may return `host` itself (zero copy).
  virtual const void* upload_weight(const void* host, size_t bytes) = 0;
  // A weight matrix (geometry already set in w): sets w.data. Backends may store their own
  // layout (the CUDA backend repacks blocks for aligned loads); only their ops read it.
  virtual void upload_matrix(WeightRef& w, const void* host) {
    w.data = upload_weight(host, w.mat_bytes * static_cast<size_t>(w.n_mat));
  }
  // Bytes a matrix of this file type and shape takes once uploaded: its file bytes unless the
  // backend re-lays it out (the CUDA backend pads row groups and widens some types to f16).
  virtual size_t matrix_device_bytes(GgmlType type, int64_t n_in, int64_t n_out, int64_t n_mat) const;
  // Fails with a message naming `what`, the bytes needed and the bytes free when `bytes` more
  // cannot be allocated (before a long upload, so a model that does not fit says so at once).
  // Backends that compute in host memory check nothing: the OS maps the file lazily.
  virtual void check_fits(uint64_t bytes, const std::string& what) { (void)bytes, (void)what; }
  virtual void to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Scratch floats for the current step; freed all at once by reset_scratch(), or back to a
  // mark (everything allocated after scratch_mark() is released by scratch_release()).
  virtual float* scratch(size_t n_floats) = 0;
  virtual void reset_scratch() = 0;
  virtual size_t scratch_mark() const = 0;
  virtual void scratch_release(size_t mark) = 0;
  // Streaming-read bandwidth of this device in bytes/s, measured with a read-only kernel (the
  // denominator of the bandwidth floor); 0 where not meaningful (CPU).
  virtual double measure_read_bandwidth() { return 0.0; }
  // Why this backend cannot run a model of these dimensions ("" when it can). Checked when a model
  // loads, so a model the kernels do not cover is an error message rather than an assertion in
  // the middle of a step.
  virtual std::string unsupported(const ModelDims& dims) const {
    (void)dims;
    return {};
  }
  // KV cache element type this backend stores (F32 on the CPU, F16 on CUDA by default).
  virtual GgmlType kv_type() const = 0;

  // ---- graphs ----
  // A step whose launches depend only on `key` may be recorded once and replayed. graph_begin
  // returns true when a recorded step was launched (the caller skips its ops); otherwise the
  // caller issues its ops and then calls graph_end(). Backends without graphs do nothing.
  virtual bool graph_begin(uint64_t key) {
    (void)key;
    return false;
  }
  virtual void graph_end() {}

  // ---- step ----
  // Also checks (always) that the step writes KV rows only into blocks each sequence owns alone
  // (step/kv_blocks.h): recorded graphs replay through here too.
  void set_step(const StepPlan& plan);
  const StepPlan& plan() const { return *plan_; }

  // ---- row-wise ops ----
  // out[r] = row tokens[r] of `table` (dequantized), for the plan's rows.
  virtual void embed(const WeightRef& table, float* out) = 0;
  // out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w. Returns a token for `out` that the matmuls
  // reading it may be handed (MatmulInput): the backend may then reuse the matmul form it wrote
  // beside `out` (the CUDA backend writes f16 rows with a row scale) instead of converting again.
  // The token is good until the next rms_norm; 0 means the backend keeps no such form. `out`
  // may not overlap `x`.
  virtual uint64_t rms_norm(const float* x, const VecRef& w, float* out, int64_t rows, int64_t dim, float eps) = 0;
  // out[r, j] = sum_i x[r, i] * W[mat][j, i]   (x: rows x n_in, out: rows x n_out).
  // accumulate: out[r, j] += that sum (the residual add fused into the projection; numerically
  // the same single float add as add()).
  virtual void matmul(const WeightRef& w, MatmulInput x, float* out, int64_t rows, int64_t mat = 0,
                      bool accumulate = false) = 0;
  // Several projections of the same input (e.g. q, k, v): backends may share one pass over x
  // (one activation quantization, one launch). Same results as separate matmul() calls.
  struct MatmulOut {
    const WeightRef* w;
    float* out;
    bool accumulate = false;
  };
  virtual void matmul_multi(MatmulInput x, int64_t rows, const MatmulOut* outs, int n_outs) {
    for (int i = 0; i < n_outs; ++i) matmul(*outs[i].w, x, outs[i].out, rows, 0, outs[i].accumulate);
  }
  // act = silu(x W_gate^T) * (x W_up^T): the SwiGLU input half, act is rows x n_ff.
  virtual void swiglu(const WeightRef& gate, const WeightRef& up, MatmulInput x, float* act, int64_t rows);
  // out = silu(gate) * up (elementwise, n floats)
  virtual void silu_mul(const float* gate, const float* up, float* out, int64_t n) = 0;
  // Copies row src_rows[i] of x (cols wide) to row i of out. src_rows in host memory.
  virtual void gather_rows(const float* x, const int32_t* src_rows, int64_t n, int64_t cols, float* out) = 0;

  // ---- full attention ----
  // In place on the plan's rows: per-head RMSNorm of q (n_head heads at q_head_stride) and k
  // (n_head_kv heads, contiguous), then NeoX rope over the first n_rot dims at each row's position.
  virtual void qk_norm_rope(float* q, float* k, const VecRef& q_norm, const VecRef& k_norm,
                            const AttnShape& s, float eps) = 0;
  // Appends k, v (rows x n_head_kv*head_dim) to each sequence's layer-`layer` KV cache at the rows'
  // positions, then causal attention of q over the sequence's cache (positions 0..pos).
  // out: rows x n_head*head_dim.
  virtual void attention(int layer, const float* q, const float* k, const float* v, float* out,
                         const AttnShape& s) = 0;
  // out[r, h*hd + i] *= sigmoid(gate[r*gate_row_stride + h*gate_head_stride + i])
  virtual void sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim,
                                int64_t gate_row_stride, int gate_head_stride) = 0;
  // A gated attention's output gate, in sigmoid_gate_mul's terms (x null: no gate).
  struct AttnGate {
    const float* x = nullptr;
    int64_t row_stride = 0;
    int head_stride = 0;
  };
  // The attention mixer between its projections, on the plan's rows: qk_norm_rope(q, k), attention()
  // (k and v appended to the layer's cache), then sigmoid_gate_mul(out, gate) when gate.x is set.
  // Backends may fuse the pieces; q, k, out and the cache are then the pieces' bit for bit.
  virtual void attention_block(int layer, float* q, float* k, const float* v, const VecRef& q_norm,
                               const VecRef& k_norm, float eps, const AttnGate& gate, float* out, const AttnShape& s);

  // ---- Gated DeltaNet ----
  // Causal depthwise conv (kernel taps w[ch*K + j]) over each sequence's rows with its conv state
  // (last K-1 inputs), then SiLU. Updates the state. x, out: rows x channels.
  virtual void conv1d_silu(int layer, const float* x, const VecRef& w, float* out, int channels, int kernel) = 0;
  // The DeltaNet core for the plan's rows: conv1d_silu over `mixed` (q | k | v channels), then per
  // value head: l2norm(q, k) (q scaled by 1/sqrt(d)), beta = sigmoid(b), g = ssm_a*softplus(a + dt_bias),
  // the delta rule on the sequence's state, and the gated RMSNorm
  // y[r, h*d + i] = rms_norm(o[r, h, :])[i] * norm_w[i] * silu(z[r, h*d + i]).  y: rows x n_v*d.
  // beta_raw / alpha_raw follow s.gate_layout. Updates each sequence's conv and recurrent state.
  virtual void deltanet(int layer, const float* mixed, const float* z, const float* beta_raw, const float* alpha_raw,
                        const VecRef& conv_w, const VecRef& ssm_a, const VecRef& dt_bias, const VecRef& norm_w,
                        float* y, const GdnShape& s, float eps) = 0;

  // ---- sampling ----
  // Greedy token of each row (lowest id on ties, NaN never wins); results to host memory.
  virtual void argmax(const float* logits, int64_t rows, int64_t n, int32_t* out_host);
  // Samples one token per row with step/sampling.h's semantics (bias, penalties, mask, greedy
  // or filtered Gumbel-max keyed by (seed, token_index)), bit-identical to sample_token() on the
  // same logits. Only the ids come back (lean logits); `logits` is left unmodified, so a masked
  // row keeps its pristine values for whoever reads them later. Default: row download + host.
  virtual void sample(const float* logits, int64_t rows, int64_t n, const RowSampling* per_row, int32_t* out_host);

  // ---- mixture of experts ----
  // out += routed experts (softmax router, top-k, optional renorm) + sigmoid-gated shared expert.
  virtual void moe_ffn(const MoeWeights& m, MatmulInput x, float* out, int64_t rows, int64_t hidden) = 0;

 protected:
  // Called by set_step(): backends upload what their kernels need (device step tables).
  virtual void on_step(const StepPlan& plan) { (void)plan; }
  const StepPlan* plan_ = nullptr;
};

// The CPU reference backend.
std::unique_ptr<Backend> make_cpu_backend(const CpuOptions& options = {});

}  // namespace memra
