// Every op the CUDA backend shares with the CPU backend, run on both through the Backend interface
// from one table of cases (in the spirit of llama.cpp's test-backend-ops): an op, real shapes
// (Qwen3.5 2B / 9B / 27B / 35B-A3B and Qwen3-Next from ../shared/shapes.md) and small odd ones, a
// weight / cache type, a value range, a tolerance whose derivation sits beside its constant, and
// whether the op's state (KV cache, conv window, recurrent state) is compared too. One line per
// case: `op shape type: max err / bound  OK|FAIL`.
//
// What the table cannot say stays in the op families' own tests: results bit-identical whatever
// the batch or the cut of a prompt, fused launches against separate ones, perf prints, hostile
// dimensions (gpu_matmul_test.cpp, gpu_attention_test.cpp, gpu_deltanet_test.cpp, gpu_moe_test.cpp);
// the sampler's method and its filter grids against the host sampler (gpu_sampling_test.cpp).
//
// The CUDA emulation (tests/cudasim, CI) is ~1000x slower than a GPU: cases marked kHw run on a
// GPU only; the rest are small enough for CI. The table itself: gpu_ops_cases.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "gpu_ops_cases.h"
#include "gpu_ops_compare.h"
#include "gpu_test_util.h"
#include "model/config.h"
#include "quant/quant.h"
#include "step/sampling.h"
#include "step/sequence_cache.h"
#include "step/step_plan.h"

// A namespace of its own: the unity build puts several test files in one translation unit.
namespace memra::gpu_ops_test {
namespace {

using test::DevFloats;

// ---- inputs ----

std::vector<int64_t> numbers(const char* s) {
  std::vector<int64_t> v;
  std::istringstream in(s);
  for (int64_t x; in >> x;) v.push_back(x);
  return v;
}

// "pos:rows pos:rows; rows rows; ...": each sequence's start position and its rows per step.
struct Steps {
  std::vector<int32_t> start;
  std::vector<std::vector<int32_t>> rows;  // [step][sequence]
};
Steps parse_steps(const char* spec) {
  Steps s;
  std::istringstream steps(spec);
  for (std::string step; std::getline(steps, step, ';');) {
    std::istringstream items(step);
    s.rows.emplace_back();
    for (std::string item; items >> item;) {
      const size_t colon = item.find(':');
      if (s.rows.size() == 1) {
        MEMRA_ASSERT(colon != std::string::npos, "first step items are pos:rows ({})", spec);
        s.start.push_back(std::stoi(item.substr(0, colon)));
        s.rows.back().push_back(std::stoi(item.substr(colon + 1)));
      } else {
        s.rows.back().push_back(std::stoi(item));
      }
    }
    MEMRA_ASSERT(s.rows.back().size() == s.start.size(), "step {} of {}: one count per sequence", s.rows.size(), spec);
  }
  return s;
}

std::vector<float> activations(int64_t rows, int64_t n, Range range, uint64_t seed) {
  auto x = test::normal_floats(static_cast<size_t>(rows * n), 1.0f, seed);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < n; ++k) {
      float& v = x[r * n + k];
      if (range == Range::RowScales) v *= std::ldexp(1.0f, static_cast<int>(r % 9) * 9 - 40);
      if (range == Range::Outliers && k % 509 == 3) v *= 200.0f;
      if (range == Range::Outliers && r == 1) v *= std::ldexp(1.0f, -30);
    }
  return x;
}

using test::HostWeight;
using test::make_weight;
using test::upload;

// sum_k |w_jk x_rk| for every (r, j): the scale of the matmul bound.
std::vector<double> abs_products(const HostWeight& w, const std::vector<float>& x, int64_t rows) {
  const int64_t n_in = w.ref.n_in, n_out = w.ref.n_out;
  std::vector<double> s(static_cast<size_t>(rows * n_out));
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n_out; ++j) {
    std::vector<float> wr(static_cast<size_t>(n_in));
    quant::dequantize_row(w.ref.type, w.bytes.data() + j * w.ref.row_bytes, wr.data(), n_in);
    for (int64_t r = 0; r < rows; ++r) {
      double a = 0;
      for (int64_t k = 0; k < n_in; ++k) a += std::fabs(static_cast<double>(wr[k]) * x[r * n_in + k]);
      s[r * n_out + j] = a;
    }
  }
  return s;
}


// ---- the ops, run on one backend from the case alone (same inputs on both sides) ----

ModelConfig attention_config(const ModelShape& m) {
  ModelConfig cfg;
  cfg.n_layer = 2;
  cfg.n_embd = m.n_head * m.head_dim;
  cfg.n_vocab = 16;
  cfg.rms_eps = 1e-6f;
  cfg.n_head = m.n_head;
  cfg.n_head_kv = m.n_head_kv;
  cfg.head_dim = m.head_dim;
  cfg.n_rot = m.n_rot;
  cfg.rope_theta = m.theta;
  cfg.attn_gated = m.gated;
  cfg.layer_mixer.assign(2, MixerKind::FullAttention);
  return cfg;
}

AttnShape attn_shape(const ModelShape& m) {
  return AttnShape{m.n_head, m.n_head_kv, m.head_dim, m.n_rot, m.theta, m.gated ? 2 * m.head_dim : m.head_dim};
}

Outputs run_rowwise(Backend& be, const Case& c) {
  Outputs outs;
  for (int64_t rows : numbers(c.rows)) {
    const std::string at = " r" + std::to_string(rows);
    be.reset_scratch();
    switch (c.op) {
      case Op::RmsNorm: {
        const auto x = activations(rows, c.n_in, c.range, 52 + rows);
        DevFloats dx(be, x), dw(be, test::random_floats(c.n_in, 0.5f, 1.5f, 53)), out(be, x.size());
        be.rms_norm(dx.get(), dw.vec(), out.get(), rows, c.n_in, 1e-6f);
        const auto y = out.download();
        outs.push_back(bounded("y" + at, y, c.tol, magnitudes(y)));
        break;
      }
      case Op::SiluMul: {
        const int64_t n = rows * c.n_in;
        auto g = test::normal_floats(n, 3.0f, 60 + rows);
        const auto u = activations(rows, c.n_in, c.range, 61 + rows);
        DevFloats dg(be, g), du(be, u), out(be, n);
        be.silu_mul(dg.get(), du.get(), out.get(), n);
        const auto y = out.download();
        outs.push_back(bounded("y" + at, y, c.tol, magnitudes(y)));
        break;
      }
      case Op::SigmoidGate: {
        // The model's layout: gated q rows interleave [q_h | gate_h]; ungated ones keep the gate
        // in rows of their own (stride n_head * head_dim).
        const int nh = c.m->n_head, hd = c.m->head_dim;
        const int64_t gate_row = c.m->gated ? 2 * nh * hd : nh * hd, gate_head = c.m->gated ? 2 * hd : hd;
        const auto o = activations(rows, nh * hd, c.range, 70 + rows);
        DevFloats dout(be, o), dgate(be, test::normal_floats(rows * gate_row, 3.0f, 71 + rows));
        be.sigmoid_gate_mul(dout.get(), dgate.get() + (c.m->gated ? hd : 0), rows, nh, hd, gate_row,
                            static_cast<int>(gate_head));
        const auto y = dout.download();
        outs.push_back(bounded("y" + at, y, c.tol, magnitudes(y)));
        break;
      }
      case Op::GatherRows: {
        const auto x = activations(rows + 5, c.n_in, c.range, 80 + rows);
        std::vector<int32_t> src;
        for (int64_t i = 0; i < rows; ++i) src.push_back(static_cast<int32_t>((i * 3 + 4) % (rows + 5)));
        DevFloats dx(be, x), out(be, rows * c.n_in);
        be.gather_rows(dx.get(), src.data(), rows, c.n_in, out.get());
        outs.push_back(bits("rows" + at, out.download()));
        break;
      }
      case Op::Embed: {
        static HostWeight table;  // one table per case, not per row count
        if (table.ref.type != c.type || table.ref.n_in != c.n_in || table.ref.n_out != c.n_out)
          table = make_weight(c.type, c.n_in, c.n_out, 1, 0.05f, 90);
        const WeightRef w = upload(be, table);
        SequenceCache cache(be, attention_config(*c.m).cache_shape(be.kv_type()), 16);  // the plan names one
        std::vector<int32_t> tokens = {0, static_cast<int32_t>(c.n_out - 1)};
        for (int64_t i = 2; i < rows; ++i) tokens.push_back(static_cast<int32_t>((i * 2654435761u) % c.n_out));
        tokens.resize(static_cast<size_t>(rows));
        StepPlan plan;
        plan.add(&cache, tokens.data(), static_cast<int32_t>(rows), 0);
        be.set_step(plan);
        DevFloats out(be, rows * c.n_in);
        be.embed(w, out.get());
        const auto y = out.download();
        std::vector<double> block_max(y.size());  // the F32 bound's scale: the block's largest value
        for (size_t b = 0; b < y.size(); b += 32) {
          double m = 0;
          for (size_t i = b; i < std::min(y.size(), b + 32); ++i) m = std::max(m, std::fabs(static_cast<double>(y[i])));
          for (size_t i = b; i < std::min(y.size(), b + 32); ++i) block_max[i] = m;
        }
        outs.push_back(bounded("rows" + at, y, c.tol, block_max));
        break;
      }
      default:
        ADD_FAILURE() << "not a row-wise op";
    }
  }
  return outs;
}

Outputs run_matmul(Backend& be, const Case& c) {
  Outputs outs;
  static const Case* made = nullptr;  // one host copy per case (an output head takes seconds)
  static HostWeight w, up;
  if (made != &c) {
    w = make_weight(c.type, c.n_in, c.n_out, 1, 0.05f, 11);
    up = c.op == Op::Swiglu ? make_weight(c.type, c.n_in, c.n_out, 1, 0.05f, 12) : HostWeight{};
    made = &c;
  }
  const WeightRef dw = upload(be, w);
  const WeightRef du = c.op == Op::Swiglu ? upload(be, up) : WeightRef{};
  for (int64_t rows : numbers(c.rows)) {
    const std::string at = " r" + std::to_string(rows);
    auto x = activations(rows, c.n_in, c.range, 100 + rows);
    DevFloats dx(be, x), out(be, std::vector<float>(static_cast<size_t>(rows * c.n_out), NAN));
    be.reset_scratch();
    if (c.op == Op::Matmul) {
      be.matmul(dw, dx.get(), out.get(), rows, 0, false);
    } else if (c.op == Op::NormMatmul) {
      DevFloats nw(be, test::random_floats(c.n_in, 0.5f, 1.5f, 44)), xn(be, x.size());
      const uint64_t token = be.rms_norm(dx.get(), nw.vec(), xn.get(), rows, c.n_in, 1e-6f);
      be.matmul(dw, MatmulInput(xn.get(), token), out.get(), rows, 0, false);
      x = xn.download();  // the bound's activations: the normed rows
    } else {
      be.swiglu(dw, du, dx.get(), out.get(), rows);
    }
    const auto y = out.download();
    std::vector<double> scale;
    if (be.is_cpu() && c.op != Op::Swiglu) scale = abs_products(w, x, rows);
    if (be.is_cpu() && c.op == Op::Swiglu) {
      // act = silu(g) * u from g and u each within the matmul bound E = tol * sum|w x|:
      // |d act| <= max|silu'| E_g |u| + |silu(g)| E_u + E_g E_u (max|silu'| < 1.1), plus the
      // product's rounding (kElemTol |act| <= tol * tol * |act|). In units of tol:
      const auto sg = abs_products(w, x, rows), su = abs_products(up, x, rows);
      std::vector<float> g(y.size()), u(y.size());
      DevFloats dg(be, y.size()), dup(be, y.size());
      be.matmul(dw, dx.get(), dg.get(), rows, 0, false);
      be.matmul(du, dx.get(), dup.get(), rows, 0, false);
      g = dg.download();
      u = dup.download();
      scale.resize(y.size());
      for (size_t i = 0; i < y.size(); ++i)
        scale[i] = 1.1 * sg[i] * std::fabs(u[i]) + std::fabs(g[i] / (1.0 + std::exp(-static_cast<double>(g[i])))) * su[i] +
                   c.tol * sg[i] * su[i] + c.tol * std::fabs(y[i]);
    }
    outs.push_back(bounded("out" + at, y, c.tol, scale));
  }
  return outs;
}

constexpr int kLayer = 1;  // not layer 0, so a wrong layer index into the cache tables shows

Outputs run_qk_norm_rope(Backend& be, const Case& c) {
  const ModelConfig cfg = attention_config(*c.m);
  const AttnShape s = attn_shape(*c.m);
  const Steps st = parse_steps(c.rows);
  std::vector<std::unique_ptr<SequenceCache>> caches;
  StepPlan plan;
  for (size_t i = 0; i < st.start.size(); ++i) {
    // qk_norm_rope reads positions only: the caches need no room.
    caches.push_back(std::make_unique<SequenceCache>(be, cfg.cache_shape(be.kv_type()), 1 << 15));
    const std::vector<int32_t> toks(static_cast<size_t>(st.rows[0][i]), 0);
    plan.add(caches.back().get(), toks.data(), st.rows[0][i], st.start[i]);
  }
  const int64_t rows = plan.n_rows(), q_row = int64_t{s.n_head} * s.q_head_stride, k_row = int64_t{s.n_head_kv} * s.head_dim;
  DevFloats dq(be, test::normal_floats(rows * q_row, 1.0f, 31)), dk(be, test::normal_floats(rows * k_row, 1.0f, 32));
  DevFloats qw(be, test::random_floats(s.head_dim, 0.5f, 1.5f, 33)), kw(be, test::random_floats(s.head_dim, 0.5f, 1.5f, 34));
  be.reset_scratch();
  be.set_step(plan);
  be.qk_norm_rope(dq.get(), dk.get(), qw.vec(), kw.vec(), s, 1e-6f);
  const auto q = dq.download(), k = dk.download();
  Tensor heads = tensor("q,k heads", Metric::SliceL2, c.tol, s.head_dim), gates = bits("gate halves", {});
  for (int64_t r = 0; r < rows; ++r) {
    for (int h = 0; h < s.n_head + s.n_head_kv; ++h) {
      const float* p = h < s.n_head ? &q[r * q_row + h * s.q_head_stride] : &k[r * k_row + (h - s.n_head) * s.head_dim];
      heads.v.insert(heads.v.end(), p, p + s.head_dim);
      heads.scale.push_back(c.tol + kRopeTolPerPos * plan.positions[r]);
      if (h < s.n_head && c.m->gated) gates.v.insert(gates.v.end(), p + s.head_dim, p + 2 * s.head_dim);
    }
  }
  return {heads, gates};
}

// The 8-bit cache form of f32 rows (kv_cache_q8.h): per row the codes round(x * 127 / max|x|) of
// each 32-block, then the blocks' f16 scales max|x| / 127.
std::vector<uint8_t> q8_rows(const float* x, int64_t rows, int64_t kv) {
  std::vector<uint8_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * kv;
    std::vector<uint8_t> codes(static_cast<size_t>(kv)), scales(static_cast<size_t>(kv / 16));
    for (int64_t b = 0; b < kv / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(row[b * 32 + i]));
      const float inv = amax > 0 ? 127.0f / amax : 0.0f;
      for (int i = 0; i < 32; ++i) {
        const float q = std::nearbyint(row[b * 32 + i] * inv);  // ties to even, like __float2int_rn
        codes[b * 32 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)));
      }
      const uint16_t d = quant::f32_to_f16(amax / 127.0f);
      std::memcpy(&scales[2 * b], &d, 2);
    }
    out.insert(out.end(), codes.begin(), codes.end());
    out.insert(out.end(), scales.begin(), scales.end());
  }
  return out;
}

// History: `start` positions of N(0,1) K/V rows per sequence. The GPU appends them through
// attention() in prefill chunks of 512; the CPU gets the same f32 rows copied into its cache
// (CPU prefill attention over thousands of keys at 9B sizes takes minutes, and its outputs are
// not compared). The steps under test go through attention() on both; then every sequence's
// cache (both layers, every position) is compared in the device's form: the CPU's f32 rows
// rounded to f16, or block-quantized, must be the GPU's bytes.
Outputs run_attention(Backend& be, const Case& c) {
  const ModelConfig cfg = attention_config(*c.m);
  const AttnShape s = attn_shape(*c.m);
  const Steps st = parse_steps(c.rows);
  const int64_t q_row = int64_t{s.n_head} * s.q_head_stride, kv = int64_t{s.n_head_kv} * s.head_dim,
                o_row = int64_t{s.n_head} * s.head_dim;
  std::vector<std::unique_ptr<SequenceCache>> seqs;
  auto step = [&](const std::vector<int32_t>& rows, uint64_t seed, std::vector<float>* out_all) {
    StepPlan plan;
    std::vector<float> q, k, v;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] == 0) continue;
      SequenceCache& sc = *seqs[i];
      sc.reserve(sc.pos() + rows[i]);
      const std::vector<int32_t> toks(static_cast<size_t>(rows[i]), 0);
      plan.add(&sc, toks.data(), rows[i], sc.pos());
      const uint64_t ps = (seed * 1000003 + i) * 65537 + sc.pos();
      for (auto [vec, width, salt] : {std::tuple{&q, q_row, 0}, {&k, kv, 1}, {&v, kv, 2}}) {
        const auto part = test::normal_floats(static_cast<size_t>(rows[i] * width), 1.0f, 3 * ps + salt);
        vec->insert(vec->end(), part.begin(), part.end());
      }
    }
    if (plan.n_rows() == 0) return;
    be.reset_scratch();
    be.set_step(plan);
    DevFloats dq(be, q), dk(be, k), dv(be, v), dout(be, std::vector<float>(plan.n_rows() * o_row, NAN));
    if (!out_all && be.is_cpu()) {  // history on the CPU: copied, not computed
      for (const StepSeq& sq : plan.seqs) {
        test::write_kv_rows(be, *sq.cache, kLayer, sq.pos0, sq.n_rows, false, k.data() + sq.row0 * kv);
        test::write_kv_rows(be, *sq.cache, kLayer, sq.pos0, sq.n_rows, true, v.data() + sq.row0 * kv);
      }
    } else {
      be.attention(kLayer, dq.get(), dk.get(), dv.get(), dout.get(), s);
    }
    if (out_all) {
      const auto o = dout.download();
      out_all->insert(out_all->end(), o.begin(), o.end());
    }
    be.synchronize();
    for (const StepSeq& sq : plan.seqs) sq.cache->advance(sq.n_rows);
  };
  for (size_t i = 0; i < st.start.size(); ++i) {
    seqs.push_back(std::make_unique<SequenceCache>(be, cfg.cache_shape(be.is_cpu() ? be.kv_type() : c.type), 1 << 15));
    for (int32_t p0 = 0; p0 < st.start[i]; p0 += 512) {
      std::vector<int32_t> rows(seqs.size(), 0);
      rows[i] = std::min(512, st.start[i] - p0);
      step(rows, 7919 + i, nullptr);
    }
  }
  Tensor out = tensor("out", Metric::SliceL2, c.tol, s.head_dim);
  for (size_t k = 0; k < st.rows.size(); ++k) step(st.rows[k], 20 + k, &out.v);
  Outputs outs = {out};
  if (!c.state) return outs;
  Tensor cache = bits("kv cache", {});
  for (const auto& sq : seqs) {
    for (int layer = 0; layer < 2; ++layer) {
      for (const bool is_v : {false, true}) {
        std::vector<uint8_t> dev = test::read_kv_rows(be, *sq, layer, sq->pos(), is_v);  // the block table's rows
        if (be.is_cpu()) {  // the CPU's f32 rows in the device's form
          std::vector<float> f(static_cast<size_t>(sq->pos() * kv));
          std::memcpy(f.data(), dev.data(), f.size() * sizeof(float));
          dev.clear();
          if (c.type == GgmlType::Q8_0) {
            dev = q8_rows(f.data(), sq->pos(), kv);
          } else {
            for (float x : f) {
              const uint16_t h = quant::f32_to_f16(x);
              dev.insert(dev.end(), reinterpret_cast<const uint8_t*>(&h), reinterpret_cast<const uint8_t*>(&h) + 2);
            }
          }
        }
        for (uint8_t b : dev) cache.v.push_back(b);
      }
    }
  }
  outs.push_back(cache);
  return outs;
}

// Gated DeltaNet: two layers of caches per sequence (the ops run on layer 1; layer 0 must stay as
// it was), random initial conv windows and recurrent states, each sequence advanced to its start.
Outputs run_deltanet(Backend& be, const Case& c) {
  const ModelShape& m = *c.m;
  GdnShape s;
  s.n_k = m.n_k, s.n_v = m.n_v, s.d = m.d, s.conv_kernel = 4, s.head_map = m.map, s.gate_layout = m.gates;
  ModelConfig cfg;
  cfg.n_layer = 2;
  cfg.ssm_n_k = s.n_k, cfg.ssm_n_v = s.n_v, cfg.ssm_d = s.d, cfg.ssm_conv_kernel = s.conv_kernel;
  cfg.full_attention_interval = 3;
  cfg.layer_mixer.assign(2, MixerKind::GatedDeltaNet);
  const int channels = s.conv_channels();
  const size_t conv_n = static_cast<size_t>(s.conv_kernel - 1) * channels, ssm_n = static_cast<size_t>(s.n_v) * s.d * s.d;
  const int64_t beta_w = s.gate_layout == GdnGateLayout::GroupedBA ? 2 * s.n_v : s.n_v, y_w = int64_t{s.n_v} * s.d;
  DevFloats conv_w(be, test::normal_floats(static_cast<size_t>(channels) * s.conv_kernel, 0.3f, 7));
  DevFloats ssm_a(be, test::random_floats(s.n_v, -16.0f, -1.0f, 8));  // -exp(A_log): g <= 0
  DevFloats dt_bias(be, test::random_floats(s.n_v, -1.0f, 1.0f, 9));
  DevFloats norm_w(be, test::random_floats(s.d, 0.5f, 1.5f, 10));
  const Steps st = parse_steps(c.rows);
  // Case type BF16: the recurrent states are bf16 (MEMRA_SSM_STATE), written rounded, read back widened.
  const bool bf16 = c.type == BF16;
  std::vector<std::unique_ptr<SequenceCache>> seqs;
  for (size_t i = 0; i < st.start.size(); ++i) {
    seqs.push_back(std::make_unique<SequenceCache>(be, cfg.cache_shape(be.kv_type(), bf16 ? BF16 : F32), 4096));
    for (int l = 0; l < 2; ++l) {
      be.to_device(seqs[i]->layers[l].conv, test::normal_floats(conv_n, 1.0f, 100 * i + 10 * l).data(), conv_n * 4);
      test::write_ssm(be, *seqs[i], l, test::normal_floats(ssm_n, 0.5f, 100 * i + 10 * l + 1));
    }
    seqs[i]->advance(st.start[i]);
  }
  Tensor y = c.op == Op::Conv ? tensor("out", Metric::TensorL2, c.tol, channels) : tensor("y", Metric::TensorL2, c.tol, y_w);
  for (size_t k = 0; k < st.rows.size(); ++k) {
    StepPlan plan;
    std::vector<float> mixed, z, beta, alpha;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int32_t n = st.rows[k][i];
      if (n == 0) continue;
      const std::vector<int32_t> toks(static_cast<size_t>(n), 0);
      plan.add(seqs[i].get(), toks.data(), n, seqs[i]->pos());
      const uint64_t seed = 500 + 31 * k + 17 * i;
      auto add = [](std::vector<float>& dst, const std::vector<float>& src) { dst.insert(dst.end(), src.begin(), src.end()); };
      add(mixed, test::normal_floats(static_cast<size_t>(n) * channels, 1.0f, seed));
      add(z, test::normal_floats(static_cast<size_t>(n * y_w), 1.0f, seed + 1));
      add(beta, test::normal_floats(static_cast<size_t>(n * beta_w), 1.0f, seed + 2));  // beta in (0, 1), a around 0
      // GroupedBA reads b and a from `beta`: alpha is poison, so reading it would show as NaN.
      add(alpha, s.gate_layout == GdnGateLayout::Separate ? test::normal_floats(static_cast<size_t>(n) * s.n_v, 1.0f, seed + 3)
                                                          : std::vector<float>(static_cast<size_t>(n) * s.n_v, NAN));
    }
    const int64_t rows = plan.n_rows();
    DevFloats dm(be, mixed), dz(be, z), db(be, beta), da(be, alpha);
    DevFloats out(be, std::vector<float>(static_cast<size_t>(rows * (c.op == Op::Conv ? channels : y_w)), NAN));
    be.reset_scratch();
    be.set_step(plan);
    if (c.op == Op::Conv)
      be.conv1d_silu(kLayer, dm.get(), conv_w.vec(), out.get(), channels, s.conv_kernel);
    else
      be.deltanet(kLayer, dm.get(), dz.get(), db.get(), da.get(), conv_w.vec(), ssm_a.vec(), dt_bias.vec(), norm_w.vec(),
                  out.get(), s, 1e-6f);
    const auto o = out.download();
    y.v.insert(y.v.end(), o.begin(), o.end());
    for (const StepSeq& sq : plan.seqs) sq.cache->advance(sq.n_rows);
  }
  Outputs outs = {y};
  if (!c.state) return outs;
  // The recurrent state of the layer run (conv: untouched, so bits), the conv windows (copied
  // inputs: bits), layer 0 as it was.
  Tensor ssm = tensor("ssm state", c.op == Op::Conv ? Metric::Bits : Metric::TensorL2, c.tol, static_cast<int64_t>(ssm_n));
  Tensor other = bits("conv windows + layer 0", {});
  be.synchronize();
  for (const auto& sq : seqs) {
    for (int l = 0; l < 2; ++l) {
      std::vector<float> conv(conv_n);
      be.to_host(conv.data(), sq->layers[l].conv, conv_n * 4);
      const std::vector<float> ssm_l = test::read_ssm(be, *sq, l, ssm_n);
      other.v.insert(other.v.end(), conv.begin(), conv.end());
      (l == kLayer ? ssm.v : other.v).insert((l == kLayer ? ssm.v : other.v).end(), ssm_l.begin(), ssm_l.end());
    }
  }
  if (bf16 && c.op == Op::DeltaNet) {  // the whole state's L2 (kBf16StateTol), and each element (kBf16StateSteps)
    Tensor l2 = tensor("ssm state L2", Metric::SliceL2, c.tol, static_cast<int64_t>(ssm.v.size()), ssm.v);
    outs.push_back(l2);
    ssm.metric = Metric::Bound;
    ssm.tol = kBf16StateSteps;
    ssm.scale = magnitudes(ssm.v);
    double ss = 0;
    for (float x : ssm.v) ss += static_cast<double>(x) * x;
    const double floor = kBf16StateFloor / kBf16StateSteps * std::sqrt(ss / static_cast<double>(ssm.v.size()));
    for (double& s : ssm.scale) s += floor;
  }
  outs.push_back(ssm);
  outs.push_back(other);
  return outs;
}

// The CPU's top-k margin of a row: (p_k - p_k+1) / p_k from the float64 softmax of its logits.
double topk_margin(const HostWeight& router, int n_used, const float* x) {
  const int64_t hidden = router.ref.n_in, n = router.ref.n_out;
  std::vector<double> l(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) l[e] = quant::dot_row(GgmlType::F32, router.bytes.data() + e * router.ref.row_bytes, x, hidden);
  std::sort(l.begin(), l.end(), std::greater<>());
  const double pk = std::exp(l[n_used - 1] - l[0]), pk1 = std::exp(l[n_used] - l[0]);
  return (pk - pk1) / pk;
}

Outputs run_moe(Backend& be, const Case& c) {
  const ModelShape& m = *c.m;
  const int64_t hidden = m.hidden, n_exp = m.n_expert;
  // One host copy per case (the 35B expert stacks take a few seconds to make).
  static const Case* made = nullptr;
  static std::vector<HostWeight> hw;
  if (made != &c) {
    hw.clear();
    hw.push_back(make_weight(F32, hidden, n_exp, 1, 0.2f, 1));
    hw.push_back(make_weight(c.type, hidden, m.expert_ff, n_exp, 0.05f, 2));
    hw.push_back(make_weight(c.type, hidden, m.expert_ff, n_exp, 0.05f, 3));
    hw.push_back(make_weight(c.type, m.expert_ff, hidden, n_exp, 0.05f, 4));
    if (m.shared_ff) {
      hw.push_back(make_weight(c.type, hidden, m.shared_ff, 1, 0.05f, 5));
      hw.push_back(make_weight(c.type, hidden, m.shared_ff, 1, 0.05f, 6));
      hw.push_back(make_weight(c.type, m.shared_ff, hidden, 1, 0.05f, 7));
      hw.push_back(make_weight(F32, hidden, 1, 1, 0.1f, 8));
    }
    made = &c;
  }
  MoeWeights w;
  w.n_expert = m.n_expert;
  w.n_used = m.n_used;
  w.norm_topk = true;
  WeightRef* refs[] = {&w.router, &w.gate_exps, &w.up_exps, &w.down_exps, &w.gate_shexp, &w.up_shexp, &w.down_shexp, &w.shexp_gate};
  for (size_t i = 0; i < hw.size(); ++i) *refs[i] = upload(be, hw[i]);
  Outputs outs;
  for (int64_t rows : numbers(c.rows)) {
    const auto x = activations(rows, hidden, c.range, 40 + rows);
    const auto base = test::normal_floats(static_cast<size_t>(rows * hidden), 1.0f, 41 + rows);
    DevFloats dx(be, x), out(be, base);
    be.reset_scratch();
    be.moe_ffn(w, dx.get(), out.get(), rows, hidden);
    auto y = out.download();
    for (size_t i = 0; i < y.size(); ++i) y[i] -= base[i];  // the FFN's contribution
    Tensor t = tensor("ffn r" + std::to_string(rows), Metric::TensorL2, c.tol, hidden, y);
    if (be.is_cpu())
      for (int64_t r = 0; r < rows; ++r) t.skip.push_back(topk_margin(hw[0], m.n_used, &x[r * hidden]) < kMoeMargin);
    outs.push_back(t);
  }
  return outs;
}

// Logit rows with peaks, ties at the top, -inf and NaN (a row id's kind: r % 4).
std::vector<float> logit_rows(int64_t rows, int64_t n) {
  std::mt19937_64 rng(17 + rows);
  auto l = test::normal_floats(static_cast<size_t>(rows * n), 2.5f, 18 + rows);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = &l[r * n];
    for (int s = 0; s < 3; ++s) row[rng() % n] = 12.0f + s;
    if (r % 4 == 1) row[rng() % n] = row[rng() % n] = 20.0f;  // a tie at the top
    if (r % 4 == 2)
      for (int64_t i = 0; i < n; ++i) row[i] = rng() % 3 == 0 ? -INFINITY : rng() % 17 == 0 ? NAN : row[i];
    if (r % 4 == 3) std::fill(row, row + n, 0.25f);  // flat: the lowest id
  }
  return l;
}

Outputs run_sampling(Backend& be, const Case& c) {
  Outputs outs;
  // A few whole parameter sets (the sampler's own tests walk the grids): temperatures, top-k,
  // top-p, min-p, penalties, a bias and seeds.
  std::vector<SamplingParams> params(4);
  params[1].temperature = 0.7f, params[1].top_k = 40, params[1].top_p = 0.9f, params[1].seed = 42;
  params[2].temperature = 1.0f, params[2].min_p = 0.05f, params[2].repetition_penalty = 1.3f, params[2].seed = 7;
  params[3].temperature = 1.5f, params[3].top_p = 0.5f, params[3].presence_penalty = 0.5f;
  params[3].logit_bias = {{3, 2.5f}, {5, -INFINITY}};
  const std::vector<int32_t> history = {3, 5, 5, 9, 100, 3};
  for (int64_t rows : numbers(c.rows)) {
    const auto l = logit_rows(rows, c.n_out);
    DevFloats dl(be, l);
    std::vector<int32_t> ids(static_cast<size_t>(rows), -7);
    be.reset_scratch();
    if (c.op == Op::Argmax) {
      be.argmax(dl.get(), rows, c.n_out, ids.data());
      outs.push_back(bits("ids r" + std::to_string(rows), std::vector<float>(ids.begin(), ids.end())));
      continue;
    }
    std::vector<RowSampling> rs(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      rs[r].params = &params[r % params.size()];
      rs[r].token_index = static_cast<uint64_t>(r * 37);
      rs[r].history = history.data();
      rs[r].history_len = static_cast<int64_t>(history.size());
    }
    be.sample(dl.get(), rows, c.n_out, rs.data(), ids.data());
    outs.push_back(bits("ids r" + std::to_string(rows), std::vector<float>(ids.begin(), ids.end())));
    outs.push_back(bits("logits after r" + std::to_string(rows), dl.download()));  // left unmodified
  }
  return outs;
}

Outputs run(Backend& be, const Case& c) {
  switch (family(c.op)) {
    case Family::RowWise: return run_rowwise(be, c);
    case Family::Matmul: return run_matmul(be, c);
    case Family::Attention: return c.op == Op::QkNormRope ? run_qk_norm_rope(be, c) : run_attention(be, c);
    case Family::DeltaNet: return run_deltanet(be, c);
    case Family::Moe: return run_moe(be, c);
    case Family::Sampling: return run_sampling(be, c);
  }
  return {};
}

// ---- the driver ----

void run_family(Family f) {
  MEMRA_GPU_OR_SKIP(gpu_default);
  auto cpu = make_cpu_backend();
  // Attention: a backend per cache type (f16, 8-bit) and split kernel (CUDA cores, tensor cores:
  // CudaOptions::attn_tc); every attention case runs with both kernels.
  std::unique_ptr<Backend> gpu_kv[2][2];
  int ran = 0, skipped = 0;
  for (const Case& c : kCases) {
    if (family(c.op) != f) continue;
    if (c.where == kHw && test::emulated()) {
      ++skipped;
      continue;
    }
    const bool both_kernels = c.op == Op::Attention;
    for (const bool tc : {false, true}) {
      if (tc && !both_kernels) continue;
      Backend* gpu = gpu_default.get();
      if (c.op == Op::Attention) {
        auto& be = gpu_kv[c.type == GgmlType::Q8_0][tc];
        CudaOptions o = test::gpu_options();
        o.kv_type = c.type;
        o.attn_tc = tc;
        if (!be) be = test::make_gpu_backend(o);
        gpu = be.get();
        ASSERT_EQ(gpu->kv_type(), c.type);
      }
      const Outputs want = run(*cpu, c), got = run(*gpu, c);
      ASSERT_EQ(want.size(), got.size());
      std::string line, fail;
      bool ok = true;
      for (size_t i = 0; i < want.size(); ++i) {
        const Verdict v = compare(got[i], want[i]);
        char buf[160];
        if (want[i].metric == Metric::Bits)
          std::snprintf(buf, sizeof buf, "%s%s %s", line.empty() ? "" : ", ", want[i].name.c_str(),
                        v.ok ? "bits" : "DIFFER");
        else
          std::snprintf(buf, sizeof buf, "%s%s %.2e / %.2e", line.empty() ? "" : ", ", want[i].name.c_str(), v.err,
                        v.bound);
        line += buf;
        if (!v.ok) fail += " [" + want[i].name + ": " + v.where + "]";
        ok = ok && v.ok;
      }
      const std::string type = std::string(quant::type_name(c.type)) + (tc ? "-tc" : "");
      std::string dims = c.n_in ? std::to_string(c.n_in) : "";
      if (c.n_out) dims += (dims.empty() ? "n=" : "x") + std::to_string(c.n_out);
      if (!dims.empty()) dims += " ";
      std::printf("  %-12s %-10s %-6s %-10s %s%s: %s  %s\n", op_name(c.op), c.m->name, type.c_str(),
                  range_name(c.range), dims.c_str(), c.rows, line.c_str(), ok ? "OK" : "FAIL");
      std::fflush(stdout);
      EXPECT_TRUE(ok) << op_name(c.op) << " " << c.m->name << " " << type << " " << c.rows << ":" << fail;
      ++ran;
    }
  }
  std::printf("  %d cases run, %d on a GPU only\n", ran, skipped);
}

TEST(GpuOps, RowWise) { run_family(Family::RowWise); }
TEST(GpuOps, Matmul) { run_family(Family::Matmul); }
TEST(GpuOps, Attention) { run_family(Family::Attention); }
TEST(GpuOps, DeltaNet) { run_family(Family::DeltaNet); }
TEST(GpuOps, Moe) { run_family(Family::Moe); }
TEST(GpuOps, Sampling) { run_family(Family::Sampling); }

// A family name the table does not use would leave its ops untested: every case belongs to one
// of the TESTs above, and every op has a case the emulation runs (CI) and one at a real shape.
TEST(GpuOpsTable, EveryOpHasCases) {
  for (int op = 0; op <= static_cast<int>(Op::Sample); ++op) {
    bool emulated = false, real = false;
    for (const Case& c : kCases) {
      if (static_cast<int>(c.op) != op) continue;
      emulated = emulated || c.where == kAll;
      real = real || c.m == &k2B || c.m == &k9B || c.m == &k27B || c.m == &k35B || c.m == &kNext;
    }
    EXPECT_TRUE(emulated) << op_name(static_cast<Op>(op)) << ": no case the emulation runs";
    EXPECT_TRUE(real) << op_name(static_cast<Op>(op)) << ": no case at a real model's shape";
  }
}

}  // namespace
}  // namespace memra::gpu_ops_test
