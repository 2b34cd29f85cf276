// CUDA full attention's exactness contract: a row's output (qk_norm_rope, kv_append, split
// attention + combine) is bit-identical whatever else shares the step; the 8-bit cache's width
// check; decode cost by depth. (Against the CPU, with the KV cache compared: gpu_ops_test.cpp.)
//
// Caches: each test sequence has a SequenceCache on both backends. Its history (the keys before
// the rows under test) is random N(0,1) K/V rows; the CUDA side appends them through attention()
// (kv_append, in prefill chunks of 512 rows) while the CPU side gets the same f32 rows copied
// straight into its cache, because CPU prefill attention over thousands of keys at 9B sizes takes
// tens of seconds and would only recompute outputs nobody compares. The rows under test go
// through qk_norm_rope and attention() on both backends.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "common/error.h"
#include "model/config.h"
#include "quant/quant.h"
#include "step/kv_blocks.h"
#include "step/sequence_cache.h"
#include "step/step_plan.h"

namespace memra {
namespace {

using test::DevFloats;

struct Dims {
  const char* name;
  int n_head, n_head_kv, head_dim, n_rot;
  bool gated;  // q rows interleave [q_h | gate_h]
  float theta;
};
const Dims k9B{"qwen35-9b", 16, 4, 256, 64, true, 1e7f};
const Dims kTiny{"tiny-fixture", 4, 2, 64, 16, true, 1e7f};

constexpr int kLayers = 2;
constexpr int kLayer = 1;  // not layer 0, so a wrong layer index into the cache tables shows
constexpr float kEps = 1e-6f;
constexpr int32_t kMaxCtx = 1 << 15;
constexpr int32_t kFillChunk = 512;
// The CUDA cache is f16: every K/V element is rounded to 11 significant bits (relative error
// <= 2^-11). On these inputs (N(0,1) before the norms, norm weights in [0.5, 1.5]) that moves a
// head's output by at most ~5e-4 relative L2 in a float64 simulation at 1..4096 keys; float
// accumulation and the float rope angle add well under 1e-4. Bound per (row, head): 2e-3.
constexpr double kAttnTol = 2e-3;
// The 8-bit cache (MEMRA_CUDA_KV=q8_0) rounds each element to 1/254 of its 32-block's max|x|: a
// float64 simulation of these shapes (1..4096 keys, head size 256) moves a head's output by
// 0.55-1.3% relative L2 (worst of 35 draws). Bound per (row, head): 4e-2; a wrong scale or block
// gives errors of order 1. The cache bytes themselves are checked exactly (KvAppendQ8).
constexpr double kAttnTolQ8 = 4e-2;

// A CUDA backend whose KV cache is `kv` (MEMRA_CUDA_KV) and whose split step runs on the tensor
// cores when `tc` (CudaOptions::attn_tc, on by default), or null without a GPU.
std::unique_ptr<Backend> gpu_with_kv(GgmlType kv, bool tc = test::gpu_options().attn_tc) {
  CudaOptions o = test::gpu_options();
  o.kv_type = kv;
  o.attn_tc = tc;
  return test::make_gpu_backend(o);
}

ModelConfig make_config(const Dims& d) {
  ModelConfig c;
  c.n_layer = kLayers;
  c.n_embd = d.n_head * d.head_dim;
  c.n_vocab = 16;
  c.rms_eps = kEps;
  c.n_head = d.n_head;
  c.n_head_kv = d.n_head_kv;
  c.head_dim = d.head_dim;
  c.n_rot = d.n_rot;
  c.rope_theta = d.theta;
  c.attn_gated = d.gated;
  c.layer_mixer.assign(kLayers, MixerKind::FullAttention);
  return c;
}

AttnShape make_shape(const Dims& d) {
  AttnShape s;
  s.n_head = d.n_head;
  s.n_head_kv = d.n_head_kv;
  s.head_dim = d.head_dim;
  s.n_rot = d.n_rot;
  s.rope_theta = d.theta;
  s.q_head_stride = d.gated ? 2 * d.head_dim : d.head_dim;
  return s;
}

// ||got - want|| / ||want|| over [off, off + n); infinity if got has a non-finite value.
double slice_err(const std::vector<float>& got, const std::vector<float>& want, size_t off, size_t n) {
  double num = 0, den = 0;
  for (size_t i = off; i < off + n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

void append(std::vector<float>& dst, const std::vector<float>& src) { dst.insert(dst.end(), src.begin(), src.end()); }

struct Part {
  int seq;
  int32_t rows;
};

struct StepOut {
  std::vector<float> cpu, gpu;  // rows x n_head*head_dim (cpu empty when not run)
  std::vector<float> gpu_k;     // the GPU's k rows after qk_norm_rope (what it appended)
  std::vector<float> v;         // the v rows
  std::vector<int> row_seq;
  std::vector<int32_t> row_pos;
};

// How a rig's steps run the GPU side: qk_norm_rope then attention() (the ops the CPU is compared
// on), the same with the output gate (sigmoid_gate_mul), or Backend::attention_block (the
// model's call: the fused launches).
enum class GpuPath { Pieces, PiecesGated, Block };

// One model shape, a list of sequences with caches on both backends, and steps over them.
class AttentionRig {
 public:
  AttentionRig(Backend& gpu, const Dims& d, double tol = kAttnTol, GpuPath path = GpuPath::Pieces,
               int32_t max_ctx = kMaxCtx)
      : path_(path),
        max_ctx_(max_ctx),
        tol_(tol),
        d_(d),
        cfg_(make_config(d)),
        s_(make_shape(d)),
        cpu_(make_cpu_backend()),
        gpu_(gpu),
        qn_host_(test::random_floats(d.head_dim, 0.5f, 1.5f, 901)),
        kn_host_(test::random_floats(d.head_dim, 0.5f, 1.5f, 902)),
        qn_cpu_(*cpu_, qn_host_),
        kn_cpu_(*cpu_, kn_host_),
        qn_gpu_(gpu, qn_host_),
        kn_gpu_(gpu, kn_host_) {}

  const AttnShape& shape() const { return s_; }
  const Dims& dims() const { return d_; }
  int64_t q_row() const { return static_cast<int64_t>(s_.n_head) * s_.q_head_stride; }
  int64_t kv_dim() const { return static_cast<int64_t>(s_.n_head_kv) * s_.head_dim; }
  int64_t o_row() const { return static_cast<int64_t>(s_.n_head) * s_.head_dim; }
  SequenceCache& gpu_seq(int i) { return *gpu_seqs_[i]; }
  int32_t pos(int i) const { return gpu_seqs_[i]->pos(); }

  // A new sequence with `depth` positions of history (see the file comment). The history's f32
  // K/V rows are returned through k_hist / v_hist when given.
  int add_sequence(int32_t depth, uint64_t seed, std::vector<float>* k_hist = nullptr,
                   std::vector<float>* v_hist = nullptr) {
    new_caches();
    SequenceCache& c = *cpu_seqs_.back();
    SequenceCache& g = *gpu_seqs_.back();
    if (k_hist) k_hist->clear();
    if (v_hist) v_hist->clear();
    for (int32_t p0 = 0; p0 < depth; p0 += kFillChunk) {
      const int32_t n = std::min(kFillChunk, depth - p0);
      const uint64_t cs = seed * 7919 + p0;
      const auto q = test::normal_floats(static_cast<size_t>(n * q_row()), 1.0f, 3 * cs);
      const auto k = test::normal_floats(static_cast<size_t>(n * kv_dim()), 1.0f, 3 * cs + 1);
      const auto v = test::normal_floats(static_cast<size_t>(n * kv_dim()), 1.0f, 3 * cs + 2);
      if (k_hist) append(*k_hist, k);
      if (v_hist) append(*v_hist, v);
      c.reserve(p0 + n);
      test::write_kv_rows(*cpu_, c, kLayer, p0, n, false, k.data());
      test::write_kv_rows(*cpu_, c, kLayer, p0, n, true, v.data());
      g.reserve(p0 + n);
      StepPlan plan;
      const std::vector<int32_t> toks(static_cast<size_t>(n), 0);
      plan.add(&g, toks.data(), n, p0);
      gpu_.reset_scratch();
      gpu_.set_step(plan);
      DevFloats dq(gpu_, q), dk(gpu_, k), dv(gpu_, v), dout(gpu_, static_cast<size_t>(n * o_row()));
      gpu_.attention(kLayer, dq.get(), dk.get(), dv.get(), dout.get(), s_);
      gpu_.synchronize();
      c.advance(n);
      g.advance(n);
    }
    return static_cast<int>(gpu_seqs_.size()) - 1;
  }

  // A new sequence whose `depth` positions of history are written into both caches directly
  // (N(0,1) K / V rows, f32 on the CPU, rounded to f16 on the GPU: an f16 GPU cache only), not
  // appended by attention steps: deep rows at the cost of the copies.
  int add_sequence_written(int32_t depth, uint64_t seed) {
    MEMRA_ASSERT(gpu_.kv_type() == GgmlType::F16 && cpu_->kv_type() == GgmlType::F32);
    new_caches();
    SequenceCache& c = *cpu_seqs_.back();
    SequenceCache& g = *gpu_seqs_.back();
    c.reserve(depth);
    g.reserve(depth);
    for (const bool v : {false, true}) {
      const auto x = test::normal_floats(static_cast<size_t>(depth * kv_dim()), 1.0f, seed * 7919 + v);
      std::vector<uint16_t> h(x.size());
      for (size_t i = 0; i < x.size(); ++i) h[i] = quant::f32_to_f16(x[i]);
      test::write_kv_rows(*cpu_, c, kLayer, 0, depth, v, x.data());
      test::write_kv_rows(gpu_, g, kLayer, 0, depth, v, h.data());
    }
    c.advance(depth);
    g.advance(depth);
    return static_cast<int>(gpu_seqs_.size()) - 1;
  }

  // One step: each part gives `rows` rows of a sequence at its current position, in part order.
  // Inputs are N(0,1), seeded by (seed, sequence, position) only, so a sequence's rows get the
  // same inputs whatever else is in the step. `advance` moves the sequences past the rows.
  StepOut step(const std::vector<Part>& parts, uint64_t seed, bool advance, bool with_cpu = true) {
    std::vector<float> q, k, v;
    for (const Part& p : parts) {
      const uint64_t ps = (seed * 1000003 + p.seq) * 65537 + pos(p.seq);
      append(q, test::normal_floats(static_cast<size_t>(p.rows * q_row()), 1.0f, 3 * ps));
      append(k, test::normal_floats(static_cast<size_t>(p.rows * kv_dim()), 1.0f, 3 * ps + 1));
      append(v, test::normal_floats(static_cast<size_t>(p.rows * kv_dim()), 1.0f, 3 * ps + 2));
    }
    return step_with(parts, q, k, v, advance, with_cpu);
  }

  // The same with the step's input rows given (q: q_row() floats a row, k and v: kv_dim()), in
  // part order.
  StepOut step_with(const std::vector<Part>& parts, const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, bool advance, bool with_cpu) {
    StepPlan pc, pg;
    StepOut r;
    for (const Part& p : parts) {
      const int32_t pos0 = pos(p.seq);
      cpu_seqs_[p.seq]->reserve(pos0 + p.rows);
      gpu_seqs_[p.seq]->reserve(pos0 + p.rows);
      const std::vector<int32_t> toks(static_cast<size_t>(p.rows), 0);
      pc.add(cpu_seqs_[p.seq].get(), toks.data(), p.rows, pos0);
      pg.add(gpu_seqs_[p.seq].get(), toks.data(), p.rows, pos0);
      for (int32_t i = 0; i < p.rows; ++i) {
        r.row_seq.push_back(p.seq);
        r.row_pos.push_back(pos0 + i);
      }
    }
    MEMRA_ASSERT(q.size() == r.row_seq.size() * q_row() && k.size() == r.row_seq.size() * kv_dim() &&
                 v.size() == k.size());
    if (with_cpu) r.cpu = run(*cpu_, pc, qn_cpu_, kn_cpu_, q, k, v, nullptr);
    r.gpu = run(gpu_, pg, qn_gpu_, kn_gpu_, q, k, v, &r.gpu_k);
    r.v = v;
    if (advance) {
      for (const Part& p : parts) {
        cpu_seqs_[p.seq]->advance(p.rows);
        gpu_seqs_[p.seq]->advance(p.rows);
      }
    }
    return r;
  }

  // Every (row, head) of the GPU output within kAttnTol of the CPU's.
  void expect_close(const StepOut& r, const std::string& what) const {
    ASSERT_EQ(r.cpu.size(), r.gpu.size());
    const size_t hd = static_cast<size_t>(s_.head_dim);
    int bad = 0;
    double worst = 0;
    for (size_t row = 0; row < r.row_seq.size(); ++row) {
      for (int h = 0; h < s_.n_head; ++h) {
        const double e = slice_err(r.gpu, r.cpu, row * o_row() + h * hd, hd);
        worst = std::max(worst, e);
        if (!(e <= tol_) && ++bad <= 5)
          ADD_FAILURE() << d_.name << " " << what << ": row " << row << " (sequence " << r.row_seq[row]
                        << ", position " << r.row_pos[row] << ") head " << h << " relative error " << e;
      }
    }
    EXPECT_EQ(bad, 0) << d_.name << " " << what << ": worst relative error " << worst;
  }

 private:
  // A sequence's empty caches on both backends, of the rig's capacity.
  void new_caches() {
    cpu_seqs_.push_back(std::make_unique<SequenceCache>(*cpu_, cfg_.cache_shape(cpu_->kv_type()), max_ctx_));
    gpu_seqs_.push_back(std::make_unique<SequenceCache>(gpu_, cfg_.cache_shape(gpu_.kv_type()), max_ctx_));
  }

  std::vector<float> run(Backend& be, const StepPlan& plan, const DevFloats& qn, const DevFloats& kn,
                         const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                         std::vector<float>* k_after) {
    be.reset_scratch();
    be.set_step(plan);
    DevFloats dq(be, q), dk(be, k), dv(be, v);
    DevFloats dout(be, std::vector<float>(static_cast<size_t>(plan.n_rows() * o_row()), NAN));
    const int hd = s_.head_dim;
    if (&be == &gpu_ && path_ == GpuPath::Block) {
      Backend::AttnGate gate;
      if (d_.gated) gate = {dq.get() + hd, q_row(), 2 * hd};
      be.attention_block(kLayer, dq.get(), dk.get(), dv.get(), qn.vec(), kn.vec(), kEps, gate, dout.get(), s_);
    } else {
      be.qk_norm_rope(dq.get(), dk.get(), qn.vec(), kn.vec(), s_, kEps);
      be.attention(kLayer, dq.get(), dk.get(), dv.get(), dout.get(), s_);
      if (&be == &gpu_ && path_ == GpuPath::PiecesGated && d_.gated)
        be.sigmoid_gate_mul(dout.get(), dq.get() + hd, plan.n_rows(), s_.n_head, hd, q_row(), 2 * hd);
    }
    std::vector<float> out = dout.download();
    if (k_after) *k_after = dk.download();
    return out;
  }

  GpuPath path_;
  int32_t max_ctx_;
  double tol_;  // per (row, head) relative L2 against the CPU
  Dims d_;
  ModelConfig cfg_;  // before the caches, which keep a reference to it
  AttnShape s_;
  std::unique_ptr<Backend> cpu_;
  Backend& gpu_;
  std::vector<float> qn_host_, kn_host_;
  DevFloats qn_cpu_, kn_cpu_, qn_gpu_, kn_gpu_;
  std::vector<std::unique_ptr<SequenceCache>> cpu_seqs_, gpu_seqs_;
};

// The GPU output rows of sequence `seq` in a step, in position order.
std::vector<float> rows_of(const StepOut& r, int seq, int64_t width, const std::vector<float>& all) {
  std::vector<float> out;
  for (size_t row = 0; row < r.row_seq.size(); ++row)
    if (r.row_seq[row] == seq) out.insert(out.end(), all.begin() + row * width, all.begin() + (row + 1) * width);
  return out;
}

// ---- exactness ----

// A sequence's rows (after qk_norm_rope and attention) are bit-identical alone and in a batch of
// other sequences at other depths, wherever they sit in the step. Re-running a step without
// advancing rewrites the same K/V bits at the same positions, so the caches do not drift.
void check_invariance(Backend& gpu, const Dims& d, double tol = kAttnTol) {
  AttentionRig rig(gpu, d, tol);
  const int x = rig.add_sequence(1000, 41);  // decode row under test
  const int p = rig.add_sequence(129, 42);   // prefill chunk under test
  const int y = rig.add_sequence(4000, 43);  // a long prefill: pushes rows into later launch groups
  std::vector<int> others;
  for (int32_t depth : {0, 1, 255, 4095, 3000, 600}) others.push_back(rig.add_sequence(depth, 50 + depth));

  auto same = [&](const StepOut& alone, const StepOut& batch, int seq, const std::string& what) {
    const auto a = rows_of(alone, seq, rig.o_row(), alone.gpu), b = rows_of(batch, seq, rig.o_row(), batch.gpu);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << d.name << " " << what << ": output";
    const auto ka = rows_of(alone, seq, rig.kv_dim(), alone.gpu_k), kb = rows_of(batch, seq, rig.kv_dim(), batch.gpu_k);
    EXPECT_EQ(std::memcmp(ka.data(), kb.data(), ka.size() * sizeof(float)), 0) << d.name << " " << what << ": k";
  };

  const StepOut x_alone = rig.step({{x, 1}}, 9, false, false);
  same(x_alone, rig.step({{others[0], 1}, {others[1], 1}, {x, 1}, {others[2], 1}, {others[3], 1}}, 9, false, false),
       x, "decode in B=5");
  std::vector<Part> wide;
  for (int o : others) wide.push_back({o, 1});
  wide.push_back({x, 1});
  same(x_alone, rig.step(wide, 9, false, false), x, "decode last of B=7");
  same(x_alone, rig.step({{y, 400}, {others[4], 1}, {x, 1}}, 9, false, false), x, "decode after a 400-row prefill");

  const StepOut p_alone = rig.step({{p, 7}}, 9, false, false);
  same(p_alone, rig.step({{others[3], 1}, {y, 400}, {p, 7}, {x, 1}}, 9, false, false), p, "prefill 7 in a mixed step");
  same(p_alone, rig.step({{p, 7}, {others[5], 1}}, 9, false, false), p, "prefill 7 first in a step");

  // And the batch result still matches the CPU.
  rig.expect_close(rig.step({{others[2], 1}, {p, 7}, {x, 1}}, 9, false), "invariance batch vs CPU");
}

TEST(GpuAttentionBatchInvariance, RowsBitIdenticalAloneAndInBatch) {
  MEMRA_GPU_OR_SKIP(probe);
  for (const bool tc : {false, true}) {
    auto gpu = gpu_with_kv(GgmlType::F16, tc);
    check_invariance(*gpu, k9B);
    check_invariance(*gpu, kTiny);
  }
}

// Prefix reuse (step/prefix_cache.h) resumes a sequence from KV that other steps wrote: a prompt's
// rows prefilled in one chunk must be the bits of the same rows decoded one a step (or prefilled in
// other chunks). Two rigs with the same history take the same input rows, one as a chunk (alone,
// then beside a decode row of another sequence), the other one row a step; outputs, k rows and the
// cache bytes compared. Chunks start on and off a split boundary and cross one.
void check_cut_invariance(Backend& gpu, const Dims& d, int32_t depth, int32_t rows) {
  AttentionRig chunked(gpu, d), stepped(gpu, d);
  for (AttentionRig* rig : {&chunked, &stepped}) {
    rig->add_sequence(depth, 81);
    rig->add_sequence(5, 82);  // the other sequence of the mixed step
  }
  const std::string what =
      std::string(d.name) + " depth " + std::to_string(depth) + ", " + std::to_string(rows) + " rows";
  const auto q = test::normal_floats(static_cast<size_t>(rows * chunked.q_row()), 1.0f, 83);
  const auto k = test::normal_floats(static_cast<size_t>(rows * chunked.kv_dim()), 1.0f, 84);
  const auto v = test::normal_floats(static_cast<size_t>(rows * chunked.kv_dim()), 1.0f, 85);
  // The chunk alone (not advancing: the same rows rewritten next), then after a decode row of sequence 1.
  const StepOut alone = chunked.step_with({{0, rows}}, q, k, v, false, false);
  std::vector<float> q1 = test::normal_floats(static_cast<size_t>(chunked.q_row()), 1.0f, 86), k1, v1;
  k1 = test::normal_floats(static_cast<size_t>(chunked.kv_dim()), 1.0f, 87);
  v1 = test::normal_floats(static_cast<size_t>(chunked.kv_dim()), 1.0f, 88);
  append(q1, q);
  append(k1, k);
  append(v1, v);
  const StepOut mixed = chunked.step_with({{1, 1}, {0, rows}}, q1, k1, v1, true, false);
  std::vector<float> one_by_one, k_one_by_one;
  for (int32_t i = 0; i < rows; ++i) {
    auto slice = [&](const std::vector<float>& x, int64_t w) {
      return std::vector<float>(x.begin() + i * w, x.begin() + (i + 1) * w);
    };
    const StepOut r = stepped.step_with({{0, 1}}, slice(q, stepped.q_row()), slice(k, stepped.kv_dim()),
                                        slice(v, stepped.kv_dim()), true, false);
    append(one_by_one, r.gpu);
    append(k_one_by_one, r.gpu_k);
  }
  const auto a = rows_of(alone, 0, chunked.o_row(), alone.gpu), m = rows_of(mixed, 0, chunked.o_row(), mixed.gpu);
  ASSERT_EQ(a.size(), one_by_one.size()) << what;
  ASSERT_EQ(m.size(), one_by_one.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), one_by_one.data(), a.size() * sizeof(float)), 0) << what << ": chunk vs one a step";
  EXPECT_EQ(std::memcmp(m.data(), one_by_one.data(), m.size() * sizeof(float)), 0)
      << what << ": chunk beside a decode row vs one a step";
  const auto ka = rows_of(alone, 0, chunked.kv_dim(), alone.gpu_k);
  EXPECT_EQ(std::memcmp(ka.data(), k_one_by_one.data(), ka.size() * sizeof(float)), 0) << what << ": k";
  ASSERT_EQ(chunked.pos(0), stepped.pos(0));
  for (const bool vrows : {false, true})
    EXPECT_EQ(test::read_kv_rows(gpu, chunked.gpu_seq(0), kLayer, chunked.pos(0), vrows),
              test::read_kv_rows(gpu, stepped.gpu_seq(0), kLayer, stepped.pos(0), vrows))
        << what << (vrows ? ": V" : ": K") << " cache bytes";
}

TEST(GpuAttentionCutInvariance, PromptRowsGetTheDecodedRowsBits) {
  MEMRA_GPU_OR_SKIP(probe);
  for (const bool tc : {false, true}) {
    auto gpu = gpu_with_kv(GgmlType::F16, tc);
    check_cut_invariance(*gpu, kTiny, 110, 24);  // crosses key 128
    check_cut_invariance(*gpu, kTiny, 0, 12);
    check_cut_invariance(*gpu, kTiny, 256, 9);  // starts on a split
    // Head size 256 (two 16-dim m-tiles a warp in the tensor-core kernel); the emulation runs it
    // for that kernel only (CI's time).
    if (tc || !test::emulated()) check_cut_invariance(*gpu, k9B, 120, 12);
  }
  for (const bool tc : {false, true}) {
    auto q8 = gpu_with_kv(GgmlType::Q8_0, tc);
    check_cut_invariance(*q8, kTiny, 110, 24);
    if (!test::emulated()) check_cut_invariance(*q8, k9B, 120, 12);  // (the emulation: ~20 s more)
  }
}

// Backend::attention_block on the GPU (norm + rope appending k and v, the attention's merge applying
// the gate: two launches) gives the bits of its pieces (qk_norm_rope, attention() with its own
// kv_append, sigmoid_gate_mul): the outputs, the k rows and every cache byte, in decode and
// prefill steps of several sequences, f16 and 8-bit caches, gated and ungated shapes.
void check_block_is_pieces(Backend& gpu, const Dims& d) {
  AttentionRig pieces(gpu, d, kAttnTol, GpuPath::PiecesGated), block(gpu, d, kAttnTol, GpuPath::Block);
  const std::vector<int32_t> depths = {0, 1, 127, 300};
  for (AttentionRig* rig : {&pieces, &block})
    for (size_t i = 0; i < depths.size(); ++i) rig->add_sequence(depths[i], 60 + i);
  const std::vector<std::vector<Part>> steps = {
      {{0, 1}}, {{1, 1}, {2, 1}, {3, 1}, {0, 1}}, {{2, 9}, {0, 1}}, {{3, 130}, {1, 2}}, {{0, 1}, {1, 1}, {2, 1}, {3, 1}}};
  for (size_t k = 0; k < steps.size(); ++k) {
    const StepOut a = pieces.step(steps[k], 70 + k, true, false), b = block.step(steps[k], 70 + k, true, false);
    const std::string what = std::string(d.name) + " step " + std::to_string(k);
    ASSERT_EQ(a.gpu.size(), b.gpu.size());
    EXPECT_EQ(std::memcmp(a.gpu.data(), b.gpu.data(), a.gpu.size() * sizeof(float)), 0) << what << ": output";
    ASSERT_EQ(a.gpu_k.size(), b.gpu_k.size());
    EXPECT_EQ(std::memcmp(a.gpu_k.data(), b.gpu_k.data(), a.gpu_k.size() * sizeof(float)), 0) << what << ": k";
  }
  for (size_t i = 0; i < depths.size(); ++i) {
    const int s = static_cast<int>(i);
    ASSERT_EQ(pieces.pos(s), block.pos(s));
    for (const bool v : {false, true})
      EXPECT_EQ(test::read_kv_rows(gpu, pieces.gpu_seq(s), kLayer, pieces.pos(s), v),
                test::read_kv_rows(gpu, block.gpu_seq(s), kLayer, block.pos(s), v))
          << d.name << " sequence " << s << (v ? " V" : " K") << " cache bytes";
  }
}

TEST(GpuAttentionBlock, FusedLaunchesGiveThePiecesBits) {
  MEMRA_GPU_OR_SKIP(gpu);
  const Dims ungated{"hd128-ungated", 8, 2, 128, 128, false, 1e6f};
  for (const Dims& d : {k9B, kTiny, ungated}) check_block_is_pieces(*gpu, d);
  auto q8 = gpu_with_kv(GgmlType::Q8_0);
  for (const Dims& d : {k9B, ungated}) check_block_is_pieces(*q8, d);
}

// A model whose KV rows do not split into 64-value pieces gets a clear error, not an abort.
TEST(GpuAttentionKvQ8Shape, UnsupportedWidthIsAnError) {
  MEMRA_GPU_OR_SKIP(probe);
  auto gpu = gpu_with_kv(GgmlType::Q8_0);
  const Dims odd{"head-80", 6, 3, 80, 80, true, 1e7f};  // kv_dim 240
  ModelConfig cfg = make_config(odd);
  try {
    SequenceCache cache(*gpu, cfg.cache_shape(gpu->kv_type()), 1024);
    ADD_FAILURE() << "an 8-bit cache of 240-value rows was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MEMRA_CUDA_KV=f16"), std::string::npos) << e.what();
  }
}

// The exactness contract over the 8-bit cache. (Its bytes and attention against the CPU:
// gpu_ops_test.cpp.)
TEST(GpuAttentionQ8Cache, BatchInvariant) {
  MEMRA_GPU_OR_SKIP(probe);
  for (const bool tc : {false, true}) {
    auto gpu = gpu_with_kv(GgmlType::Q8_0, tc);
    check_invariance(*gpu, k9B, kAttnTolQ8);
  }
}

// A shape the tensor-core kernel lacks (more than 8 query heads a KV head) runs the CUDA-core
// kernel: the same bits with CudaOptions::attn_tc on as off.
TEST(GpuAttentionTc, UnsupportedShapeRunsTheCudaCoreKernel) {
  MEMRA_GPU_OR_SKIP(probe);
  const Dims wide{"16-heads-a-kv-head", 16, 1, 64, 64, true, 1e7f};
  auto off = gpu_with_kv(GgmlType::F16, false), on = gpu_with_kv(GgmlType::F16, true);
  AttentionRig a(*off, wide), b(*on, wide);
  a.add_sequence(130, 91);
  b.add_sequence(130, 91);
  const StepOut x = a.step({{0, 3}}, 92, true), y = b.step({{0, 3}}, 92, true, false);
  a.expect_close(x, "CUDA-core kernel vs CPU");
  ASSERT_EQ(x.gpu.size(), y.gpu.size());
  EXPECT_EQ(std::memcmp(x.gpu.data(), y.gpu.data(), x.gpu.size() * sizeof(float)), 0);
}

// Rows twice as deep as the other tests' (66,000 keys: 516 splits, more than two a merge thread
// and more than the merge's 256 threads), decode and prompt rows beside a short sequence, against
// the CPU: Qwen3.5's contexts reach 262,144 keys.
TEST(GpuAttentionLongRow, MergeOverSeveralChunksMatchesCpu) {
  MEMRA_GPU_OR_SKIP(probe);
  constexpr int32_t kDepth = 66000;
  for (const bool tc : {false, true}) {
    auto gpu = gpu_with_kv(GgmlType::F16, tc);
    AttentionRig rig(*gpu, kTiny, kAttnTol, GpuPath::Pieces, kDepth + 16);
    const int deep = rig.add_sequence_written(kDepth, 77), shallow = rig.add_sequence_written(300, 78);
    const std::string kernel = tc ? " (tensor-core split kernel)" : " (CUDA-core split kernel)";
    rig.expect_close(rig.step({{shallow, 1}, {deep, 1}}, 79, true), "decode at depth 66000" + kernel);
    rig.expect_close(rig.step({{deep, 3}}, 80, true), "3 prompt rows at depth 66001" + kernel);
  }
}

// A decode step of mixed depths (StepPlan::mixed_depths: the tensor-core split kernel walks the
// step's work list) gives each row the bits of its step alone (a grid launch), and matches the CPU:
// f16 and 8-bit caches, head sizes 64 and 256 (the tiny shape's 8-bit rows are not 16-byte
// multiples: the forms without staged V). The emulation runs the tiny shape's f16 rows only (CI's time).
TEST(GpuAttentionMixedDepths, ListedStepGivesEachRowItsAloneBits) {
  MEMRA_GPU_OR_SKIP(probe);
  for (const GgmlType kv : {GgmlType::F16, GgmlType::Q8_0})
    for (const Dims* d : {&kTiny, &k9B}) {
      if (test::emulated() && (kv != GgmlType::F16 || d != &kTiny)) continue;
      auto gpu = gpu_with_kv(kv, true);
      AttentionRig rig(*gpu, *d, kv == GgmlType::Q8_0 ? kAttnTolQ8 : kAttnTol);
      const std::vector<int32_t> depths = {3000, 5, 130, 0, 260};
      for (size_t i = 0; i < depths.size(); ++i) rig.add_sequence(depths[i], 70 + i);
      std::vector<Part> all;
      for (size_t i = 0; i < depths.size(); ++i) all.push_back({static_cast<int>(i), 1});
      const std::string what = std::string(d->name) + (kv == GgmlType::Q8_0 ? ", 8-bit cache" : ", f16 cache");
      const StepOut batch = rig.step(all, 71, false);
      rig.expect_close(batch, "mixed-depth decode step, " + what);
      for (size_t i = 0; i < depths.size(); ++i) {
        const int seq = static_cast<int>(i);
        const StepOut alone = rig.step({{seq, 1}}, 71, false, false);
        const auto a = rows_of(alone, seq, rig.o_row(), alone.gpu), b = rows_of(batch, seq, rig.o_row(), batch.gpu);
        ASSERT_EQ(a.size(), b.size());
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
            << what << ": sequence at depth " << depths[i];
      }
    }
}

// A decode graph recorded for one mixed-depth step replays for the next steps of its key, whose
// work lists are longer or shorter as the sequences deepen: the step's tables must stay where the
// recorded kernels read them (CudaBackend checks the recorded DeviceStep at every replay).
TEST(GpuAttentionMixedDepths, ARecordedStepReplaysWhenTheListLengthChanges) {
  MEMRA_GPU_OR_SKIP(probe);
  CudaOptions o = test::gpu_options();
  o.kv_type = GgmlType::F16;
  o.attn_tc = true;
  o.graphs = true;  // whatever MEMRA_CUDA_GRAPHS says
  o.profile = false;
  auto gpu = test::make_gpu_backend(o);
  AttentionRig rig(*gpu, kTiny);
  const std::vector<int32_t> depths = {3000, 5, 130, 0, 260};
  for (size_t i = 0; i < depths.size(); ++i) rig.add_sequence_written(depths[i], 90 + i);  // no step reads them
  const int32_t tok = 0;
  // Every shallow sequence `shift` positions further: one KV block each, four more list entries.
  auto plan_at = [&](int32_t shift) {
    StepPlan p;
    for (size_t i = 0; i < depths.size(); ++i) {
      const int32_t pos0 = rig.pos(static_cast<int>(i)) + (i == 0 ? 0 : shift);
      rig.gpu_seq(static_cast<int>(i)).reserve(pos0 + 1);
      p.add(&rig.gpu_seq(static_cast<int>(i)), &tok, 1, pos0);
    }
    return p;
  };
  const StepPlan a = plan_at(0), b = plan_at(kKvBlock);
  ASSERT_TRUE(a.mixed_depths(kKvBlock) && b.mixed_depths(kKvBlock));
  ASSERT_EQ(bucketed_kv_len(a.max_kv_len()), bucketed_kv_len(b.max_kv_len()));  // one graph key
  constexpr uint64_t kKey = 0x5eed;
  gpu->set_step(a);
  ASSERT_FALSE(gpu->graph_begin(kKey));  // records
  gpu->graph_end();
  gpu->set_step(b);
  EXPECT_TRUE(gpu->graph_begin(kKey));  // replays (a moved table stops here)
  gpu->synchronize();
}

// ---- speed ----

// Decode attention (kv_append + split + combine) of one 9B layer at B sequences of equal depth.
// Cache contents do not change the work, so the caches are reserved but left at zero. Prints
// us per call and the K/V read rate; the floor only catches a pathologically slow kernel (the
// target is most of the ~4.5 TB/s H200 bandwidth at large B). Small B is dominated by launch
// and host overhead here: its kernel time is for a profiler (nsys) to read.
TEST(GpuAttentionPerf, DecodeCostByDepth) {
  MEMRA_GPU_OR_SKIP(gpu);
  const ModelConfig cfg = make_config(k9B);
  const AttnShape s = make_shape(k9B);
  const int64_t q_row = static_cast<int64_t>(s.n_head) * s.q_head_stride, kv = s.n_head_kv * s.head_dim;
  const struct {
    int b;
    int32_t depth;
  } cases[] = {{1, 0}, {1, 4096}, {1, 32767}, {16, 0}, {16, 4096}, {64, 0}, {64, 4096}};
  constexpr int kReps = 20;
  for (const auto& c : cases) {
    std::vector<std::unique_ptr<SequenceCache>> caches;
    StepPlan plan;
    const int32_t tok = 0;
    for (int i = 0; i < c.b; ++i) {
      caches.push_back(std::make_unique<SequenceCache>(*gpu, cfg.cache_shape(gpu->kv_type()), kMaxCtx));
      caches.back()->reserve(c.depth + 1);
      plan.add(caches.back().get(), &tok, 1, c.depth);
    }
    DevFloats q(*gpu, test::normal_floats(static_cast<size_t>(c.b * q_row), 1.0f, 1));
    DevFloats k(*gpu, test::normal_floats(static_cast<size_t>(c.b * kv), 1.0f, 2));
    DevFloats v(*gpu, test::normal_floats(static_cast<size_t>(c.b * kv), 1.0f, 3));
    DevFloats out(*gpu, static_cast<size_t>(c.b * s.n_head * s.head_dim));
    gpu->reset_scratch();
    gpu->set_step(plan);
    const size_t mark = gpu->scratch_mark();
    auto call = [&] {
      gpu->scratch_release(mark);
      gpu->attention(kLayer, q.get(), k.get(), v.get(), out.get(), s);
    };
    for (int i = 0; i < 3; ++i) call();
    gpu->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kReps; ++i) call();
    gpu->synchronize();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kReps;
    const double bytes = 2.0 * c.b * (c.depth + 1.0) * kv * sizeof(uint16_t);
    const double gbs = bytes / us * 1e-3;
    std::printf("[ attention ] 9B layer, B=%d depth %d: %.1f us/call, K/V read %.0f GB/s\n", c.b, c.depth, us, gbs);
    RecordProperty("B" + std::to_string(c.b) + "_depth" + std::to_string(c.depth) + "_us", std::to_string(us));
    if (c.b == 64 && c.depth == 4096) {
      EXPECT_GE(gbs, 500.0) << "decode attention far below memory bandwidth";
    }
  }
}

}  // namespace
}  // namespace memra
