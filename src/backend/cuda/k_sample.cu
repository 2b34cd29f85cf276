// The CUDA sampler's kernels (the method is in sample_row.h): patched values, pass 1 (max and
// greedy), radix-select passes for top-k and top-p, the Gumbel-max pass.
//
// Every pass runs blocks over (segment of `seg` ids, row). The last block of a row to finish
// (a ticket counter per row, reset by that block) combines the row's partial results, so each
// pass is one launch. What is combined is exact - a total order on (value, id), integer sums -
// so a row's token depends neither on the segment size, the block schedule, nor the other rows.
// Only float operations from det_math.h touch the values (no libm, no fast math).
#include "backend/cuda/common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/sample_kernels.h"

namespace memra::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxSeg = 8192;
constexpr int kMinSeg = 1024;
constexpr int kUnroll = 4;         // loads in flight per thread
constexpr int kTieIdsPerThread = 8;  // tie search: consecutive ids per thread per step
static_assert(kThreads == 256, "the Gumbel bound table has one entry per thread (top 8 bits)");
static_assert(kSelectBins % kThreads == 0 && (kSelectBins / 2) % kThreads == 0, "bins split evenly over threads");

struct Best {
  float v;
  int32_t i;  // -1: none
};

__device__ __forceinline__ bool better(Best a, Best b) {
  return a.i >= 0 && (b.i < 0 || a.v > b.v || (a.v == b.v && a.i < b.i));
}

// The best of the block; valid in thread 0. `shared`: kThreads / kWarp entries.
__device__ Best block_best(Best mine, Best* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const Best other{__shfl_xor_sync(0xffffffffu, mine.v, o), __shfl_xor_sync(0xffffffffu, mine.i, o)};
    if (better(other, mine)) mine = other;
  }
  __syncthreads();  // an earlier call may still be reading `shared`
  if (lane == 0) shared[warp] = mine;
  __syncthreads();
  if (warp == 0) {
    mine = lane < kThreads / kWarp ? shared[lane] : Best{0.0f, -1};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const Best other{__shfl_xor_sync(0xffffffffu, mine.v, o), __shfl_xor_sync(0xffffffffu, mine.i, o)};
      if (better(other, mine)) mine = other;
    }
  }
  return mine;
}

// Inclusive scan over the block's threads: from_top sums threads >= t, else threads <= t.
// Every thread gets its value; `scan` (kThreads entries) holds them all on return.
__device__ unsigned long long block_scan(unsigned long long v, unsigned long long* scan, bool from_top) {
  const int t = threadIdx.x;
  __syncthreads();
  scan[t] = v;
  __syncthreads();
  for (int off = 1; off < kThreads; off <<= 1) {
    const int o = from_top ? t + off : t - off;
    const unsigned long long add = (o >= 0 && o < kThreads) ? scan[o] : 0ull;
    __syncthreads();
    v += add;
    scan[t] = v;
    __syncthreads();
  }
  return v;
}

// True in every thread of the row's last block to get here; that block then sees the writes
// (and global atomics) of the row's other blocks.
__device__ bool last_block(unsigned* counter, unsigned n_blocks) {
  __shared__ unsigned ticket;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) ticket = atomicAdd(counter, 1u);
  __syncthreads();
  if (ticket != n_blocks - 1) return false;
  __threadfence();
  return true;
}

// A segment [begin, end) of a row as adjusted logits: raw value, replaced by the patched value
// for the ids in the patch list (a shared bitmap marks them), then -inf where the mask bans it.
struct SegView {
  const float* logits;
  const uint32_t* allowed;
  const int32_t* patch_id;
  const float* patch_val;
  const uint32_t* bits;  // shared, (end - begin) bits; only read when lo < hi
  int64_t begin;
  int lo, hi;  // this segment's entries of the patch list
};

// Block-wide (all threads call it). `bits`: kMaxSeg / 32 shared words.
__device__ SegView seg_view(const SampleRowDesc& d, int g, int64_t begin, int64_t end, uint32_t* bits) {
  SegView v{d.logits, d.allowed, d.patch_id, d.patch_val, bits, begin, 0, 0};
  if (d.n_patch > 0) {  // uniform over the block
    v.lo = d.patch_seg[g];
    v.hi = d.patch_seg[g + 1];
    __syncthreads();  // earlier readers of `bits` are done
    const int words = static_cast<int>((end - begin + 31) / 32);
    for (int w = threadIdx.x; w < words; w += kThreads) bits[w] = 0;
    __syncthreads();
    for (int j = v.lo + threadIdx.x; j < v.hi; j += kThreads) {
      const int off = static_cast<int>(d.patch_id[j] - begin);
      atomicOr(&bits[off >> 5], 1u << (off & 31));
    }
    __syncthreads();
  }
  return v;
}

__device__ __forceinline__ float seg_value(const SegView& v, int64_t i, float raw) {
  float l = raw;
  if (v.hi > v.lo) {
    const int off = static_cast<int>(i - v.begin);
    if ((v.bits[off >> 5] >> (off & 31)) & 1u) {
      int lo = v.lo, hi = v.hi - 1;  // i is in the list: lower bound
      while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (v.patch_id[mid] < i) lo = mid + 1;
        else hi = mid;
      }
      l = v.patch_val[lo];
    }
  }
  if (v.allowed != nullptr && ((__ldg(v.allowed + (i >> 5)) >> (i & 31)) & 1u) == 0) l = -INFINITY;
  return l;
}

// f(id, adjusted logit) for every id of [begin, end) handled by this thread (strided by the
// block, kUnroll loads issued before any is used).
template <class F>
__device__ __forceinline__ void for_segment(const SegView& v, int64_t begin, int64_t end, F&& f) {
  for (int64_t base = begin + threadIdx.x; base < end; base += kThreads * kUnroll) {
    float raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      raw[u] = i < end ? __ldg(v.logits + i) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      if (i < end) f(static_cast<int32_t>(i), seg_value(v, i, raw[u]));
    }
  }
}

// Combines the row's per-segment bests (last block only); valid in thread 0.
__device__ Best combine_parts(const Best* part, int n_seg, Best* shared) {
  Best b{0.0f, -1};
  for (int k = threadIdx.x; k < n_seg; k += kThreads) {
    const Best c{__ldcg(&part[k].v), __ldcg(&part[k].i)};
    if (better(c, b)) b = c;
  }
  return block_best(b, shared);
}

// ---- adjusted values of the patched ids ----

__global__ void k_patch(const SampleRowDesc* __restrict__ desc, const SamplePatchOp* __restrict__ ops, int n_ops,
                        const float* __restrict__ bias, float* __restrict__ out) {
  pdl_enter();
  const int k = blockIdx.x * kThreads + threadIdx.x;
  if (k >= n_ops) return;
  const SamplePatchOp op = ops[k];
  const SampleRowDesc& d = desc[op.row];
  out[k] = adjusted_patch_value(d.logits[op.id], d, op, bias);
}

// ---- pass 1: largest adjusted logit, lowest id on ties (the greedy token) ----

__global__ void __launch_bounds__(kThreads) k_row_max(const SampleRowDesc* __restrict__ desc, SampleRowState* state,
                                                      Best* part, unsigned* counter, int32_t* tokens, int64_t n,
                                                      int seg) {
  pdl_enter();
  __shared__ uint32_t bits[kMaxSeg / 32];
  __shared__ Best red[kThreads / kWarp];
  const int r = blockIdx.y, g = blockIdx.x, n_seg = gridDim.x;
  const int64_t begin = static_cast<int64_t>(g) * seg, end = min(n, begin + seg);
  const SampleRowDesc d = desc[r];
  const SegView v = seg_view(d, g, begin, end, bits);
  Best mine{0.0f, -1};
  for_segment(v, begin, end, [&](int32_t i, float l) {
    const Best c{l, i};
    if (l > -INFINITY && better(c, mine)) mine = c;  // NaN fails the comparison
  });
  mine = block_best(mine, red);
  Best* row_part = part + static_cast<int64_t>(r) * n_seg;
  if (threadIdx.x == 0) row_part[g] = mine;
  if (!last_block(counter + r, n_seg)) return;
  const Best b = combine_parts(row_part, n_seg, red);
  if (threadIdx.x == 0) {
    SampleRowState st;
    start_row(st, d, b.v, b.i);
    state[r] = st;
    if (st.done) tokens[r] = st.token;
    counter[r] = 0;
  }
}

// ---- radix selection (top-k: count weights, top-p: q weights) ----

// The j-th smallest id (j >= 1) of the survivors with key `key`, scanning the row in id order
// (block-wide). Only tie groups cut inside need it: rare, so one block may take its time.
__device__ int32_t tie_search(const SampleRowDesc& d, const SampleRowState& st, uint32_t key, unsigned long long j,
                              int64_t n, int seg, int n_seg, uint32_t* bits, unsigned long long* scan) {
  __shared__ int32_t found;
  if (threadIdx.x == 0) found = -1;
  for (int g = 0; g < n_seg; ++g) {
    const int64_t begin = static_cast<int64_t>(g) * seg, end = min(n, begin + seg);
    const SegView v = seg_view(d, g, begin, end, bits);
    for (int64_t c0 = begin; c0 < end; c0 += kThreads * kTieIdsPerThread) {
      const int64_t first = c0 + static_cast<int64_t>(threadIdx.x) * kTieIdsPerThread;
      unsigned flags = 0;
#pragma unroll
      for (int u = 0; u < kTieIdsPerThread; ++u) {
        const int64_t i = first + u;
        float s;
        if (i < end && row_keeps(st, d.temperature, seg_value(v, i, d.logits[i]), static_cast<int32_t>(i), s) &&
            sample_key(s) == key)
          flags |= 1u << u;
      }
      const unsigned long long count = static_cast<unsigned long long>(__popc(flags));
      const unsigned long long incl = block_scan(count, scan, false);
      if (incl - count < j && j <= incl) {  // exactly one thread
        unsigned f = flags;
        for (unsigned long long k = incl - count + 1; k < j; ++k) f &= f - 1;  // drop the lower ones
        found = static_cast<int32_t>(first + __ffs(static_cast<int>(f)) - 1);
      }
      const unsigned long long total = scan[kThreads - 1];
      __syncthreads();
      if (found >= 0) return found;
      j -= total;
    }
  }
  return -1;
}

// Last block of a selection pass: picks this pass's digit from the row's bins (all threads).
__device__ void select_step(const SampleRowDesc& d, SampleRowState* row_state, int mode, int pass,
                            const unsigned long long* bins, int64_t n, int seg, int n_seg, uint32_t* bits) {
  __shared__ SampleRowState st;
  __shared__ unsigned long long scan[kThreads];
  __shared__ int found_digit;
  __shared__ unsigned long long found_above, tie_j;
  const int t = threadIdx.x;
  const int per = (1 << select_width(pass)) / kThreads;
  unsigned long long mine = 0;
  for (int k = 0; k < per; ++k) mine += bins[t * per + k];
  const unsigned long long from_top = block_scan(mine, scan, true);  // weight of digits >= mine
  if (t == 0) {
    st = *row_state;
    found_digit = -1;
    tie_j = 0;
    if (pass == 0) select_begin(st, d, mode, from_top);
  }
  __syncthreads();
  if (!st.selecting) {
    if (t == 0) *row_state = st;
    return;
  }
  unsigned long long above = 0;
  const int digit = select_find_digit(bins, t * per, (t + 1) * per, st.above + (from_top - mine), st.target, &above);
  if (digit >= 0) {  // one thread: the running weight crosses the target in its bins
    found_digit = digit;
    found_above = above;
  }
  __syncthreads();
  if (t == 0) {
    if (found_digit < 0) {
      st.selecting = 0;  // unreachable: the prefix's bins always reach the target
    } else {
      select_take_digit(st, pass, found_digit, found_above);
      if (pass == kSelectPasses - 1) tie_j = select_finish(st, mode, bins[found_digit]);
    }
  }
  __syncthreads();
  if (tie_j != 0) {
    const SampleRowState s = st;
    const int32_t id = tie_search(d, s, s.prefix, tie_j, n, seg, n_seg, bits, scan);
    if (t == 0 && id >= 0) {
      st.cut_key = s.prefix;
      st.cut_id = id;
    }
  }
  if (t == 0) *row_state = st;
}

__global__ void __launch_bounds__(kThreads) k_select(const SampleRowDesc* __restrict__ desc, SampleRowState* state,
                                                     const int32_t* __restrict__ list, unsigned long long* hist,
                                                     unsigned* counter, int64_t n, int seg, int mode, int pass) {
  pdl_enter();
  __shared__ uint32_t bits[kMaxSeg / 32];
  __shared__ unsigned long long bins[kSelectBins];
  const int r = list[blockIdx.y], g = blockIdx.x, n_seg = gridDim.x;
  const SampleRowState st = state[r];
  if (st.done || (pass > 0 && !st.selecting)) return;  // the same for all blocks of the row
  const SampleRowDesc d = desc[r];
  const int64_t begin = static_cast<int64_t>(g) * seg, end = min(n, begin + seg);
  const int shift = select_shift(pass), n_bins = 1 << select_width(pass);
  // Pass 0 counts every survivor (select_begin resets the prefix in the last block).
  const uint32_t prefix = pass == 0 ? 0u : st.prefix, prefix_mask = pass == 0 ? 0u : st.prefix_mask;
  for (int b = threadIdx.x; b < n_bins; b += kThreads) bins[b] = 0;
  __syncthreads();
  const SegView v = seg_view(d, g, begin, end, bits);
  for_segment(v, begin, end, [&](int32_t i, float l) {
    float s;
    if (!row_keeps(st, d.temperature, l, i, s)) return;
    const uint32_t k = sample_key(s);
    if ((k & prefix_mask) != prefix) return;
    const unsigned long long w = mode == kSelectCount ? 1ull : top_p_weight(s, st.s_max);
    if (w != 0) atomicAdd(&bins[(k >> shift) & (n_bins - 1)], w);  // q = 0: far below the top, adds nothing
  });
  __syncthreads();
  unsigned long long* row_hist = hist + static_cast<int64_t>(r) * kSelectBins;
  for (int b = threadIdx.x; b < n_bins; b += kThreads)
    if (bins[b] != 0) atomicAdd(row_hist + b, bins[b]);
  if (!last_block(counter + r, n_seg)) return;
  for (int b = threadIdx.x; b < n_bins; b += kThreads) {
    bins[b] = __ldcg(row_hist + b);
    row_hist[b] = 0;  // ready for the next pass
  }
  __syncthreads();
  select_step(d, state + r, mode, pass, bins, n, seg, n_seg, bits);
  if (threadIdx.x == 0) counter[r] = 0;
}

// ---- Gumbel-max over the survivors ----

__global__ void __launch_bounds__(kThreads) k_gumbel(const SampleRowDesc* __restrict__ desc,
                                                     const SampleRowState* __restrict__ state,
                                                     const int32_t* __restrict__ list, Best* part, unsigned* counter,
                                                     int32_t* tokens, int64_t n, int seg) {
  pdl_enter();
  __shared__ uint32_t bits[kMaxSeg / 32];
  __shared__ float bound[kThreads];
  __shared__ Best red[kThreads / kWarp];
  __shared__ Best first;
  const int r = list[blockIdx.y], g = blockIdx.x, n_seg = gridDim.x;
  const SampleRowState st = state[r];
  if (st.done) return;
  const SampleRowDesc d = desc[r];
  const int64_t begin = static_cast<int64_t>(g) * seg, end = min(n, begin + seg);
  bound[threadIdx.x] = gumbel_bucket_bound(threadIdx.x);
  if (threadIdx.x == 0) {
    // The argmax id, if it survived, is a candidate whose draw every winner must match: it
    // seeds the running best, so hopeless ids skip their draws from the start.
    Best b{0.0f, -1};
    float s;
    if (row_keeps(st, d.temperature, st.l_max, st.arg, s))
      b = Best{det::add_rn(s, gumbel_noise(d.seed, d.token_index, static_cast<uint32_t>(st.arg))), st.arg};
    first = b;
  }
  const SegView v = seg_view(d, g, begin, end, bits);
  __syncthreads();
  Best mine = first;
  for_segment(v, begin, end, [&](int32_t i, float l) {
    float s;
    if (!row_keeps(st, d.temperature, l, i, s)) return;
    // Skips are strict (<), so a tie, which the lower id would win, is never skipped; rounding
    // is monotone, so s + g <= s + bound.
    if (mine.i >= 0 && det::add_rn(s, kGumbelMax) < mine.v) return;
    const uint32_t x = sampling_bits(d.seed, d.token_index, static_cast<uint32_t>(i));
    if (mine.i >= 0 && det::add_rn(s, bound[x >> 24]) < mine.v) return;
    const Best c{det::add_rn(s, gumbel_from_bits(x)), i};
    if (better(c, mine)) mine = c;
  });
  mine = block_best(mine, red);
  Best* row_part = part + static_cast<int64_t>(r) * n_seg;
  if (threadIdx.x == 0) row_part[g] = mine;
  if (!last_block(counter + r, n_seg)) return;
  const Best b = combine_parts(row_part, n_seg, red);
  if (threadIdx.x == 0) {
    tokens[r] = b.i;
    counter[r] = 0;
  }
}

// Work layout: [counters | histograms] (zeroed before the passes), per-row states, parts.
struct WorkLayout {
  size_t counter, hist, state, part, total;
};

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

WorkLayout work_layout(int64_t rows, int64_t n, int seg) {
  const size_t r = static_cast<size_t>(rows);
  WorkLayout w{};
  w.counter = 0;
  w.hist = align256(r * sizeof(unsigned));
  w.state = w.hist + align256(r * kSelectBins * sizeof(unsigned long long));
  w.part = w.state + align256(r * sizeof(SampleRowState));
  w.total = w.part + align256(r * div_up(n, seg) * sizeof(Best));
  return w;
}

}  // namespace

int sample_segment(int64_t rows, int64_t n) {
  constexpr int64_t kBlocksWanted = 264;  // two per SM of an H200 (132 SMs)
  int seg = kMaxSeg;
  while (seg > kMinSeg && rows * static_cast<int64_t>(div_up(n, seg)) < kBlocksWanted) seg /= 2;
  return seg;
}

size_t sample_work_bytes(int64_t rows, int64_t n, int seg) { return work_layout(rows, n, seg).total; }

void sample_rows(const SampleBatch& b, void* work, cudaStream_t stream) {
  MEMRA_ASSERT(b.rows > 0 && b.rows <= 65535 && b.n > 0 && b.n < (int64_t{1} << 23));
  MEMRA_ASSERT(b.seg >= kMinSeg && b.seg <= kMaxSeg && b.seg % 32 == 0);
  MEMRA_ASSERT(b.n_temp >= 0 && b.n_temp <= b.rows && b.n_topk <= b.n_temp && b.n_topp <= b.n_temp);
  const WorkLayout w = work_layout(b.rows, b.n, b.seg);
  uint8_t* base = static_cast<uint8_t*>(work);
  auto* counter = reinterpret_cast<unsigned*>(base + w.counter);
  auto* hist = reinterpret_cast<unsigned long long*>(base + w.hist);
  auto* state = reinterpret_cast<SampleRowState*>(base + w.state);
  auto* part = reinterpret_cast<Best*>(base + w.part);
  const bool selects = b.n_topk > 0 || b.n_topp > 0;
  CUDA_CHECK(cudaMemsetAsync(base, 0, selects ? w.state : w.hist, stream));

  const unsigned n_seg = div_up(b.n, b.seg);
  if (b.n_ops > 0) {
    launch(k_patch, div_up(b.n_ops, kThreads), kThreads, 0, stream, b.desc, b.ops, b.n_ops, b.bias_values,
           b.patch_values);
    CUDA_LAUNCH_CHECK();
  }
  launch(k_row_max, dim3(n_seg, static_cast<unsigned>(b.rows)), kThreads, 0, stream, b.desc, state, part, counter,
         b.tokens, b.n, b.seg);
  CUDA_LAUNCH_CHECK();
  // top-k before top-p: top-p weighs what top-k (and min-p) kept.
  const struct {
    const int32_t* list;
    int32_t count;
    int mode;
  } phases[2] = {{b.topk_rows, b.n_topk, kSelectCount}, {b.topp_rows, b.n_topp, kSelectTopP}};
  for (const auto& ph : phases) {
    if (ph.count == 0) continue;
    for (int pass = 0; pass < kSelectPasses; ++pass) {
      launch(k_select, dim3(n_seg, static_cast<unsigned>(ph.count)), kThreads, 0, stream, b.desc, state, ph.list, hist,
             counter, b.n, b.seg, ph.mode, pass);
      CUDA_LAUNCH_CHECK();
    }
  }
  if (b.n_temp > 0) {
    launch(k_gumbel, dim3(n_seg, static_cast<unsigned>(b.n_temp)), kThreads, 0, stream, b.desc, state, b.temp_rows,
           part, counter, b.tokens, b.n, b.seg);
    CUDA_LAUNCH_CHECK();
  }
}

}  // namespace memra::cuda
