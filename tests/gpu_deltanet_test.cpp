// The CUDA Gated DeltaNet's exactness contract: a sequence's outputs and states do not depend on
// which other sequences share the step, nor where it sits in the batch, nor how its prompt is cut
// into steps. (Against the CPU, states compared: gpu_ops_test.cpp.)
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
const NamedShape kNextTiny{"qwen3next-tiny", make_shape(2, 4, 32, GdnHeadMap::Grouped, GdnGateLayout::GroupedBA)};
// Head sizes off the 128-column tile: several column tiles per head (the RMSNorm after all).
const NamedShape kD96{"d96", make_shape(2, 2, 96, GdnHeadMap::Grouped, GdnGateLayout::GroupedBA)};

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

size_t conv_values(const GdnShape& s) { return static_cast<size_t>(s.conv_kernel - 1) * s.conv_channels(); }
size_t ssm_values(const GdnShape& s) { return static_cast<size_t>(s.n_v) * s.d * s.d; }
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
    st.conv[l] = test::normal_floats(conv_values(s), 1.0f, seed + 10 * l);
    st.ssm[l] = test::normal_floats(ssm_values(s), 0.5f, seed + 10 * l + 1);
  }
  return st;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One backend's side of a test: the layer's weights and n_seqs sequence caches.
class Rig {
 public:
  Rig(Backend& be, const NamedShape& shape, const ModelConfig& cfg, const LayerWeights& w, int n_seqs,
      GgmlType ssm_type = GgmlType::F32)
      : be_(be),
        s_(shape.s),
        conv_w_(be, w.conv_w),
        ssm_a_(be, w.ssm_a),
        dt_bias_(be, w.dt_bias),
        norm_w_(be, w.norm_w) {
    for (int i = 0; i < n_seqs; ++i)
      caches_.push_back(std::make_unique<SequenceCache>(be, cfg.cache_shape(be.kv_type(), ssm_type), 4096));
  }

  void set_state(int i, const SeqState& st) {
    for (int l = 0; l < kLayers; ++l) {
      be_.to_device(caches_[i]->layers[l].conv, st.conv[l].data(), st.conv[l].size() * sizeof(float));
      test::write_ssm(be_, *caches_[i], l, st.ssm[l]);
    }
  }

  SeqState state(int i) {
    be_.synchronize();
    SeqState st;
    for (int l = 0; l < kLayers; ++l) {
      st.conv[l].resize(conv_values(s_));
      be_.to_host(st.conv[l].data(), caches_[i]->layers[l].conv, st.conv[l].size() * sizeof(float));
      st.ssm[l] = test::read_ssm(be_, *caches_[i], l, ssm_values(s_));
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

// A prompt's outputs and state are the same bits however it is cut into steps: one step, steps
// cut anywhere (not only on a grid), or one token per step as decode feeds them. Prefix
// snapshots rely on it: a prompt resumes from the state at any position (step/prefix_cache.h).
// For head size 128 this also holds the two forms of the core to the same bits: steps of
// kGdnPromptFormMinRows (8) rows or more run the prompt form (k_deltanet_prompt.cu), shorter ones the
// fused kernel (k_deltanet.cu).
// bf16 states (MEMRA_SSM_STATE) too: both forms round the state after every row.
TEST(GpuDeltaNetPrefill, SplitsGiveTheBitsOfOneStep) {
  MEMRA_GPU_OR_SKIP(gpu);
  std::vector<std::vector<int>> cuts = {{64, 36}, {37, 63}, {1, 99}, {99, 1}, {5, 50, 3, 42}};
  cuts.push_back(std::vector<int>(100, 1));  // token by token
  for (const GgmlType ssm_type : {GgmlType::F32, GgmlType::BF16})
  for (const NamedShape& shape : {kQwen35_9b, kTiny, kDemo}) {
    const std::string type_name = ssm_type == GgmlType::BF16 ? " (bf16 state)" : "";
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
    Rig whole(*gpu, shape, cfg, w, 1, ssm_type);
    whole.set_state(0, st0);
    const std::vector<float> y_whole = whole.deltanet({0}, {100}, all);
    for (const std::vector<int>& cut : cuts) {
      Rig split(*gpu, shape, cfg, w, 1, ssm_type);
      split.set_state(0, st0);
      std::vector<float> y_split;
      int from = 0;
      for (int rows : cut) {
        const std::vector<float> y = split.deltanet({0}, {rows}, part(from, rows));
        y_split.insert(y_split.end(), y.begin(), y.end());
        from += rows;
      }
      ASSERT_EQ(from, 100);
      const std::string what = std::string(shape.name) + type_name + " cut " + std::to_string(cut[0]) + "+... (" +
                               std::to_string(cut.size()) + " steps)";
      EXPECT_TRUE(same_bits(y_split, y_whole)) << what << ": outputs differ from 100 rows in one step";
      EXPECT_TRUE(same_bits(split.state(0).ssm[kLayer], whole.state(0).ssm[kLayer])) << what << ": state differs";
      EXPECT_TRUE(same_bits(split.state(0).conv[kLayer], whole.state(0).conv[kLayer])) << what << ": conv differs";
    }
  }
}

TEST(GpuDeltaNetBatchInvariance, SequenceBitsIndependentOfBatch) {
  MEMRA_GPU_OR_SKIP(gpu);
  for (const GgmlType ssm_type : {GgmlType::F32, GgmlType::BF16})
  for (const NamedShape& shape : {kQwen35_9b, kNextTiny, kDemo, kD96}) {
    const std::string type_name = ssm_type == GgmlType::BF16 ? " (bf16 state)" : "";
    const GdnShape& s = shape.s;
    const ModelConfig cfg = make_config(s);
    const LayerWeights w = make_weights(s, 90);
    constexpr int kBatch = 9, kX = 4;  // sequence X is cache 4 of the batch, beside 8 others
    Rig alone(*gpu, shape, cfg, w, 1, ssm_type), batch(*gpu, shape, cfg, w, kBatch, ssm_type);
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
        // Another sequence's prompt makes the step run the prompt form (head size 128): X's one
        // row there, and X's prompt beside decode rows.
        {{0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 1, 1, 1, 1, 1, 1, 12}},
        {{4, 0, 1, 2, 3, 5, 6, 7, 8}, {12, 1, 1, 1, 1, 1, 1, 1, 1}},
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
      const std::string what = std::string(shape.name) + type_name + " step " + std::to_string(k);
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
