// CUDA full attention (qk_norm_rope, kv_append, split attention + combine) against the CPU
// reference on real shapes, through the Backend interface, and the exactness contract: a row's
// output is bit-identical whatever else shares the step.
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
const Dims kPlain{"qwen3-plain", 16, 8, 128, 128, false, 1e6f};
const Dims kNext{"qwen3next", 16, 2, 256, 64, true, 1e7f};  // GQA group of 8

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

// A CUDA backend whose KV cache is `kv` (MEMRA_CUDA_KV), or null without a GPU.
std::unique_ptr<Backend> gpu_with_kv(GgmlType kv) {
  CudaOptions o = test::gpu_options();
  o.kv_type = kv;
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

// One model shape, a list of sequences with caches on both backends, and steps over them.
class AttentionRig {
 public:
  AttentionRig(Backend& gpu, const Dims& d, double tol = kAttnTol)
      : tol_(tol),
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
    cpu_seqs_.push_back(std::make_unique<SequenceCache>(*cpu_, cfg_.cache_shape(cpu_->kv_type()), kMaxCtx));
    gpu_seqs_.push_back(std::make_unique<SequenceCache>(gpu_, cfg_.cache_shape(gpu_.kv_type()), kMaxCtx));
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
      const size_t bytes = k.size() * sizeof(float);
      cpu_->to_device(static_cast<float*>(c.layers[kLayer].k) + p0 * kv_dim(), k.data(), bytes);
      cpu_->to_device(static_cast<float*>(c.layers[kLayer].v) + p0 * kv_dim(), v.data(), bytes);
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

  // One step: each part gives `rows` rows of a sequence at its current position, in part order.
  // Inputs are N(0,1), seeded by (seed, sequence, position) only, so a sequence's rows get the
  // same inputs whatever else is in the step. `advance` moves the sequences past the rows.
  StepOut step(const std::vector<Part>& parts, uint64_t seed, bool advance, bool with_cpu = true) {
    StepPlan pc, pg;
    std::vector<float> q, k, v;
    StepOut r;
    for (const Part& p : parts) {
      const int32_t pos0 = pos(p.seq);
      cpu_seqs_[p.seq]->reserve(pos0 + p.rows);
      gpu_seqs_[p.seq]->reserve(pos0 + p.rows);
      const std::vector<int32_t> toks(static_cast<size_t>(p.rows), 0);
      pc.add(cpu_seqs_[p.seq].get(), toks.data(), p.rows, pos0);
      pg.add(gpu_seqs_[p.seq].get(), toks.data(), p.rows, pos0);
      const uint64_t ps = (seed * 1000003 + p.seq) * 65537 + pos0;
      append(q, test::normal_floats(static_cast<size_t>(p.rows * q_row()), 1.0f, 3 * ps));
      append(k, test::normal_floats(static_cast<size_t>(p.rows * kv_dim()), 1.0f, 3 * ps + 1));
      append(v, test::normal_floats(static_cast<size_t>(p.rows * kv_dim()), 1.0f, 3 * ps + 2));
      for (int32_t i = 0; i < p.rows; ++i) {
        r.row_seq.push_back(p.seq);
        r.row_pos.push_back(pos0 + i);
      }
    }
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
  std::vector<float> run(Backend& be, const StepPlan& plan, const DevFloats& qn, const DevFloats& kn,
                         const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                         std::vector<float>* k_after) {
    be.reset_scratch();
    be.set_step(plan);
    DevFloats dq(be, q), dk(be, k), dv(be, v);
    DevFloats dout(be, std::vector<float>(static_cast<size_t>(plan.n_rows() * o_row()), NAN));
    be.qk_norm_rope(dq.get(), dk.get(), qn.vec(), kn.vec(), s_, kEps);
    be.attention(kLayer, dq.get(), dk.get(), dv.get(), dout.get(), s_);
    std::vector<float> out = dout.download();
    if (k_after) *k_after = dk.download();
    return out;
  }

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

// Reads rows [0, n) of a layer's f16 K or V cache of a GPU sequence.
std::vector<uint16_t> read_gpu_cache(Backend& gpu, const void* cache, int64_t n, int64_t kv_dim) {
  std::vector<uint16_t> h(static_cast<size_t>(n * kv_dim));
  gpu.synchronize();
  gpu.to_host(h.data(), cache, h.size() * sizeof(uint16_t));
  return h;
}

// ---- qk_norm_rope ----

TEST(GpuAttentionNormRope, MatchesCpuAndLeavesGatesAlone) {
  MEMRA_GPU_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  // One sequence per start position; the 3-row one gives consecutive positions in one row block.
  const int32_t starts[] = {0, 1, 7, 255, 256, 1000, 4096, 8191, 20000};
  const int32_t rows_of_seq[] = {1, 1, 3, 1, 1, 2, 1, 1, 1};
  for (const Dims& d : {k9B, kTiny, kPlain, kNext}) {
    const ModelConfig cfg = make_config(d);
    const AttnShape s = make_shape(d);
    std::vector<std::unique_ptr<SequenceCache>> caches;
    StepPlan pc, pg;
    for (size_t i = 0; i < std::size(starts); ++i) {
      // qk_norm_rope reads positions only: the caches need no room.
      caches.push_back(std::make_unique<SequenceCache>(*cpu, cfg.cache_shape(cpu->kv_type()), kMaxCtx));
      const std::vector<int32_t> toks(static_cast<size_t>(rows_of_seq[i]), 0);
      pc.add(caches.back().get(), toks.data(), rows_of_seq[i], starts[i]);
      caches.push_back(std::make_unique<SequenceCache>(*gpu, cfg.cache_shape(gpu->kv_type()), kMaxCtx));
      pg.add(caches.back().get(), toks.data(), rows_of_seq[i], starts[i]);
    }
    const int64_t rows = pc.n_rows();
    const int64_t q_row = static_cast<int64_t>(s.n_head) * s.q_head_stride;
    const int64_t k_row = static_cast<int64_t>(s.n_head_kv) * s.head_dim;
    const auto q = test::normal_floats(static_cast<size_t>(rows * q_row), 1.0f, 31);
    const auto k = test::normal_floats(static_cast<size_t>(rows * k_row), 1.0f, 32);
    const auto qw = test::random_floats(s.head_dim, 0.5f, 1.5f, 33);
    const auto kw = test::random_floats(s.head_dim, 0.5f, 1.5f, 34);
    std::vector<float> want_q, want_k, got_q, got_k;
    for (Backend* be : {cpu.get(), gpu.get()}) {
      be->reset_scratch();
      be->set_step(be == cpu.get() ? pc : pg);
      DevFloats dq(*be, q), dk(*be, k), dqw(*be, qw), dkw(*be, kw);
      be->qk_norm_rope(dq.get(), dk.get(), dqw.vec(), dkw.vec(), s, kEps);
      (be == cpu.get() ? want_q : got_q) = dq.download();
      (be == cpu.get() ? want_k : got_k) = dk.download();
    }
    // The rope angle is pos * inv_freq in float on the GPU (double on the CPU): its error is at
    // most pos * 2^-23 radians, weighted by the share of the head in the fastest pairs.
    int bad = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t pos = pc.positions[r];
      const double tol = 1e-5 + 2e-7 * pos;
      for (int h = 0; h < s.n_head + s.n_head_kv; ++h) {
        const bool is_q = h < s.n_head;
        const size_t off = is_q ? r * q_row + h * s.q_head_stride : r * k_row + (h - s.n_head) * s.head_dim;
        const double e = is_q ? slice_err(got_q, want_q, off, s.head_dim) : slice_err(got_k, want_k, off, s.head_dim);
        if (!(e <= tol) && ++bad <= 5)
          ADD_FAILURE() << d.name << ": row " << r << " (position " << pos << ") " << (is_q ? "q" : "k") << " head "
                        << (is_q ? h : h - s.n_head) << " relative error " << e << " > " << tol;
      }
      if (d.gated) {
        for (int h = 0; h < s.n_head; ++h) {
          const size_t off = r * q_row + h * s.q_head_stride + s.head_dim;
          EXPECT_EQ(std::memcmp(&got_q[off], &q[off], s.head_dim * sizeof(float)), 0)
              << d.name << ": gate half of row " << r << " head " << h << " changed";
        }
      }
    }
    EXPECT_EQ(bad, 0) << d.name;
  }
}

// ---- kv_append ----

TEST(GpuAttentionKvAppend, RowsLandAtTheirPositionsRoundedToF16) {
  MEMRA_GPU_OR_SKIP(gpu);
  for (const Dims& d : {k9B, kTiny}) {
    AttentionRig rig(*gpu, d);
    std::vector<float> k_hist, v_hist;
    const int a = rig.add_sequence(700, 5, &k_hist, &v_hist);  // two fill chunks
    const int b = rig.add_sequence(3, 6);
    const int64_t kv = rig.kv_dim();
    auto expect_rows = [&](const void* cache, const std::vector<float>& want, int64_t first, int64_t n,
                           const char* what) {
      const auto got = read_gpu_cache(*gpu, cache, first + n, kv);
      int bad = 0;
      for (int64_t i = 0; i < n * kv; ++i) {
        const uint16_t w = quant::f32_to_f16(want[i]);
        if (got[first * kv + i] != w && ++bad <= 3)
          ADD_FAILURE() << d.name << " " << what << ": element " << i << " of rows from " << first << ": got 0x"
                        << std::hex << got[first * kv + i] << ", want 0x" << w << std::dec;
      }
      EXPECT_EQ(bad, 0) << d.name << " " << what;
    };
    SequenceCache& ga = rig.gpu_seq(a);
    expect_rows(ga.layers[kLayer].k, k_hist, 0, 700, "history K");
    expect_rows(ga.layers[kLayer].v, v_hist, 0, 700, "history V");
    // Layer 0 was never appended to: still the zero fill.
    const auto l0 = read_gpu_cache(*gpu, ga.layers[0].k, 700, kv);
    EXPECT_TRUE(std::all_of(l0.begin(), l0.end(), [](uint16_t x) { return x == 0; })) << d.name << ": layer 0 written";

    // A mixed step: b's decode row first, then 7 rows of a. Each row goes to its own sequence.
    const StepOut r = rig.step({{b, 1}, {a, 7}}, 77, /*advance=*/true, /*with_cpu=*/false);
    const std::vector<float> kb(r.gpu_k.begin(), r.gpu_k.begin() + kv), vb(r.v.begin(), r.v.begin() + kv);
    const std::vector<float> ka(r.gpu_k.begin() + kv, r.gpu_k.end()), va(r.v.begin() + kv, r.v.end());
    expect_rows(rig.gpu_seq(b).layers[kLayer].k, kb, 3, 1, "step K of b");
    expect_rows(rig.gpu_seq(b).layers[kLayer].v, vb, 3, 1, "step V of b");
    expect_rows(ga.layers[kLayer].k, ka, 700, 7, "step K of a");
    expect_rows(ga.layers[kLayer].v, va, 700, 7, "step V of a");
    expect_rows(ga.layers[kLayer].k, k_hist, 0, 700, "history K after the step");
  }
}

// ---- attention vs the CPU ----

// Decode rows whose key counts straddle the 128-key split (and 256), at B = 1, 5 and 16.
void check_decode(Backend& gpu, const Dims& d, bool full, double tol = kAttnTol) {
  AttentionRig rig(gpu, d, tol);
  std::vector<int32_t> depths = {0, 1, 126, 127, 128, 254, 255, 256, 999, 4095};  // keys = depth + 1
  if (full) depths.insert(depths.end(), {2, 33, 500, 2047, 3000, 129});
  std::vector<int> seqs;
  for (size_t i = 0; i < depths.size(); ++i) seqs.push_back(rig.add_sequence(depths[i], 100 + i));
  for (int s : seqs) rig.expect_close(rig.step({{s, 1}}, 1, false), "decode B=1 at depth " + std::to_string(rig.pos(s)));
  rig.expect_close(rig.step({{seqs[9], 1}, {seqs[0], 1}, {seqs[4], 1}, {seqs[7], 1}, {seqs[2], 1}}, 2, false),
                   "decode B=5");
  if (!full) return;
  std::vector<Part> all;
  for (int s : seqs) all.push_back({s, 1});
  std::reverse(all.begin(), all.end());
  ASSERT_EQ(all.size(), 16u);
  // Two consecutive steps: the second reads the rows the first appended (and some caches grow).
  rig.expect_close(rig.step(all, 3, true), "decode B=16, step 1");
  rig.expect_close(rig.step(all, 4, true), "decode B=16, step 2");
}

TEST(GpuAttentionDecode, Qwen35_9B) {
  MEMRA_GPU_OR_SKIP(gpu);
  check_decode(*gpu, k9B, true);
}

TEST(GpuAttentionDecode, TinyFixtureDims) {
  MEMRA_GPU_OR_SKIP(gpu);
  check_decode(*gpu, kTiny, true);
}

TEST(GpuAttentionDecode, PlainQwen3AndGroupOf8) {
  MEMRA_GPU_OR_SKIP(gpu);
  check_decode(*gpu, kPlain, false);
  check_decode(*gpu, kNext, false);
}

// Prefill chunks of 1, 7, 100 and 300 rows on top of existing caches, from empty, and a step
// mixing prefill chunks with decode rows.
void check_prefill(Backend& gpu, const Dims& d, double tol = kAttnTol) {
  AttentionRig rig(gpu, d, tol);
  const int a = rig.add_sequence(1000, 11), b = rig.add_sequence(130, 12), c = rig.add_sequence(257, 13);
  const int e = rig.add_sequence(0, 14), f = rig.add_sequence(1000, 15);
  for (int32_t n : {1, 7, 100, 300})
    rig.expect_close(rig.step({{a, n}}, 20 + n, false), "prefill " + std::to_string(n) + " rows at depth 1000");
  rig.expect_close(rig.step({{b, 300}}, 30, false), "prefill 300 rows at depth 130");
  rig.expect_close(rig.step({{e, 300}}, 31, true), "prefill 300 rows from empty");
  rig.expect_close(rig.step({{c, 7}, {f, 1}, {e, 100}, {a, 1}}, 32, true), "mixed prefill + decode");
  rig.expect_close(rig.step({{e, 1}, {c, 1}}, 33, true), "decode after prefill");
}

TEST(GpuAttentionPrefill, Qwen35_9B) {
  MEMRA_GPU_OR_SKIP(gpu);
  check_prefill(*gpu, k9B);
}

TEST(GpuAttentionPrefill, OtherShapes) {
  MEMRA_GPU_OR_SKIP(gpu);
  for (const Dims& d : {kTiny, kPlain, kNext}) check_prefill(*gpu, d);
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
  MEMRA_GPU_OR_SKIP(gpu);
  check_invariance(*gpu, k9B);
  check_invariance(*gpu, kTiny);
}

// The 8-bit cache: each row's bytes are exactly the block quantization of what was appended
// (codes round(x * 127 / max|x|) then the f16 scales max|x| / 127, kv_cache_q8.h).
std::vector<uint8_t> q8_rows(const std::vector<float>& x, int64_t kv) {
  std::vector<uint8_t> out;
  for (size_t r = 0; r < x.size() / kv; ++r) {
    const float* row = x.data() + r * kv;
    std::vector<uint8_t> codes(static_cast<size_t>(kv)), scales(static_cast<size_t>(kv / 16));
    for (int64_t b = 0; b < kv / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(row[b * 32 + i]));
      const float inv = amax > 0 ? 127.0f / amax : 0.0f;
      for (int i = 0; i < 32; ++i) {
        const float c = std::nearbyint(row[b * 32 + i] * inv);  // ties to even, like __float2int_rn
        codes[b * 32 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(c, -127.0f, 127.0f)));
      }
      const uint16_t d = quant::f32_to_f16(amax / 127.0f);
      std::memcpy(&scales[2 * b], &d, 2);
    }
    out.insert(out.end(), codes.begin(), codes.end());
    out.insert(out.end(), scales.begin(), scales.end());
  }
  return out;
}

TEST(GpuAttentionKvAppendQ8, RowsAreBlockQuantized) {
  MEMRA_GPU_OR_SKIP(probe);
  auto gpu = gpu_with_kv(GgmlType::Q8_0);
  ASSERT_EQ(gpu->kv_type(), GgmlType::Q8_0);
  for (const Dims& d : {k9B, kTiny}) {
    AttentionRig rig(*gpu, d, kAttnTolQ8);
    std::vector<float> k_hist, v_hist;
    const int a = rig.add_sequence(700, 5, &k_hist, &v_hist);
    const int64_t kv = rig.kv_dim(), row_bytes = kv + kv / 16;
    ASSERT_EQ(static_cast<int64_t>(rig.gpu_seq(a).kv_row_bytes), row_bytes);
    for (int which = 0; which < 2; ++which) {
      const std::vector<uint8_t> want = q8_rows(which ? v_hist : k_hist, kv);
      std::vector<uint8_t> got(want.size());
      gpu->synchronize();
      gpu->to_host(got.data(), which ? rig.gpu_seq(a).layers[kLayer].v : rig.gpu_seq(a).layers[kLayer].k, got.size());
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i] && bad++ == 0) first = i;
      EXPECT_EQ(bad, 0u) << d.name << (which ? " V" : " K") << ": first differing byte " << first << " (row "
                         << first / row_bytes << ", byte " << first % row_bytes << ")";
    }
  }
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

// Attention over the 8-bit cache against the CPU's float cache, and its exactness in batches.
TEST(GpuAttentionQ8Cache, MatchesCpuAndIsBatchInvariant) {
  MEMRA_GPU_OR_SKIP(probe);
  auto gpu = gpu_with_kv(GgmlType::Q8_0);
  check_decode(*gpu, k9B, false, kAttnTolQ8);
  check_decode(*gpu, kTiny, false, kAttnTolQ8);
  check_prefill(*gpu, k9B, kAttnTolQ8);
  check_invariance(*gpu, k9B, kAttnTolQ8);
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
