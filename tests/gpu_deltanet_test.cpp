// The CUDA Gated DeltaNet (conv1d + SiLU window, fused delta-rule core with the gated RMSNorm)
// against the CPU reference through the Backend interface, on real shapes: outputs and the
// updated conv / recurrent states. And the exactness contract: a sequence's bits do not depend
// on which other sequences share the step, nor where it sits in the batch.
//
// Tolerances (L2 relative error over a whole tensor, ||got - want|| / ||want||): the GPU runs
// float32 throughout (dot products over d = 128 key rows in a fixed tree, fmaf), the CPU float64
// rounded to float32 once per token (the recurrent state after every token, as the GPU). One token's float32
// rounding gives ~1e-7..1e-6; the state carries it over later tokens (the decay exp(g) < 1 keeps
// it from growing), so prefill and multi-step runs get a looser bound than one decode step. Each
// check also bounds the worst single element against the tensor's rms, so an error confined to
// one head or one row cannot hide in the L2 norm. The conv state is copied input values: exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "model/config.h"
#include "step/sequence_cache.h"
#include "step/step_plan.h"

// A namespace of its own: in a unity batch (MEMRA_UNITY) with the other GPU tests, their
// shapes and constants (kTiny, kEps, Dims ...) would collide with these.
namespace memra::gpu_deltanet_test {
namespace {

constexpr int kLayers = 2;
constexpr int kLayer = 1;  // the layer the ops run on; layer 0's state must stay untouched
constexpr float kEps = 1e-6f;

// Measured with the kernels' float32 arithmetic replayed on the host (so up to the GPU's expf /
// log1pf ulps): L2 ~7e-8 (conv), ~2e-7 (core, decode and 100-row prefill alike: the decay keeps
// the carried error from growing); worst element ~1.5e-5 rms. The bounds leave 25-50x room.
constexpr double kConvTol = 2e-6;     // 4-tap float fma chain + SiLU vs float64
constexpr double kDecodeTol = 5e-6;   // one token through the core
constexpr double kCarriedTol = 1e-5;  // up to 100 tokens with the state carried in float32
constexpr double kElemFactor = 10;    // worst element may be this many times tol, in units of rms

struct NamedShape {
  const char* name;
  GdnShape s;
};

GdnShape make_shape(int n_k, int n_v, int d, GdnHeadMap map, GdnGateLayout gates) {
  GdnShape s;
  s.n_k = n_k;
  s.n_v = n_v;
  s.d = d;
  s.conv_kernel = 4;
  s.head_map = map;
  s.gate_layout = gates;
  return s;
}

// Qwen3.5-9B (channels 8192), the tiny fixtures, the bundled demo model (d = 64), Qwen3-Next.
const NamedShape kQwen35_9b{"qwen35-9b", make_shape(16, 32, 128, GdnHeadMap::Tiled, GdnGateLayout::Separate)};
const NamedShape kTiny{"qwen35-tiny", make_shape(2, 4, 32, GdnHeadMap::Tiled, GdnGateLayout::Separate)};
const NamedShape kDemo{"demo", make_shape(4, 8, 64, GdnHeadMap::Tiled, GdnGateLayout::Separate)};
const NamedShape kNext80b{"qwen3next-80b", make_shape(16, 32, 128, GdnHeadMap::Grouped, GdnGateLayout::GroupedBA)};
const NamedShape kNextTiny{"qwen3next-tiny", make_shape(2, 4, 32, GdnHeadMap::Grouped, GdnGateLayout::GroupedBA)};
// Head sizes off the 128-column tile: several column tiles per head (the RMSNorm after all).
const NamedShape kD96{"d96", make_shape(2, 2, 96, GdnHeadMap::Grouped, GdnGateLayout::GroupedBA)};
const NamedShape kD256{"d256", make_shape(1, 2, 256, GdnHeadMap::Tiled, GdnGateLayout::Separate)};
const NamedShape kAllShapes[] = {kQwen35_9b, kTiny, kDemo, kNext80b, kNextTiny, kD96, kD256};

ModelConfig make_config(const GdnShape& s) {
  ModelConfig c;
  c.n_layer = kLayers;
  c.ssm_n_k = s.n_k;
  c.ssm_n_v = s.n_v;
  c.ssm_d = s.d;
  c.ssm_conv_kernel = s.conv_kernel;
  c.full_attention_interval = kLayers + 1;
  c.layer_mixer.assign(kLayers, MixerKind::GatedDeltaNet);
  return c;
}

size_t conv_floats(const GdnShape& s) { return static_cast<size_t>(s.conv_kernel - 1) * s.conv_channels(); }
size_t ssm_floats(const GdnShape& s) { return static_cast<size_t>(s.n_v) * s.d * s.d; }
size_t beta_width(const GdnShape& s) { return s.gate_layout == GdnGateLayout::GroupedBA ? 2 * s.n_v : s.n_v; }

struct LayerWeights {
  std::vector<float> conv_w, ssm_a, dt_bias, norm_w;
};

LayerWeights make_weights(const GdnShape& s, uint64_t seed) {
  LayerWeights w;
  w.conv_w = test::normal_floats(static_cast<size_t>(s.conv_channels()) * s.conv_kernel, 0.3f, seed);
  w.ssm_a = test::random_floats(s.n_v, -16.0f, -1.0f, seed + 1);  // -exp(A_log): g <= 0
  w.dt_bias = test::random_floats(s.n_v, -1.0f, 1.0f, seed + 2);
  w.norm_w = test::random_floats(s.d, 0.5f, 1.5f, seed + 3);
  return w;
}

// One sequence's rows of one step.
struct StepInputs {
  int rows = 0;
  std::vector<float> mixed, z, beta, alpha;
};

StepInputs make_inputs(const GdnShape& s, int rows, uint64_t seed) {
  StepInputs in;
  in.rows = rows;
  const size_t r = static_cast<size_t>(rows);
  in.mixed = test::normal_floats(r * s.conv_channels(), 1.0f, seed);
  in.z = test::normal_floats(r * s.n_v * s.d, 1.0f, seed + 1);
  in.beta = test::normal_floats(r * beta_width(s), 1.0f, seed + 2);  // beta in (0, 1), a around 0
  // GroupedBA reads b and a from `beta`: alpha is poison, so reading it would show as NaN.
  in.alpha = s.gate_layout == GdnGateLayout::Separate ? test::normal_floats(r * s.n_v, 1.0f, seed + 3)
                                                      : std::vector<float>(r * s.n_v, NAN);
  return in;
}

StepInputs concat(const std::vector<const StepInputs*>& parts) {
  StepInputs all;
  for (const StepInputs* p : parts) {
    all.rows += p->rows;
    all.mixed.insert(all.mixed.end(), p->mixed.begin(), p->mixed.end());
    all.z.insert(all.z.end(), p->z.begin(), p->z.end());
    all.beta.insert(all.beta.end(), p->beta.begin(), p->beta.end());
    all.alpha.insert(all.alpha.end(), p->alpha.begin(), p->alpha.end());
  }
  return all;
}

// A sequence's conv and recurrent states, every layer.
struct SeqState {
  std::vector<float> conv[kLayers], ssm[kLayers];
};

SeqState make_state(const GdnShape& s, uint64_t seed) {
  SeqState st;
  for (int l = 0; l < kLayers; ++l) {
    st.conv[l] = test::normal_floats(conv_floats(s), 1.0f, seed + 10 * l);
    st.ssm[l] = test::normal_floats(ssm_floats(s), 0.5f, seed + 10 * l + 1);
  }
  return st;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// L2 relative error within tol, and no element off by more than kElemFactor * tol * rms(want).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double err = test::rel_err(got, want);
  EXPECT_LE(err, tol) << what;
  double ss = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ss += static_cast<double>(want[i]) * want[i];
    const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(e <= worst)) {  // NaN counts as worst
      worst = e;
      at = i;
    }
  }
  const double rms = std::sqrt(ss / std::max<size_t>(want.size(), 1));
  EXPECT_LE(worst, kElemFactor * tol * rms) << what << ": element " << at << " got " << got[at] << " want "
                                            << want[at] << " (rms " << rms << ", L2 rel " << err << ")";
}

// One backend's side of a test: the layer's weights and n_seqs sequence caches.
class Rig {
 public:
  Rig(Backend& be, const NamedShape& shape, const ModelConfig& cfg, const LayerWeights& w, int n_seqs)
      : be_(be),
        s_(shape.s),
        conv_w_(be, w.conv_w),
        ssm_a_(be, w.ssm_a),
        dt_bias_(be, w.dt_bias),
        norm_w_(be, w.norm_w) {
    for (int i = 0; i < n_seqs; ++i) caches_.push_back(std::make_unique<SequenceCache>(be, cfg.cache_shape(be.kv_type()), 4096));
  }

  SequenceCache& cache(int i) { return *caches_[i]; }

  void set_state(int i, const SeqState& st) {
    for (int l = 0; l < kLayers; ++l) {
      be_.to_device(caches_[i]->layers[l].conv, st.conv[l].data(), st.conv[l].size() * sizeof(float));
      be_.to_device(caches_[i]->layers[l].ssm, st.ssm[l].data(), st.ssm[l].size() * sizeof(float));
    }
  }

  SeqState state(int i) {
    be_.synchronize();
    SeqState st;
    for (int l = 0; l < kLayers; ++l) {
      st.conv[l].resize(conv_floats(s_));
      st.ssm[l].resize(ssm_floats(s_));
      be_.to_host(st.conv[l].data(), caches_[i]->layers[l].conv, st.conv[l].size() * sizeof(float));
      be_.to_host(st.ssm[l].data(), caches_[i]->layers[l].ssm, st.ssm[l].size() * sizeof(float));
    }
    return st;
  }

  // One step of Backend::deltanet over sequences ids (in that order; rows[k] rows each, their
  // inputs stacked in `in`). Returns y (in.rows x n_v*d) and advances the caches.
  std::vector<float> deltanet(const std::vector<int>& ids, const std::vector<int>& rows, const StepInputs& in) {
    StepPlan plan = make_plan(ids, rows, in.rows);
    test::DevFloats mixed(be_, in.mixed), z(be_, in.z), beta(be_, in.beta), alpha(be_, in.alpha);
    test::DevFloats y(be_, std::vector<float>(static_cast<size_t>(in.rows) * s_.n_v * s_.d, NAN));
    be_.set_step(plan);
    be_.reset_scratch();
    be_.deltanet(kLayer, mixed.get(), z.get(), beta.get(), alpha.get(), conv_w_.vec(), ssm_a_.vec(), dt_bias_.vec(),
                 norm_w_.vec(), y.get(), s_, kEps);
    std::vector<float> out = y.download();
    be_.reset_scratch();
    advance(ids, rows);
    return out;
  }

  // One step of Backend::conv1d_silu alone. Returns out (in.rows x channels).
  std::vector<float> conv(const std::vector<int>& ids, const std::vector<int>& rows, const StepInputs& in) {
    StepPlan plan = make_plan(ids, rows, in.rows);
    test::DevFloats mixed(be_, in.mixed);
    test::DevFloats out(be_, std::vector<float>(in.mixed.size(), NAN));
    be_.set_step(plan);
    be_.conv1d_silu(kLayer, mixed.get(), conv_w_.vec(), out.get(), s_.conv_channels(), s_.conv_kernel);
    std::vector<float> host = out.download();
    advance(ids, rows);
    return host;
  }

 private:
  StepPlan make_plan(const std::vector<int>& ids, const std::vector<int>& rows, int total_rows) {
    StepPlan plan;
    int n = 0;
    for (size_t k = 0; k < ids.size(); ++k) {
      const std::vector<int32_t> tokens(static_cast<size_t>(rows[k]), 0);
      plan.add(caches_[ids[k]].get(), tokens.data(), rows[k], caches_[ids[k]]->pos());
      n += rows[k];
    }
    EXPECT_EQ(n, total_rows);
    return plan;
  }

  void advance(const std::vector<int>& ids, const std::vector<int>& rows) {
    for (size_t k = 0; k < ids.size(); ++k) caches_[ids[k]]->advance(rows[k]);
  }

  Backend& be_;
  GdnShape s_;
  test::DevFloats conv_w_, ssm_a_, dt_bias_, norm_w_;
  std::vector<std::unique_ptr<SequenceCache>> caches_;
};

// The same model and starting states on the CPU and the GPU.
struct Pair {
  Pair(Backend& cpu_be, Backend& gpu_be, const NamedShape& shape, int n_seqs, uint64_t seed)
      : s(shape),
        cfg(make_config(shape.s)),
        w(make_weights(shape.s, seed)),
        cpu(cpu_be, shape, cfg, w, n_seqs),
        gpu(gpu_be, shape, cfg, w, n_seqs) {
    for (int i = 0; i < n_seqs; ++i) {
      initial.push_back(make_state(shape.s, seed * 1000 + 100 * i));
      cpu.set_state(i, initial.back());
      gpu.set_state(i, initial.back());
    }
  }

  // Both sides' states of every sequence: the run layer close (conv exact), layer 0 untouched.
  void check_states(double tol, const std::string& what) {
    for (size_t i = 0; i < initial.size(); ++i) {
      const SeqState want = cpu.state(static_cast<int>(i)), got = gpu.state(static_cast<int>(i));
      const std::string at = what + " seq " + std::to_string(i);
      EXPECT_TRUE(same_bits(got.conv[kLayer], want.conv[kLayer])) << at << ": conv state differs";
      expect_close(got.ssm[kLayer], want.ssm[kLayer], tol, at + ": recurrent state");
      for (int l = 0; l < kLayers; ++l) {
        if (l == kLayer) continue;
        EXPECT_TRUE(same_bits(got.conv[l], initial[i].conv[l])) << at << ": layer " << l << " conv state written";
        EXPECT_TRUE(same_bits(got.ssm[l], initial[i].ssm[l])) << at << ": layer " << l << " state written";
      }
    }
  }

  NamedShape s;
  ModelConfig cfg;
  LayerWeights w;
  Rig cpu, gpu;
  std::vector<SeqState> initial;
};

std::vector<int> iota_ids(int n) {
  std::vector<int> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

// Stacked inputs for sequences with rows[k] rows each.
StepInputs make_step(const GdnShape& s, const std::vector<int>& rows, uint64_t seed) {
  std::vector<StepInputs> parts;
  for (size_t k = 0; k < rows.size(); ++k) parts.push_back(make_inputs(s, rows[k], seed + 17 * k));
  std::vector<const StepInputs*> ptrs;
  for (const auto& p : parts) ptrs.push_back(&p);
  return concat(ptrs);
}

TEST(GpuDeltaNetConv, MatchesCpuAndCarriesWindow) {
  MEMRA_GPU_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  for (const NamedShape& shape : {kQwen35_9b, kTiny}) {
    Pair p(*cpu, *gpu, shape, 4, 7);
    // Fewer rows than the window (1, 2), exactly it (3), more (5); then one row each.
    const std::vector<std::vector<int>> steps = {{1, 2, 5, 3}, {1, 1, 1, 1}, {4, 1, 2, 1}};
    for (size_t k = 0; k < steps.size(); ++k) {
      const StepInputs in = make_step(shape.s, steps[k], 50 + 10 * k);
      const auto want = p.cpu.conv(iota_ids(4), steps[k], in);
      const auto got = p.gpu.conv(iota_ids(4), steps[k], in);
      const std::string what = std::string(shape.name) + " conv step " + std::to_string(k);
      expect_close(got, want, kConvTol, what);
      // The recurrent state is not the conv's business: both sides keep the initial one.
      for (int i = 0; i < 4; ++i)
        EXPECT_TRUE(same_bits(p.gpu.state(i).ssm[kLayer], p.initial[i].ssm[kLayer])) << what;
      for (int i = 0; i < 4; ++i) {
        const SeqState want_st = p.cpu.state(i), got_st = p.gpu.state(i);
        for (int l = 0; l < kLayers; ++l)
          EXPECT_TRUE(same_bits(got_st.conv[l], want_st.conv[l])) << what << " seq " << i << " layer " << l;
      }
    }
  }
}

TEST(GpuDeltaNetDecode, MatchesCpuOnRealShapes) {
  MEMRA_GPU_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  const int positions[] = {0, 17, 1000, 63, 64, 5, 300, 2};
  for (const NamedShape& shape : kAllShapes) {
    for (int b : {1, 3, 8}) {
      Pair p(*cpu, *gpu, shape, b, 20 + b);
      for (int i = 0; i < b; ++i) {
        p.cpu.cache(i).advance(positions[i]);
        p.gpu.cache(i).advance(positions[i]);
      }
      const std::vector<int> rows(static_cast<size_t>(b), 1);
      const StepInputs in = make_step(shape.s, rows, 300 + b);
      const std::string what = std::string(shape.name) + " decode B=" + std::to_string(b);
      expect_close(p.gpu.deltanet(iota_ids(b), rows, in), p.cpu.deltanet(iota_ids(b), rows, in), kDecodeTol,
                   what + " y");
      p.check_states(kDecodeTol, what);
    }
  }
}

TEST(GpuDeltaNetPrefill, MatchesCpuOnRealShapes) {
  MEMRA_GPU_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  // (rows, position of the first row): prompts starting at 0 and off it, of lengths around the
  // 64 rows a chunked form would have used (63 / 64 / 65).
  const std::pair<int, int> cases[] = {{1, 0}, {2, 0}, {7, 0}, {63, 0}, {64, 0}, {65, 0},
                                       {100, 0}, {100, 37}, {40, 31}, {300, 5}};
  for (const NamedShape& shape : {kQwen35_9b, kTiny, kDemo, kNextTiny, kD96, kD256}) {
    for (auto [rows, pos0] : cases) {
      Pair p(*cpu, *gpu, shape, 1, 40 + rows);
      p.cpu.cache(0).advance(pos0);
      p.gpu.cache(0).advance(pos0);
      const StepInputs in = make_inputs(shape.s, rows, 500 + rows);
      const std::string what = std::string(shape.name) + " prefill " + std::to_string(rows) + " rows at " +
                               std::to_string(pos0);
      const double tol = rows == 1 ? kDecodeTol : kCarriedTol;
      expect_close(p.gpu.deltanet({0}, {rows}, in), p.cpu.deltanet({0}, {rows}, in), tol, what + " y");
      p.check_states(tol, what);
    }
  }
}

// A prompt's outputs and state are the same bits however it is cut into steps: one step, steps
// cut anywhere (not only on a grid), or one token per step as decode feeds them. Prefix
// snapshots rely on it: a prompt resumes from the state at any position (step/prefix_cache.h).
TEST(GpuDeltaNetPrefill, SplitsGiveTheBitsOfOneStep) {
  MEMRA_GPU_OR_SKIP(gpu);
  std::vector<std::vector<int>> cuts = {{64, 36}, {37, 63}, {1, 99}, {99, 1}, {5, 50, 3, 42}};
  cuts.push_back(std::vector<int>(100, 1));  // token by token
  for (const NamedShape& shape : {kQwen35_9b, kTiny, kDemo}) {
    const GdnShape& s = shape.s;
    const ModelConfig cfg = make_config(s);
    const LayerWeights w = make_weights(s, 120);
    const SeqState st0 = make_state(s, 121);
    const StepInputs all = make_inputs(s, 100, 122);
    auto part = [&](int from, int rows) {
      StepInputs in;
      in.rows = rows;
      const size_t w_mixed = static_cast<size_t>(s.conv_channels()), w_z = static_cast<size_t>(s.n_v) * s.d,
                   w_b = beta_width(s), w_a = static_cast<size_t>(s.n_v);
      in.mixed.assign(all.mixed.begin() + from * w_mixed, all.mixed.begin() + (from + rows) * w_mixed);
      in.z.assign(all.z.begin() + from * w_z, all.z.begin() + (from + rows) * w_z);
      in.beta.assign(all.beta.begin() + from * w_b, all.beta.begin() + (from + rows) * w_b);
      in.alpha.assign(all.alpha.begin() + from * w_a, all.alpha.begin() + (from + rows) * w_a);
      return in;
    };
    Rig whole(*gpu, shape, cfg, w, 1);
    whole.set_state(0, st0);
    const std::vector<float> y_whole = whole.deltanet({0}, {100}, all);
    for (const std::vector<int>& cut : cuts) {
      Rig split(*gpu, shape, cfg, w, 1);
      split.set_state(0, st0);
      std::vector<float> y_split;
      int from = 0;
      for (int rows : cut) {
        const std::vector<float> y = split.deltanet({0}, {rows}, part(from, rows));
        y_split.insert(y_split.end(), y.begin(), y.end());
        from += rows;
      }
      ASSERT_EQ(from, 100);
      const std::string what = std::string(shape.name) + " cut " + std::to_string(cut[0]) + "+... (" +
                               std::to_string(cut.size()) + " steps)";
      EXPECT_TRUE(same_bits(y_split, y_whole)) << what << ": outputs differ from 100 rows in one step";
      EXPECT_TRUE(same_bits(split.state(0).ssm[kLayer], whole.state(0).ssm[kLayer])) << what << ": state differs";
      EXPECT_TRUE(same_bits(split.state(0).conv[kLayer], whole.state(0).conv[kLayer])) << what << ": conv differs";
    }
  }
}

TEST(GpuDeltaNetSteps, StateCarriedAcrossSteps) {
  MEMRA_GPU_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  for (const NamedShape& shape : {kQwen35_9b, kTiny, kNext80b}) {
    Pair p(*cpu, *gpu, shape, 3, 60);
    // Three prompts prefilled together, decode steps, then a mixed step.
    std::vector<std::vector<int>> steps = {{12, 5, 30}};
    for (int k = 0; k < 6; ++k) steps.push_back({1, 1, 1});
    steps.push_back({3, 1, 2});
    for (size_t k = 0; k < steps.size(); ++k) {
      const StepInputs in = make_step(shape.s, steps[k], 700 + 31 * k);
      const std::string what = std::string(shape.name) + " step " + std::to_string(k);
      expect_close(p.gpu.deltanet(iota_ids(3), steps[k], in), p.cpu.deltanet(iota_ids(3), steps[k], in),
                   kCarriedTol, what + " y");
    }
    p.check_states(kCarriedTol, std::string(shape.name) + " after steps");
  }
}

TEST(GpuDeltaNetBatchInvariance, SequenceBitsIndependentOfBatch) {
  MEMRA_GPU_OR_SKIP(gpu);
  for (const NamedShape& shape : {kQwen35_9b, kNextTiny, kDemo, kD96}) {
    const GdnShape& s = shape.s;
    const ModelConfig cfg = make_config(s);
    const LayerWeights w = make_weights(s, 90);
    constexpr int kBatch = 9, kX = 4;  // sequence X is cache 4 of the batch, beside 8 others
    Rig alone(*gpu, shape, cfg, w, 1), batch(*gpu, shape, cfg, w, kBatch);
    const SeqState x0 = make_state(s, 91);
    alone.set_state(0, x0);
    for (int i = 0; i < kBatch; ++i) batch.set_state(i, i == kX ? x0 : make_state(s, 200 + i));
    // (order of the batch, rows of each sequence in that order): X in the middle, first, last;
    // decode and prefill rows mixed.
    const std::vector<std::pair<std::vector<int>, std::vector<int>>> steps = {
        {{0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
        {{4, 0, 1, 2, 3, 5, 6, 7, 8}, {1, 2, 1, 7, 1, 1, 3, 1, 1}},
        {{0, 1, 2, 3, 5, 6, 7, 8, 4}, {5, 1, 1, 1, 1, 1, 1, 1, 7}},
        {{8, 7, 6, 4, 5, 3, 2, 1, 0}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    };
    for (size_t k = 0; k < steps.size(); ++k) {
      const auto& [order, rows] = steps[k];
      std::vector<StepInputs> parts;
      int x_row0 = 0, x_rows = 0;
      for (size_t j = 0; j < order.size(); ++j) {
        parts.push_back(make_inputs(s, rows[j], 1000 * (k + 1) + order[j]));
        if (order[j] == kX) x_rows = rows[j];
        if (x_rows == 0) x_row0 += rows[j];
      }
      std::vector<const StepInputs*> ptrs;
      const StepInputs* x_in = nullptr;
      for (size_t j = 0; j < parts.size(); ++j) {
        ptrs.push_back(&parts[j]);
        if (order[j] == kX) x_in = &parts[j];
      }
      const auto y_alone = alone.deltanet({0}, {x_rows}, *x_in);
      const auto y_batch = batch.deltanet(order, rows, concat(ptrs));
      const size_t width = static_cast<size_t>(s.n_v) * s.d;
      const std::vector<float> y_x(y_batch.begin() + x_row0 * width, y_batch.begin() + (x_row0 + x_rows) * width);
      const std::string what = std::string(shape.name) + " step " + std::to_string(k);
      EXPECT_TRUE(same_bits(y_x, y_alone)) << what << ": y differs alone vs batched";
      const SeqState st_alone = alone.state(0), st_batch = batch.state(kX);
      EXPECT_TRUE(same_bits(st_batch.ssm[kLayer], st_alone.ssm[kLayer])) << what << ": recurrent state differs";
      EXPECT_TRUE(same_bits(st_batch.conv[kLayer], st_alone.conv[kLayer])) << what << ": conv state differs";
      // Every output of X was written (y starts as NaN).
      EXPECT_TRUE(std::all_of(y_alone.begin(), y_alone.end(), [](float v) { return std::isfinite(v); })) << what;
    }
  }
}

}  // namespace
}  // namespace memra::gpu_deltanet_test
