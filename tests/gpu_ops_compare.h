// The op table's outputs (tests/gpu_ops_test.cpp) and how a GPU tensor is compared with its CPU
// twin: bit for bit, per element against a bound the CPU side scales, or by relative L2 over
// slices or whole tensors. One verdict per tensor: the element (or slice) nearest its bound.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace memra::gpu_ops_test {
namespace {

// TensorL2: no element may be off by more than this many times tol x the tensor's rms.
constexpr double kElemFactor = 10;

// ---- outputs and how they compare ----

enum class Metric {
  Bound,     // every element: |gpu - cpu| <= tol * scale[i] (the CPU side supplies scale)
  SliceL2,   // every slice of `slice` elements: relative L2 <= tol (or scale[slice] when given)
  TensorL2,  // relative L2 <= tol, worst element <= kElemFactor * tol * rms; skip[row] rows left out
  Bits,      // identical bits
};

struct Tensor {
  std::string name;
  std::vector<float> v;
  Metric metric = Metric::Bits;
  double tol = 0;
  std::vector<double> scale;
  int64_t slice = 0;          // SliceL2: slice width; TensorL2: row width for skip
  std::vector<uint8_t> skip;  // TensorL2: rows not compared
};

struct Verdict {
  double err = 0, bound = 0;
  bool ok = true;
  std::string where;
};

Verdict compare(const Tensor& got, const Tensor& want) {
  Verdict v;
  if (got.v.size() != want.v.size()) return {INFINITY, 0, false, "sizes differ"};
  const size_t n = want.v.size();
  // Keeps the element (or slice) nearest its bound: the largest err / bound.
  double worst = -1;
  auto worse = [&](double err, double bound, size_t at) {
    const bool ok = err <= bound;  // NaN fails
    const double ratio = !ok ? INFINITY : bound > 0 ? err / bound : 0;
    if (!ok && v.ok) v.where = "at " + std::to_string(at);
    if (ratio > worst && (v.ok || !ok)) worst = ratio, v.err = err, v.bound = bound;
    v.ok = v.ok && ok;
  };
  switch (want.metric) {
    case Metric::Bits: {
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < n; ++i)
        if (std::memcmp(&got.v[i], &want.v[i], sizeof(float)) != 0 && bad++ == 0) first = i;
      v.err = static_cast<double>(bad);
      v.ok = bad == 0;
      if (bad) v.where = std::to_string(bad) + " of " + std::to_string(n) + " differ, first at " + std::to_string(first);
      return v;
    }
    case Metric::Bound:
      for (size_t i = 0; i < n; ++i) {
        const double bound = want.tol * want.scale[i] + (want.tol > 0 ? 1e-30 : 0.0);
        worse(std::fabs(static_cast<double>(got.v[i]) - want.v[i]), bound, i);
      }
      return v;
    case Metric::SliceL2:
      for (size_t s = 0; s * want.slice < n; ++s) {
        double num = 0, den = 0;
        for (size_t i = s * want.slice; i < (s + 1) * want.slice; ++i) {
          const double d = static_cast<double>(got.v[i]) - want.v[i];
          num += d * d;
          den += static_cast<double>(want.v[i]) * want.v[i];
        }
        worse(den == 0 ? std::sqrt(num) : std::sqrt(num / den), want.scale.empty() ? want.tol : want.scale[s],
              s * want.slice);
      }
      return v;
    case Metric::TensorL2: {
      std::vector<float> g, w;
      size_t skipped = 0;
      for (size_t r = 0; r * want.slice < n; ++r) {
        if (!want.skip.empty() && want.skip[r]) {
          ++skipped;
          continue;
        }
        g.insert(g.end(), got.v.begin() + r * want.slice, got.v.begin() + (r + 1) * want.slice);
        w.insert(w.end(), want.v.begin() + r * want.slice, want.v.begin() + (r + 1) * want.slice);
      }
      const size_t rows = n / want.slice;  // at least half of them compared (one of one)
      if (skipped >= std::max<size_t>(rows / 2, 1)) return {INFINITY, 0, false, "too few clear routes to compare"};
      worse(test::rel_err(g, w), want.tol, 0);
      double ss = 0;
      for (float x : w) ss += static_cast<double>(x) * x;
      const double rms = std::sqrt(ss / std::max<size_t>(w.size(), 1));
      for (size_t i = 0; i < w.size(); ++i)
        if (!(std::fabs(static_cast<double>(g[i]) - w[i]) <= kElemFactor * want.tol * rms)) {
          v.ok = false;
          v.where = "element " + std::to_string(i) + " off by more than " + std::to_string(kElemFactor) + " x tol x rms";
          break;
        }
      return v;
    }
  }
  return v;
}

Tensor tensor(std::string name, Metric metric, double tol, int64_t slice = 0, std::vector<float> v = {}) {
  Tensor t;
  t.name = std::move(name);
  t.v = std::move(v);
  t.metric = metric;
  t.tol = tol;
  t.slice = slice;
  return t;
}
Tensor bits(std::string name, std::vector<float> v) { return tensor(std::move(name), Metric::Bits, 0, 0, std::move(v)); }
Tensor bounded(std::string name, std::vector<float> v, double tol, std::vector<double> scale) {
  Tensor t = tensor(std::move(name), Metric::Bound, tol, 0, std::move(v));
  t.scale = std::move(scale);
  return t;
}
std::vector<double> magnitudes(const std::vector<float>& v) {
  std::vector<double> s(v.size());
  for (size_t i = 0; i < v.size(); ++i) s[i] = std::fabs(v[i]);
  return s;
}

using Outputs = std::vector<Tensor>;

}  // namespace
}  // namespace memra::gpu_ops_test
