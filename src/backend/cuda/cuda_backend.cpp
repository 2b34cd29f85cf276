// CudaBackend: memory, weights, the per-step device tables, and the wiring of Backend ops to
// kernel launchers (kernels.h).
#include "backend/cuda/cuda_backend_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_cache_q8.h"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/weight_layout.h"
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "step/sequence_cache.h"
#include "quant/quant.h"
#include "step/kv_blocks.h"
#include "step/step_plan.h"

namespace memra {

bool cuda_device_available() { return cuda_unavailable_reason().empty(); }

bool cuda_backend_emulated() {
#ifdef MEMRA_CUDASIM
  return true;
#else
  return false;
#endif
}

std::string cuda_unavailable_reason() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are not confused
    return fmt::format("CUDA runtime: {}", cudaGetErrorString(err));
  }
  if (count == 0) return "no CUDA device";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "cannot query CUDA device 0";
  if (prop.major < 9)
    return fmt::format("device 0 ({}) has compute capability {}.{}; memra's kernels are built for 9.0 (Hopper)",
                       prop.name, prop.major, prop.minor);
  return "";
}

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options) {
  return std::make_unique<cuda::CudaBackend>(options);
}

namespace cuda {

namespace {
constexpr size_t kAlign = 256;
}  // namespace

CudaBackend::CudaBackend(const CudaOptions& options) {
  CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  device_name_ = prop.name;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  arena_size_ = static_cast<size_t>(options.scratch_mb) << 20;
  void* p = nullptr;
  if (cudaMalloc(&p, arena_size_) != cudaSuccess)
    fail("CUDA: cannot allocate the {} MiB scratch arena (lower MEMRA_CUDA_SCRATCH_MB)", arena_size_ >> 20);
  arena_ = static_cast<uint8_t*>(p);
  graphs_enabled_ = options.graphs;
  pdl_option_ = options.pdl;
  set_pdl_enabled(options.pdl);
  set_stream_parts(options.stream_parts);
  kv_type_ = options.kv_type;
  attn_tc_ = options.attn_tc;
  if (kv_type_ != GgmlType::F16 && kv_type_ != GgmlType::Q8_0)
    fail("MEMRA_CUDA_KV={} is not a CUDA KV cache type: use f16 or q8_0", quant::type_name(kv_type_));
  if (options.profile) {
    profiler_.enable(stream_);
    graphs_enabled_ = false;
  }
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  if (profiler_.enabled()) std::fputs(profiler_.report().c_str(), stderr);
  drop_graphs();
  for (auto& [ptr, w] : weights_) cudaFree(const_cast<uint8_t*>(w.data));
  for (auto& [k, p] : inv_freq_) cudaFree(p);
  cudaFree(arena_);
  cudaFree(act_slot_);
  cudaFree(step_dev_);
  cudaFreeHost(step_host_);
  for (int i = 0; i < 2; ++i) {
    cudaFreeHost(staging_[i]);
    if (staged_[i]) cudaEventDestroy(staged_[i]);
  }
  if (step_event_) cudaEventDestroy(step_event_);
  cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const { return "cuda (" + device_name_ + ")"; }

// The model dimensions the kernels are built for (kernels.h's limits).
std::string CudaBackend::unsupported(const ModelDims& d) const {
  if (d.attention_head_dim != 0 && d.attention_head_dim != 64 && d.attention_head_dim != 128 &&
      d.attention_head_dim != 256)
    return fmt::format("the CUDA backend's attention supports head sizes 64, 128 and 256, not {}", d.attention_head_dim);
  if (d.deltanet_head_dim != 0 &&
      (d.deltanet_head_dim < 32 || d.deltanet_head_dim > 256 || d.deltanet_head_dim % 32 != 0))
    return fmt::format("the CUDA backend's Gated DeltaNet supports head sizes that are multiples of 32 up to 256, not {}",
                       d.deltanet_head_dim);
  if (d.conv_kernel > kMaxConvKernel)
    return fmt::format("the CUDA backend's Gated DeltaNet convolution supports kernels of up to {} taps, not {}",
                       kMaxConvKernel, d.conv_kernel);
  if (d.n_expert > kMaxExperts || d.n_expert_used > kMaxExpertsUsed)
    return fmt::format("the CUDA backend's MoE routing supports up to {} experts with up to {} used per token, not {} "
                       "with {}",
                       kMaxExperts, kMaxExpertsUsed, d.n_expert, d.n_expert_used);
  return {};
}

// ---- memory ----

void* CudaBackend::alloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess) {
    cudaGetLastError();
    fail("CUDA: out of device memory allocating {:.1f} MiB", bytes / 1048576.0);
  }
  CUDA_CHECK(cudaMemsetAsync(p, 0, std::max<size_t>(bytes, 1), stream_));
  return p;
}

void CudaBackend::free(void* p) {
  if (!p) return;
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  CUDA_CHECK(cudaFree(p));
}

const void* CudaBackend::upload_weight(const void* host, size_t bytes) {
  void* p = alloc(bytes);
  to_device(p, host, bytes);
  return p;
}

size_t CudaBackend::matrix_device_bytes(GgmlType type, int64_t n_in, int64_t n_out, int64_t n_mat) const {
  return plan_layout(type, n_in, n_out, n_mat).mat_stride * static_cast<size_t>(n_mat);
}

void CudaBackend::check_fits(uint64_t bytes, const std::string& what) {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // cudaMalloc rounds each allocation up to its 2 MiB pages: keep 1% for that and the allocator.
  const uint64_t usable = free_bytes - free_bytes / 100;
  if (bytes <= usable) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  fail("{} need {:.1f} GiB of device memory, and {} has {:.1f} GiB free of {:.1f} GiB: use a smaller "
       "quantization or model, free the GPU of other processes, or run on the CPU (--device cpu)",
       what, bytes / kGiB, device_name_, free_bytes / kGiB, total_bytes / kGiB);
}

uint8_t* CudaBackend::staging_piece(int i, size_t bytes) {
  if (bytes > staging_bytes_) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // both pieces are idle
    for (int j = 0; j < 2; ++j) {
      if (staging_[j]) CUDA_CHECK(cudaFreeHost(staging_[j]));
      staging_[j] = nullptr;
      if (cudaMallocHost(&staging_[j], bytes) != cudaSuccess) {
        cudaGetLastError();
        fail("CUDA: cannot pin {:.0f} MiB of host memory to stage weight uploads", bytes / 1048576.0);
      }
      if (!staged_[j]) CUDA_CHECK(cudaEventCreateWithFlags(&staged_[j], cudaEventDisableTiming));
    }
    staging_bytes_ = bytes;
  }
  return staging_[i];
}

void CudaBackend::upload_matrix(WeightRef& w, const void* host) {
  const bool kquant = w.type == GgmlType::Q3_K || w.type == GgmlType::Q4_K || w.type == GgmlType::Q5_K ||
                      w.type == GgmlType::Q6_K;
  if (kquant && w.n_in % 256 != 0)
    fail("weight {}: {} rows of {} values are not whole 256-value super-blocks (corrupt file?)", w.name,
         quant::type_name(w.type), w.n_in);
  DevWeight dw = plan_layout(w.type, w.n_in, w.n_out, w.n_mat);
  if (dw.type != w.type) {
    static std::vector<GgmlType> told;  // one notice per type
    auto bits_per_weight = [](GgmlType t) {
      return 8.0 * static_cast<double>(quant::type_info(t).block_bytes) / static_cast<double>(quant::type_info(t).block_elems);
    };
    if (std::find(told.begin(), told.end(), w.type) == told.end()) {
      told.push_back(w.type);
      if (dw.type == GgmlType::F16)
        fmt::print(stderr,
                   "memra: note: the CUDA backend has no {} kernel; {} weights are widened to f16 on upload "
                   "(more memory, slower decode; first: {})\n",
                   quant::type_name(w.type), quant::type_name(w.type), w.name);
      else
        fmt::print(stderr,
                   "memra: note: the CUDA backend has no {} kernel; {} weights run as {} ({}, "
                   "{:.1f} bits a weight on the device instead of {:.1f}; first: {})\n",
                   quant::type_name(w.type), quant::type_name(w.type), quant::type_name(dw.type),
                   quant::lossless_wider_type(w.type) ? "the same values"
                                                      : "each block's scale rounded to f16, 2^-11 relative",
                   bits_per_weight(dw.type), bits_per_weight(w.type), w.name);
    }
  }
  const size_t total = dw.mat_stride * static_cast<size_t>(w.n_mat);
  void* dev = nullptr;
  if (cudaMalloc(&dev, total) != cudaSuccess) {
    cudaGetLastError();
    fail("CUDA: out of device memory for weight {} ({:.1f} MiB)", w.name, total / 1048576.0);
  }
  // Repacked in pieces of ~64 MiB of whole row groups, numbered across the matrices (an expert
  // tensor's 256 small matrices share pieces), by all threads; a piece's copy from pinned memory
  // runs while the next piece is repacked into the other buffer. (One piece a matrix with a stream
  // sync each loaded 122B-A10B at 0.42 GB/s: H200, 2026-12-03.)
  const int64_t items = dw.n_rg * w.n_mat;
  const int64_t per_piece = std::max<int64_t>(1, (int64_t{64} << 20) / dw.group_stride);
  const size_t piece_bytes = static_cast<size_t>(std::min(items, per_piece) * dw.group_stride);
  const uint8_t* src = static_cast<const uint8_t*>(host);
  for (int64_t p0 = 0, k = 0; p0 < items; p0 += per_piece, ++k) {
    const int64_t n = std::min(per_piece, items - p0);
    if (k >= 2) CUDA_CHECK(cudaEventSynchronize(staged_[k % 2]));  // its previous copy is done
    uint8_t* piece = staging_piece(static_cast<int>(k % 2), piece_bytes);
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = (p0 + i) / dw.n_rg, r0 = ((p0 + i) % dw.n_rg) * kGroupRows;
      repack_group(dw, src + static_cast<size_t>(e) * w.mat_bytes + static_cast<size_t>(r0) * w.row_bytes,
                   static_cast<int64_t>(w.row_bytes), std::min<int64_t>(kGroupRows, w.n_out - r0),
                   piece + i * dw.group_stride);
    }
    // One copy per matrix the piece touches (a matrix's row groups are contiguous on the device),
    // on our stream: a legacy-stream copy would not be ordered before our kernels.
    for (int64_t i0 = 0; i0 < n;) {
      const int64_t e = (p0 + i0) / dw.n_rg, g0 = (p0 + i0) % dw.n_rg;
      const int64_t run = std::min(n - i0, dw.n_rg - g0);
      CUDA_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(dev) + static_cast<size_t>(e) * dw.mat_stride +
                                     static_cast<size_t>(g0 * dw.group_stride),
                                 piece + i0 * dw.group_stride, static_cast<size_t>(run * dw.group_stride),
                                 cudaMemcpyHostToDevice, stream_));
      i0 += run;
    }
    CUDA_CHECK(cudaEventRecord(staged_[k % 2], stream_));
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));  // the staging pieces are reused by the next upload
  dw.data = static_cast<const uint8_t*>(dev);
  weights_[dev] = dw;
  w.data = dev;
}

const DevWeight& CudaBackend::dev_weight(const WeightRef& w) const {
  auto it = weights_.find(w.data);
  MEMRA_ASSERT(it != weights_.end(), "weight {} was not uploaded with upload_matrix", w.name);
  return it->second;
}

void CudaBackend::to_device(void* dst, const void* src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
}
void CudaBackend::to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  synchronize();
}
void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}
void CudaBackend::zero(void* dst, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}
void CudaBackend::synchronize() {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  profiler_.collect();
}

float* CudaBackend::scratch(size_t n) {
  const size_t bytes = (std::max<size_t>(n, 1) * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  if (arena_used_ + bytes > arena_size_)
    fail("CUDA: a step needs more than the {} MiB scratch arena (raise MEMRA_CUDA_SCRATCH_MB or use a smaller "
         "prefill chunk)",
         arena_size_ >> 20);
  float* p = reinterpret_cast<float*>(arena_ + arena_used_);
  arena_used_ += bytes;
  return p;
}

void CudaBackend::reset_scratch() {
  arena_used_ = 0;
}

// ---- step tables ----

// Programmatic dependent launch pays where kernels are short and costs where they run in several
// waves: the next kernel's blocks, resident early, take the SM room the running kernel's later
// blocks need. H200, 9B Q4_0, 2026-12-03, tok/s with / without: tg32 @ d512 B = 1 369 / 350,
// B = 2 709 / 681, B = 4 1,329 / 1,295, B = 8 2,429 / 2,374, B = 16 3,730 / 3,748, B = 64
// 5,372 / 5,561; pp64 6,325 / 6,502; pp512 8,194 / 8,908. So a step uses it up to kPdlMaxRows
// rows. Bits are the same either way. The threshold between 8 and 16 (H200, 2026-12-03, tg32 @
// d512, threshold 8 -> 16): 9B Q4_0 B = 12 3,073 / 3,073 -> 3,097 / 3,113, B = 16 3,861 / 3,862 ->
// 3,854 / 3,856; 35B-A3B Q4_0 B = 16 2,037 / 2,054 -> 2,094 (its grouped launches are short); at
// 64 rows 35B-A3B B = 64 3,626 / 3,654 -> 3,623.
constexpr int32_t kPdlMaxRows = 16;

void CudaBackend::on_step(const StepPlan& plan) {
  const int32_t n_rows = static_cast<int32_t>(plan.n_rows());
  set_pdl_enabled(pdl_option_ && n_rows <= kPdlMaxRows);
  const int32_t n_seqs = static_cast<int32_t>(plan.seqs.size());
  const int32_t n_layers = n_seqs ? static_cast<int32_t>(plan.seqs[0].cache->layers.size()) : 0;
  const size_t n_ptr = static_cast<size_t>(n_layers) * n_seqs;
  // Mixed depths: the split attention's work list (DeviceStep::attn_items), each sequence's own
  // splits, after the pointer tables (step_upload_layout).
  const bool mixed = plan.mixed_depths(kKvBlock);
  size_t n_items = 0;
  if (mixed)
    for (const StepSeq& q : plan.seqs) n_items += static_cast<size_t>(q.kv_blocks(kKvBlock));
  const cuda::StepUploadLayout layout = cuda::step_upload_layout(n_rows, n_seqs, n_layers, mixed, n_items);
  const size_t ptr_off = layout.ptr_off, total = layout.total;
  if (total > step_capacity_) {
    if (step_dev_) {
      drop_graphs();  // recorded steps read the old table address
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      CUDA_CHECK(cudaFree(step_dev_));
      CUDA_CHECK(cudaFreeHost(step_host_));
    }
    step_capacity_ = std::max(total * 2, size_t{1} << 16);
    CUDA_CHECK(cudaMalloc(&step_dev_, step_capacity_));
    CUDA_CHECK(cudaMallocHost(&step_host_, step_capacity_));
    if (!step_event_) CUDA_CHECK(cudaEventCreateWithFlags(&step_event_, cudaEventDisableTiming));
  } else {
    CUDA_CHECK(cudaEventSynchronize(step_event_));  // the previous step's copy has left the staging buffer
  }
  int32_t* ints = reinterpret_cast<int32_t*>(step_host_);
  int32_t* tokens = ints;
  int32_t* positions = tokens + n_rows;
  int32_t* row_seq = positions + n_rows;
  int32_t* seq_row0 = row_seq + n_rows;
  int32_t* seq_n_rows = seq_row0 + n_seqs;
  int32_t* seq_pos0 = seq_n_rows + n_seqs;
  int32_t* item_off = seq_pos0 + n_seqs;  // mixed: [n_seqs + 1]; the entries after the pointer tables
  int32_t* items = reinterpret_cast<int32_t*>(step_host_ + layout.items_off);
  if (mixed) {
    int32_t at = 0;
    for (int32_t s = 0; s < n_seqs; ++s) {
      const StepSeq& q = plan.seqs[s];
      item_off[s] = at;
      const int32_t splits = q.kv_blocks(kKvBlock);
      MEMRA_ASSERT(s < 32768 && splits <= 65536, "attention work list: sequence {} of {} splits", s, splits);
      for (int32_t j = 0; j < splits; ++j) items[at++] = s * 65536 + j;
    }
    item_off[n_seqs] = at;
  }
  std::memcpy(tokens, plan.tokens.data(), n_rows * sizeof(int32_t));
  std::memcpy(positions, plan.positions.data(), n_rows * sizeof(int32_t));
  void** ptrs = reinterpret_cast<void**>(step_host_ + ptr_off);
  int32_t max_rows = 0, max_kv = 0;
  const GgmlType ssm_type = n_seqs > 0 ? plan.seqs[0].cache->shape().ssm_type : GgmlType::F32;
  for (int32_t s = 0; s < n_seqs; ++s) {
    const StepSeq& q = plan.seqs[s];
    MEMRA_ASSERT(static_cast<int32_t>(q.cache->layers.size()) == n_layers);
    MEMRA_ASSERT(q.cache->shape().ssm_type == ssm_type, "a step's sequences keep their recurrent states in one type");
    seq_row0[s] = q.row0;
    seq_n_rows[s] = q.n_rows;
    seq_pos0[s] = q.pos0;
    for (int32_t i = 0; i < q.n_rows; ++i) row_seq[q.row0 + i] = s;
    max_rows = std::max(max_rows, q.n_rows);
    max_kv = std::max(max_kv, q.pos0 + q.n_rows);
    for (int32_t l = 0; l < n_layers; ++l) {
      const LayerCache& c = q.cache->layers[l];
      const size_t i = static_cast<size_t>(l) * n_seqs + s;
      // The table's device copy is refreshed here when the sequence's blocks changed: on the
      // stream, before the kernels of this step (or of a replayed graph) read it.
      ptrs[i] = const_cast<uint8_t**>(q.cache->kv_block_table(l));
      ptrs[n_ptr + i] = c.conv;
      ptrs[2 * n_ptr + i] = c.ssm;
    }
  }
  CUDA_CHECK(cudaMemcpyAsync(step_dev_, step_host_, total, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaEventRecord(step_event_, stream_));
  const int32_t* dints = reinterpret_cast<const int32_t*>(step_dev_);
  void* const* dptrs = reinterpret_cast<void* const*>(step_dev_ + ptr_off);
  step_.n_rows = n_rows;
  step_.n_seqs = n_seqs;
  step_.max_seq_rows = max_rows;
  // Rounded up to the graph bucket (the engine keys recorded steps on it): launch sizes
  // derived from it are then the same for every step a recorded graph replays.
  step_.max_kv_len = bucketed_kv_len(max_kv);
  step_.tokens = dints;
  step_.positions = dints + n_rows;
  step_.row_seq = dints + 2 * n_rows;
  step_.seq_row0 = dints + 3 * n_rows;
  step_.seq_n_rows = dints + 3 * n_rows + n_seqs;
  step_.seq_pos0 = dints + 3 * n_rows + 2 * n_seqs;
  step_.kv_blocks = reinterpret_cast<uint8_t* const* const*>(dptrs);
  step_.conv = reinterpret_cast<float* const*>(dptrs + n_ptr);
  step_.ssm = dptrs + 2 * n_ptr;
  step_.ssm_bf16 = ssm_type == GgmlType::BF16;
  step_.attn_item_off = mixed ? dints + 3 * n_rows + 3 * n_seqs : nullptr;
  step_.attn_items = mixed ? reinterpret_cast<const int32_t*>(step_dev_ + layout.items_off) : nullptr;
}

// ---- graphs ----

void CudaBackend::drop_graphs() {
  for (auto& [k, g] : graphs_) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
}

bool CudaBackend::graph_begin(uint64_t key) {
  if (!graphs_enabled_) return false;
  MEMRA_ASSERT(!capturing_, "nested graph capture");
  auto it = graphs_.find(key);
  if (it != graphs_.end()) {
    // The engine's key must fix every table address and size the recorded launches read.
    MEMRA_ASSERT(it->second.step == step_, "graph key {:#x} replayed for a step of another device layout", key);
    CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_));
    return true;
  }
  CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  capturing_key_ = key;
  return false;
}

void CudaBackend::graph_end() {
  if (!capturing_) return;
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  capturing_ = false;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  graphs_[capturing_key_] = RecordedStep{exec, step_};
  CUDA_CHECK(cudaGraphLaunch(exec, stream_));
}

// ---- ops ----

F16Act CudaBackend::activation(MatmulInput in, int64_t rows, int64_t cols) {
  if (in.norm_token != 0) {
    MEMRA_ASSERT(in.norm_token == norm_form_.token && in.x == norm_form_.x && rows == norm_form_.act.rows &&
                     cols == norm_form_.act.cols,
                 "matmul handed a stale rms_norm token ({} rows x {}; the latest norm wrote {} x {})", rows, cols,
                 norm_form_.act.rows, norm_form_.act.cols);
    return norm_form_.act;
  }
  const float* x = in.x;
  OpProfiler::Scope prof(profiler_, "act_f16", 0);
  F16Act a;
  a.rows = rows;
  a.cols = cols;
  a.n_kt = k_tiles(cols);
  a.frag = reinterpret_cast<uint8_t*>(scratch(act_f16_frag_bytes(rows, cols) / sizeof(float)));
  a.frag_lo = reinterpret_cast<uint8_t*>(scratch(act_f16_frag_bytes(rows, cols) / sizeof(float)));
  a.sums = reinterpret_cast<uint8_t*>(scratch(act_f16_sums_bytes(rows, cols) / sizeof(float)));
  a.exps = reinterpret_cast<int32_t*>(scratch(static_cast<size_t>(rows)));
  act_f16(x, a, stream_);
  return a;
}

void CudaBackend::embed(const WeightRef& table, float* out) {
  OpProfiler::Scope prof(profiler_, "embed", 0);
  embed_rows(dev_weight(table), step_, step_.n_rows, out, stream_);
}

uint64_t CudaBackend::rms_norm(const float* x, const VecRef& w, float* out, int64_t rows, int64_t dim, float eps) {
  OpProfiler::Scope prof(profiler_, "rms_norm", 0);
  MEMRA_ASSERT(w.n == dim);
  const F16Act a = act_slot(rows, dim);
  cuda::rms_norm_act(x, w.data, out, a, rows, dim, eps, stream_);
  norm_form_ = {out, ++norm_tokens_, a};
  return norm_form_.token;
}

// The persistent slot the RMSNorm writes its output's f16 form into; the matmuls of that output
// find it through the token rms_norm returns. Each norm output is consumed before the next norm runs.
F16Act CudaBackend::act_slot(int64_t rows, int64_t cols) {
  const size_t frag = (act_f16_frag_bytes(rows, cols) + kAlign - 1) / kAlign * kAlign;
  const size_t sums = (act_f16_sums_bytes(rows, cols) + kAlign - 1) / kAlign * kAlign;
  const size_t need = 2 * frag + sums + static_cast<size_t>(rows) * 4;
  if (need > act_slot_bytes_) {
    MEMRA_ASSERT(!capturing_, "activation slot grew during graph capture");
    drop_graphs();  // recorded steps write the old slot
    if (act_slot_) free(act_slot_);
    act_slot_bytes_ = std::max(need, act_slot_bytes_ * 2);
    act_slot_ = static_cast<uint8_t*>(alloc(act_slot_bytes_));
  }
  F16Act a;
  a.rows = rows;
  a.cols = cols;
  a.n_kt = k_tiles(cols);
  a.frag = act_slot_;
  a.frag_lo = act_slot_ + frag;
  a.sums = act_slot_ + 2 * frag;
  a.exps = reinterpret_cast<int32_t*>(act_slot_ + 2 * frag + sums);
  return a;
}

void CudaBackend::matmul(const WeightRef& w, MatmulInput x, float* out, int64_t rows, int64_t mat, bool accumulate) {
  MEMRA_ASSERT(mat == 0 || w.n_mat > 1);
  if (mat == 0) {
    MatmulOut o{&w, out, accumulate};
    matmul_multi(x, rows, &o, 1);
    return;
  }
  const DevWeight& dw = dev_weight(w);
  MEMRA_ASSERT(out != x.x, "matmul output aliases its input");
  const F16Act a = activation(x, rows, dw.n_in);
  OpProfiler::Scope prof(profiler_, fmt::format("matmul {} {} r{}", w.name, quant::type_name(dw.type), rows),
                         static_cast<double>(dw.mat_stride));
  const MatmulTarget t{&dw, mat, out, dw.n_out, accumulate};
  cuda::matmul(&t, 1, a, stream_);
}

void CudaBackend::matmul_multi(MatmulInput x, int64_t rows, const MatmulOut* outs, int n_outs) {
  if (rows == 0 || n_outs == 0) return;
  for (int i = 0; i < n_outs; ++i) MEMRA_ASSERT(outs[i].out != x.x, "matmul output aliases its input");
  // Projections of one device type and width share one activation conversion and one launch
  // (up to 4 per launch).
  std::vector<MatmulTarget> group;
  std::string group_name;
  double group_bytes = 0;
  auto flush = [&] {
    if (group.empty()) return;
    const F16Act a = activation(x, rows, group[0].w->n_in);
    OpProfiler::Scope prof(profiler_, group_name, group_bytes);
    cuda::matmul(group.data(), static_cast<int>(group.size()), a, stream_);
    group.clear();
    group_name.clear();
    group_bytes = 0;
  };
  for (int i = 0; i < n_outs; ++i) {
    const DevWeight& dw = dev_weight(*outs[i].w);
    if (!group.empty() && (group.size() == 4 || group[0].w->type != dw.type || group[0].w->n_in != dw.n_in)) flush();
    group.push_back(MatmulTarget{&dw, 0, outs[i].out, dw.n_out, outs[i].accumulate});
    if (profiler_.enabled()) {
      const std::string& n = outs[i].w->name;
      std::string name = n.rfind("blk.", 0) == 0 ? n.substr(n.find('.', 4) + 1) : n;
      if (name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) name.resize(name.size() - 7);
      group_name = group_name.empty() ? fmt::format("matmul {} {} r{}", name, quant::type_name(dw.type), rows)
                                      : group_name + "+" + name;
    }
    group_bytes += static_cast<double>(dw.mat_stride);
  }
  flush();
}

void CudaBackend::swiglu(const WeightRef& gate, const WeightRef& up, MatmulInput x, float* act, int64_t rows) {
  const DevWeight& g = dev_weight(gate);
  const DevWeight& u = dev_weight(up);
  if (g.type != u.type || g.n_in != u.n_in || g.n_out != u.n_out) {
    Backend::swiglu(gate, up, x, act, rows);
    return;
  }
  const F16Act a = activation(x, rows, g.n_in);
  OpProfiler::Scope prof(profiler_, fmt::format("swiglu gate+up {} r{}", quant::type_name(g.type), rows),
                         static_cast<double>(g.mat_stride + u.mat_stride));
  matmul_swiglu(g, u, a, act, stream_);
}

void CudaBackend::silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  OpProfiler::Scope prof(profiler_, "silu_mul", 0);
  cuda::silu_mul(gate, up, out, n, stream_);
}

void CudaBackend::gather_rows(const float* x, const int32_t* src_rows, int64_t n, int64_t cols, float* out) {
  OpProfiler::Scope prof(profiler_, "gather_rows", 0);
  int32_t* dev = reinterpret_cast<int32_t*>(scratch(static_cast<size_t>(n)));
  to_device(dev, src_rows, static_cast<size_t>(n) * sizeof(int32_t));
  cuda::gather_rows(x, dev, n, cols, out, stream_);
}

const float* CudaBackend::inv_freq(int n_rot, float theta) {
  uint32_t bits;
  std::memcpy(&bits, &theta, 4);
  const uint64_t key = (static_cast<uint64_t>(n_rot) << 32) | bits;
  auto it = inv_freq_.find(key);
  if (it != inv_freq_.end()) return it->second;
  std::vector<float> f(static_cast<size_t>(std::max(n_rot / 2, 1)));
  for (int i = 0; i < n_rot / 2; ++i) f[i] = static_cast<float>(std::pow(static_cast<double>(theta), -2.0 * i / n_rot));
  float* dev = static_cast<float*>(alloc(f.size() * sizeof(float)));
  to_device(dev, f.data(), f.size() * sizeof(float));
  inv_freq_[key] = dev;
  return dev;
}

void CudaBackend::qk_norm_rope(float* q, float* k, const VecRef& q_norm, const VecRef& k_norm, const AttnShape& s,
                               float eps) {
  OpProfiler::Scope prof(profiler_, "qk_norm_rope", 0);
  MEMRA_ASSERT(q_norm.n == s.head_dim && k_norm.n == s.head_dim);
  cuda::qk_norm_rope(q, k, q_norm.data, k_norm.data, inv_freq(s.n_rot, s.rope_theta), step_, step_.n_rows, s, eps,
                     stream_);
}

// The cache rows the step appends match the kernels' row layout (SequenceCache checks the rest).
void CudaBackend::check_kv_rows(const AttnShape& s) const {
  const int kv_dim = s.n_head_kv * s.head_dim;
  MEMRA_ASSERT(kv_type_ != GgmlType::Q8_0 || kv_dim % 64 == 0, "8-bit KV rows of {} values (SequenceCache checks)",
               kv_dim);
  const size_t row_bytes = kv_type_ == GgmlType::Q8_0 ? static_cast<size_t>(kv_q8_row_bytes(kv_dim)) : 2 * kv_dim;
  for (const StepSeq& seq : plan().seqs) {
    MEMRA_ASSERT(seq.pos0 + seq.n_rows <= seq.cache->capacity(), "KV cache not reserved");
    MEMRA_ASSERT(seq.cache->pool().v_offset() == row_bytes * kKvBlock, "KV block layout");
    MEMRA_ASSERT(seq.cache->kv_row_bytes == row_bytes, "KV cache rows of {} bytes, kernels expect {}",
                 seq.cache->kv_row_bytes, row_bytes);
  }
}

float* CudaBackend::attention_work(const AttnShape& s) {
  return scratch(static_cast<size_t>(std::max<int64_t>(attention_work_floats(step_, step_.n_rows, s), 1)));
}

void CudaBackend::attention(int layer, const float* q, const float* k, const float* v, float* out,
                            const AttnShape& s) {
  check_kv_rows(s);
  {
    OpProfiler::Scope prof(profiler_, "kv_append", 0);
    cuda::kv_append(layer, k, v, step_, step_.n_rows, s.n_head_kv * s.head_dim, kv_type_, stream_);
  }
  OpProfiler::Scope prof(profiler_, "attention", 0);
  cuda::attention(layer, q, step_, step_.n_rows, s, kv_type_, attn_tc_, out, attention_work(s), stream_);
}

// Two launches instead of four: the norm + rope launch appends k and v, the attention's merge
// applies the gate.
void CudaBackend::attention_block(int layer, float* q, float* k, const float* v, const VecRef& q_norm,
                                  const VecRef& k_norm, float eps, const AttnGate& gate, float* out,
                                  const AttnShape& s) {
  MEMRA_ASSERT(q_norm.n == s.head_dim && k_norm.n == s.head_dim);
  check_kv_rows(s);
  {
    OpProfiler::Scope prof(profiler_, "qk_norm_rope+kv_append", 0);
    cuda::qk_norm_rope_append(layer, q, k, v, q_norm.data, k_norm.data, inv_freq(s.n_rot, s.rope_theta), step_,
                              step_.n_rows, s, eps, kv_type_, stream_);
  }
  OpProfiler::Scope prof(profiler_, gate.x ? "attention+gate" : "attention", 0);
  cuda::attention(layer, q, step_, step_.n_rows, s, kv_type_, attn_tc_, out, attention_work(s), stream_,
                  cuda::AttnOutGate{gate.x, gate.row_stride, gate.head_stride});
}

void CudaBackend::sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim,
                                   int64_t gate_row_stride, int gate_head_stride) {
  OpProfiler::Scope prof(profiler_, "sigmoid_gate_mul", 0);
  cuda::sigmoid_gate_mul(out, gate, rows, n_head, head_dim, gate_row_stride, gate_head_stride, stream_);
}

void CudaBackend::conv1d_silu(int layer, const float* x, const VecRef& w, float* out, int channels, int kernel) {
  MEMRA_ASSERT(w.n == static_cast<int64_t>(channels) * kernel);
  cuda::conv1d_silu(layer, x, w.data, out, channels, kernel, step_, stream_);
}

void CudaBackend::deltanet(int layer, const float* mixed, const float* z, const float* beta_raw, const float* alpha_raw,
                           const VecRef& conv_w, const VecRef& ssm_a, const VecRef& dt_bias, const VecRef& norm_w,
                           float* y, const GdnShape& s, float eps) {
  MEMRA_ASSERT(ssm_a.n == s.n_v && dt_bias.n == s.n_v && norm_w.n == s.d);
  const int channels = s.conv_channels();
  float* conv = scratch(static_cast<size_t>(step_.n_rows) * channels);
  {
    OpProfiler::Scope prof(profiler_, "conv1d_silu", 0);
    cuda::conv1d_silu(layer, mixed, conv_w.data, conv, channels, s.conv_kernel, step_, stream_);
  }
  const int64_t work_floats = cuda::deltanet_work_floats(step_, s);
  float* work = work_floats > 0 ? scratch(static_cast<size_t>(work_floats)) : nullptr;
  OpProfiler::Scope prof(profiler_, "deltanet_core", 0);
  cuda::deltanet_core(layer, conv, z, beta_raw, alpha_raw, ssm_a.data, dt_bias.data, norm_w.data, y, s, eps,
                      step_, work, stream_);
}

double CudaBackend::measure_read_bandwidth() { return cuda::measure_read_bandwidth(size_t{4} << 30, 9, stream_); }

// The routed experts run as two grouped launches over only the experts the step uses (gate+up
// with SwiGLU, then down), the shared expert in them or as a plain SwiGLU pair; moe_combine adds
// them in a fixed order. x is the normed input (its f16 form is the norm's).
void CudaBackend::moe_ffn(const MoeWeights& m, MatmulInput x, float* out, int64_t rows, int64_t hidden) {
  MEMRA_ASSERT(m.router.n_in == hidden && m.router.n_out == m.n_expert && m.n_used >= 1 && m.n_used <= m.n_expert);
  if (rows == 0) return;
  const int k = m.n_used;
  const int64_t n_sel = rows * k, n_ff = m.gate_exps.n_out;
  const F16Act a = activation(x, rows, hidden);
  float* logits = scratch(static_cast<size_t>(rows * m.n_expert));
  // The shared expert's sigmoid gate (one row) rides in the router's launch when their types and
  // widths agree: alone it was a launch of one row group (H200, 35B-A3B, 2026-12-02: 10.5 us a
  // layer at B = 1, 90 us at B = 64). Each target keeps its canonical order: the same bits.
  const DevWeight& router = dev_weight(m.router);
  float* gate_logit = nullptr;
  const bool gate_with_router = m.gate_shexp.valid() && m.shexp_gate.valid() &&
                                dev_weight(m.shexp_gate).type == router.type && dev_weight(m.shexp_gate).n_in == router.n_in;
  {
    OpProfiler::Scope prof(profiler_, gate_with_router ? "moe router+shexp gate" : "moe router", 0);
    MatmulTarget t[2] = {{&router, 0, logits, m.n_expert, false}, {}};
    if (gate_with_router) {
      gate_logit = scratch(static_cast<size_t>(rows));
      t[1] = MatmulTarget{&dev_weight(m.shexp_gate), 0, gate_logit, 1, false};
    }
    cuda::matmul(t, gate_with_router ? 2 : 1, a, stream_);
  }
  const DevWeight& gate = dev_weight(m.gate_exps);
  const DevWeight& up = dev_weight(m.up_exps);
  const DevWeight& down = dev_weight(m.down_exps);
  if (gate.type != up.type || gate.n_out != up.n_out)
    fail("MoE experts: ffn_gate_exps ({}) and ffn_up_exps ({}) must share a type and shape on the CUDA backend",
         quant::type_name(gate.type), quant::type_name(up.type));
  // In a decode step the shared expert joins the grouped launches as one more slot over every row
  // when its three matrices have the experts' types and shapes (2 launches and a conversion fewer
  // a layer; H200, 35B-A3B Q4_0, 2026-12-02, with the router changes above: tg B = 1 272 -> 328
  // tok/s, B = 64 2,198 -> 3,339). A prefill chunk keeps the separate launches, whose shapes suit
  // many rows (pp512 with the shared slot fell 5,200 -> 4,781). Either way a row gets the same
  // bits (each row's canonical order, row-wise f16 form).
  constexpr int64_t kSharedGroupedMaxRows = 64;
  const DevWeight* gate_sh = m.gate_shexp.valid() ? &dev_weight(m.gate_shexp) : nullptr;
  const DevWeight* up_sh = m.gate_shexp.valid() ? &dev_weight(m.up_shexp) : nullptr;
  const DevWeight* down_sh = m.gate_shexp.valid() ? &dev_weight(m.down_shexp) : nullptr;
  const bool shared_grouped = rows <= kSharedGroupedMaxRows && gate_sh && same_matrix_geometry(*gate_sh, gate) &&
                              same_matrix_geometry(*up_sh, gate) && same_matrix_geometry(*down_sh, down);
  const int64_t shared_rows = shared_grouped ? rows : 0;
  const int64_t n_grouped = n_sel + shared_rows;

  MoeRouting r;
  r.groups = static_cast<int>(std::min<int64_t>(n_sel, m.n_expert));
  r.shared_rows = shared_rows;
  const int slots = r.groups + (shared_grouped ? 1 : 0);
  auto ints = [&](int64_t n) { return reinterpret_cast<int32_t*>(scratch(static_cast<size_t>(n))); };
  r.sel = ints(n_sel);
  r.weight = scratch(static_cast<size_t>(n_sel));
  r.pos = ints(n_sel);
  r.act_row = ints(n_grouped);
  r.grp_off = ints(slots + 1);
  r.grp_expert = ints(slots);
  // Block lists for the two grouped launches where a group can outgrow one block's rows: a block
  // for each row tile of a used slot, not one for every slot and every tile of the largest
  // possible group (B = 64: 257 slots x 4 tiles, ~78% of the blocks empty; pp512: 256 x 32). Same
  // rows, same tiles' shape: the same bits. H100, 35B-A3B Q4_0 (2026-12-06, logits cmp-identical):
  // pp512 7,805 / 7,741 -> 13,280 / 13,357 tok/s, tg32 B = 32 2,869 / 2,851 -> 3,013 / 3,025, B = 64
  // 3,844 / 3,815 -> 4,276 / 4,277; with a list B = 1 lost 4% (377 -> 362: the block's entry is one
  // more dependent load before its slot's offsets) and B = 16 was flat, so up to one tile of rows
  // the grid stays slots x 1.
  for (int list = 0; list < 2; ++list) {
    const DevWeight& w = list == 0 ? dev_weight(m.gate_exps) : dev_weight(m.down_exps);
    const int tile_rows = cuda::grouped_tile_rows(w, list == 0, slots, rows);
    const int64_t capacity = cuda::group_tiles_capacity(shared_rows, n_sel, r.groups, tile_rows);
    // (A list longer than grid z's 65,535 blocks, a prompt chunk of over ~130k rows, keeps the grid.)
    if (rows <= tile_rows || capacity > 65535) continue;
    GroupTiles& gt = r.tiles[list];
    gt.rows = tile_rows;
    gt.capacity = static_cast<int>(capacity);
    gt.tile = ints(gt.capacity);
  }
  {
    OpProfiler::Scope prof(profiler_, "moe route", 0);
    moe_route(logits, rows, m.n_expert, k, m.norm_topk, r, stream_);
  }
  GroupedRows g;
  g.grp_off = r.grp_off;
  g.grp_expert = r.grp_expert;
  g.act_row = r.act_row;
  g.groups = slots;
  g.max_rows = rows;  // an expert appears at most once among a row's k; the shared slot has every row
  float* act = scratch(static_cast<size_t>(n_grouped * n_ff));
  {
    OpProfiler::Scope prof(profiler_, fmt::format("moe gate+up {} r{}", quant::type_name(gate.type), rows), 0);
    g.list = r.tiles[0];
    matmul_grouped(gate, &up, a, g, act, stream_, shared_grouped ? gate_sh : nullptr,
                   shared_grouped ? up_sh : nullptr);
  }
  const F16Act a2 = activation(act, n_grouped, n_ff);
  float* y = scratch(static_cast<size_t>(n_grouped * hidden));
  g.act_row = nullptr;  // the grouped rows are in order now
  {
    OpProfiler::Scope prof(profiler_, fmt::format("moe down {} r{}", quant::type_name(down.type), rows), 0);
    g.list = r.tiles[1];
    matmul_grouped(down, nullptr, a2, g, y, stream_, shared_grouped ? down_sh : nullptr);
  }
  float* shared = nullptr;
  if (shared_grouped) {
    shared = y + n_sel * hidden;
  } else if (m.gate_shexp.valid()) {
    float* sh = scratch(static_cast<size_t>(rows * m.gate_shexp.n_out));
    swiglu(m.gate_shexp, m.up_shexp, x, sh, rows);
    shared = scratch(static_cast<size_t>(rows * hidden));
    matmul(m.down_shexp, sh, shared, rows, 0, false);
  }
  if (m.gate_shexp.valid() && m.shexp_gate.valid() && !gate_with_router) {
    gate_logit = scratch(static_cast<size_t>(rows));
    matmul(m.shexp_gate, x, gate_logit, rows, 0, false);
  }
  OpProfiler::Scope prof(profiler_, "moe combine", 0);
  moe_combine(y, r, k, shared, gate_logit, out, rows, hidden, stream_);
}

void CudaBackend::argmax(const float* logits, int64_t rows, int64_t n, int32_t* out_host) {
  OpProfiler::Scope prof(profiler_, "argmax", 0);
  const size_t mark = scratch_mark();
  int32_t* dev = reinterpret_cast<int32_t*>(scratch(static_cast<size_t>(rows)));
  void* work = scratch(argmax_work_bytes(rows, n) / sizeof(float) + 1);
  argmax_rows(logits, rows, n, dev, work, stream_);
  to_host(out_host, dev, static_cast<size_t>(rows) * sizeof(int32_t));
  scratch_release(mark);
}

}  // namespace cuda
}  // namespace memra
