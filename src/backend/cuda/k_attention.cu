// Causal attention of each row's query heads over its sequence's KV cache (keys 0..pos), f16 or
// 8-bit, read through the sequence's block table (step/kv_blocks.h).
//
// A gated attention's output gate (AttnOutGate) is applied by kernel 2 as it writes a row: the bits
// of sigmoid_gate_mul on that row, one launch fewer.
//
// Exactness: a row's keys are cut into splits of kSplit keys counted from key 0, so the splits of
// a row depend only on its own position. Kernel 1 runs one block per (row, kv head, head group,
// split); it reads each K/V row of the split once for all query heads of its group and writes the
// split's (max, sum of exp, unnormalised weighted V sum). Kernel 2 merges a row's splits in a
// tree whose shape depends only on that row's split count. Nothing in either kernel (reduction
// order, split boundaries, which lane sums what) depends on other rows, the number of rows or
// sequences, or the longest sequence; the grid is sized from the longest one and surplus blocks
// exit before doing anything. This split step serves the shapes k_attention_tc.cu lacks (head sizes
// other than 64 / 128 / 256, more than 8 query heads a KV head); the tensor-core one (another
// rounding order, the same partials and merge) takes every row of the shapes it supports.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cuda/common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache_q8.h"
#include "step/kv_blocks.h"

namespace memra::cuda {
namespace {

constexpr int kSplit = 128;                   // keys per split (a constant: see the file comment)
// A split reads exactly one KV block (step/kv_blocks.h): its base pointer is read once from the
// sequence's block table, and the split boundaries (hence every reduction) are what they were
// with one contiguous buffer.
static_assert(kSplit == kKvBlock, "the attention split must be one KV block");
constexpr int kAttnWarps = 8;
constexpr int kAttnThreads = kAttnWarps * kWarp;
constexpr int kCombineThreads = 256;
// Rows are launched in groups so the split partials of one group stay under this many floats
// (prefill chunks at long contexts would otherwise need gigabytes). Grouping cannot change a
// row's numbers: each row is computed on its own.
constexpr int64_t kWorkCapFloats = int64_t{32} << 20;

// How a warp walks a split. Each lane loads 16 bytes (8 halves) of a K or V row, so a row of HD
// halves takes HD/8 lanes and a warp covers kKeysPerSlot keys per load; kSlots loads per lane are
// in flight before any arithmetic, so a warp takes kChunk consecutive keys at a time. Chunks go to
// warps round robin.
template <int HD, int GB>
struct Tile {
  static constexpr int kLanesPerKey = HD / 8;
  static constexpr int kKeysPerSlot = kWarp / kLanesPerKey;
  static constexpr int kSlots = GB * 8 <= 32 ? 8 : 4;  // bounds the partial dots a lane holds
  static constexpr int kChunk = kSlots * kKeysPerSlot;
  static constexpr int kChunks = kSplit / kChunk;
  static_assert(kLanesPerKey >= 1 && kLanesPerKey <= kWarp && kWarp % kLanesPerKey == 0);
  static_assert(kSplit % kChunk == 0);
};

__device__ __forceinline__ uint4 load16(const __half* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

// A lane's 8 consecutive dims (from `col`, a multiple of 8) of row t of a block's K or V rows
// (`cache`: the block's first K row, or its first V row), as loaded. f16 rows:
// the 16 bytes. 8-bit rows (kv_cache_q8.h): the 8 codes in .x/.y and the block's f16 scale in .z.
template <bool Q8>
__device__ __forceinline__ uint4 load_kv(const uint8_t* cache, int64_t t, int64_t kv_dim, int64_t col) {
  if constexpr (!Q8) {
    return load16(reinterpret_cast<const __half*>(cache + t * 2 * kv_dim) + col);
  } else {
    const uint8_t* row = cache + t * kv_q8_row_bytes(kv_dim);
    const uint32_t* q = reinterpret_cast<const uint32_t*>(row + col);  // 4-byte aligned: kv_dim % 64 == 0
    const uint16_t d = __ldg(reinterpret_cast<const uint16_t*>(row + kv_dim) + col / 32);
    return make_uint4(__ldg(q), __ldg(q + 1), d, 0);
  }
}

__device__ __forceinline__ void unpack8(const uint4& r, float (&f)[8]) {
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    __half2 h;
    static_assert(sizeof(h) == sizeof(w[j]));
    memcpy(&h, &w[j], sizeof(h));
    const float2 t = __half22float2(h);
    f[2 * j] = t.x;
    f[2 * j + 1] = t.y;
  }
}

// The 8 floats of a load_kv result: f16 values, or code * scale (an all-zero load gives zeros).
template <bool Q8>
__device__ __forceinline__ void unpack_kv(const uint4& r, float (&f)[8]) {
  if constexpr (!Q8) {
    unpack8(r, f);
  } else {
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(r.z)));
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t w = j < 4 ? r.x : r.y;
      const int code = static_cast<int8_t>((w >> (8 * (j % 4))) & 0xFF);
      f[j] = __fmul_rn(d, static_cast<float>(code));
    }
  }
}

// Sums each of the N values v[0..N) over the lanes of an aligned group of 2*O lanes (xor
// offsets O, O/2, .., 1) and leaves every lane with the totals of a slice of them: afterwards
// v[j] for j < rs_count<N, O>() is the total of index first + j. A stage with an even count
// exchanges half (the lane whose offset bit is set keeps the upper half); an odd count is summed
// whole, so both partners hold it (rs_dup_mask has those offset bits). The tree is fixed.
template <int N, int O>
__device__ __forceinline__ void reduce_scatter(float* v, int lane, int& first) {
  if constexpr (O > 0) {
    if constexpr (N % 2 == 0) {
      constexpr int H = N / 2;
      const bool upper = (lane & O) != 0;
#pragma unroll
      for (int j = 0; j < H; ++j) {
        const float send = upper ? v[j] : v[j + H];
        const float keep = upper ? v[j + H] : v[j];
        v[j] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, O));
      }
      if (upper) first += H;
      reduce_scatter<H, O / 2>(v, lane, first);
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = __fadd_rn(v[j], __shfl_xor_sync(0xffffffffu, v[j], O));
      reduce_scatter<N, O / 2>(v, lane, first);
    }
  }
}

template <int N, int O>
__host__ __device__ constexpr int rs_count() {
  if constexpr (O == 0) return N;
  else if constexpr (N % 2 == 0) return rs_count<N / 2, O / 2>();
  else return rs_count<N, O / 2>();
}

template <int N, int O>
__host__ __device__ constexpr int rs_dup_mask() {
  if constexpr (O == 0) return 0;
  else if constexpr (N % 2 == 0) return rs_dup_mask<N / 2, O / 2>();
  else return O | rs_dup_mask<N, O / 2>();
}

// One block per (row of the group, kv head x head group, split). GB query heads share the block.
// part_o: [rows][n_head][max_splits][HD]; part_ml: [rows][n_head][max_splits][2] (max, sum).
// 3 blocks an SM (ptxas: at most 80 registers, 24-40 bytes of stack at GB = 4, which took 104 at 2):
// Nsight found the kernel register-bound at 2 (25% occupancy); measured 9B B = 64 depth 4096 +2%,
// B = 16 +1%, flat at B = 1 and depth 32000 (bench/results/2026-12-05-0412-h200-s28-attn-combine-slices.log).
template <int HD, int GB, bool Q8>
__global__ void __launch_bounds__(kAttnThreads, 3)
    attention_split_kernel(int layer, const float* __restrict__ q, const DeviceStep step, int64_t row0, int n_head,
                           int n_head_kv, int q_head_stride, int heads_per_kv, int max_splits, float scale,
                           float* __restrict__ part_o, float* __restrict__ part_ml) {
  pdl_enter();
  using T = Tile<HD, GB>;
  __shared__ float sc[GB][kSplit];                     // scores of the split, then exp(score - max)
  __shared__ float4 stage[kAttnWarps / 2][GB * HD / 4];  // warp-tree staging of the V sums
  __shared__ float stat[GB][2];

  const int64_t lrow = blockIdx.x;
  const int64_t row = row0 + lrow;
  const int groups = heads_per_kv / GB;
  const int kvh = static_cast<int>(blockIdx.y) / groups;
  const int h0 = kvh * heads_per_kv + (static_cast<int>(blockIdx.y) % groups) * GB;
  const int split = blockIdx.z;
  const int n_keys = step.positions[row] + 1;
  if (split * kSplit >= n_keys) return;  // beyond this row's splits (whole block)
  const int t0 = split * kSplit;
  const int nk = min(kSplit, n_keys - t0);  // keys t0 .. t0+nk-1, at least one

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int sub = lane % T::kLanesPerKey;  // which 8 dims of a row this lane owns
  const int kg = lane / T::kLanesPerKey;   // which key of a load slot
  const int64_t kv_dim = static_cast<int64_t>(n_head_kv) * HD;
  const int64_t slot = static_cast<int64_t>(layer) * step.n_seqs + step.row_seq[row];
  // The split's block: kSplit K rows, then kSplit V rows (keys t0 + t are its rows t).
  const uint8_t* kc = step.kv_blocks[slot][split];
  const uint8_t* vc = kc + kSplit * (Q8 ? kv_q8_row_bytes(kv_dim) : 2 * kv_dim);
  const int64_t col = static_cast<int64_t>(kvh) * HD + sub * 8;  // the lane's first dim in a row

  float qr[GB][8];
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    const float4* qp = reinterpret_cast<const float4*>(q + (row * n_head + h0 + g) * q_head_stride + sub * 8);
    const float4 a = qp[0], b = qp[1];
    qr[g][0] = a.x, qr[g][1] = a.y, qr[g][2] = a.z, qr[g][3] = a.w;
    qr[g][4] = b.x, qr[g][5] = b.y, qr[g][6] = b.z, qr[g][7] = b.w;
  }

  // ---- scores: lane partial dots over its 8 dims, summed over the key's lanes by reduce_scatter
  constexpr int kDots = T::kSlots * GB;
  constexpr int kOwned = rs_count<kDots, T::kLanesPerKey / 2>();
  constexpr int kDup = rs_dup_mask<kDots, T::kLanesPerKey / 2>();
#pragma unroll 1
  for (int c = warp; c < T::kChunks; c += kAttnWarps) {
    const int base = c * T::kChunk;
    if (base >= nk) break;
    uint4 raw[T::kSlots];
#pragma unroll
    for (int i = 0; i < T::kSlots; ++i) {
      const int t = base + i * T::kKeysPerSlot + kg;
      raw[i] = t < nk ? load_kv<Q8>(kc, t, kv_dim, col) : make_uint4(0, 0, 0, 0);
    }
    float dot[kDots];
#pragma unroll
    for (int i = 0; i < T::kSlots; ++i) {
      float kf[8];
      unpack_kv<Q8>(raw[i], kf);
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        float a = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) a = __fmaf_rn(qr[g][e], kf[e], a);
        dot[i * GB + g] = a;
      }
    }
    int first = 0;
    reduce_scatter<kDots, T::kLanesPerKey / 2>(dot, lane, first);
    if ((lane & kDup) == 0) {
#pragma unroll
      for (int j = 0; j < kOwned; ++j) {
        const int idx = first + j;
        const int t = base + (idx / GB) * T::kKeysPerSlot + kg;  // < kSplit; unused past nk
        sc[idx % GB][t] = __fmul_rn(dot[j], scale);
      }
    }
  }
  __syncthreads();

  // ---- softmax statistics of the split, one warp per head
  for (int g = warp; g < GB; g += kAttnWarps) {
    float m = -INFINITY;
    for (int t = lane; t < nk; t += kWarp) m = fmaxf(m, sc[g][t]);
    m = warp_max(m);
    float l = 0.0f;
    for (int t = lane; t < nk; t += kWarp) {
      const float p = expf(__fsub_rn(sc[g][t], m));
      sc[g][t] = p;
      l = __fadd_rn(l, p);
    }
    l = warp_sum(l);
    if (lane == 0) {
      stat[g][0] = m;
      stat[g][1] = l;
    }
  }
  __syncthreads();

  // ---- weighted V sums: each lane accumulates its 8 dims over its keys, in key order
  float acc[GB][8];
#pragma unroll
  for (int g = 0; g < GB; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.0f;
#pragma unroll 1
  for (int c = warp; c < T::kChunks; c += kAttnWarps) {
    const int base = c * T::kChunk;
    if (base >= nk) break;
    uint4 raw[T::kSlots];
#pragma unroll
    for (int i = 0; i < T::kSlots; ++i) {
      const int t = base + i * T::kKeysPerSlot + kg;
      raw[i] = t < nk ? load_kv<Q8>(vc, t, kv_dim, col) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < T::kSlots; ++i) {
      const int t = base + i * T::kKeysPerSlot + kg;
      if (t < nk) {
        float vf[8];
        unpack_kv<Q8>(raw[i], vf);
#pragma unroll
        for (int g = 0; g < GB; ++g) {
          const float p = sc[g][t];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[g][e] = __fmaf_rn(p, vf[e], acc[g][e]);
        }
      }
    }
  }
  // Lanes of the same dims in one warp (HD < 256), then warps in a fixed tree: w += w + half.
#pragma unroll
  for (int o = T::kLanesPerKey; o < kWarp; o <<= 1)
#pragma unroll
    for (int g = 0; g < GB; ++g)
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] = __fadd_rn(acc[g][e], __shfl_xor_sync(0xffffffffu, acc[g][e], o));
#pragma unroll
  for (int half = kAttnWarps / 2; half > 0; half /= 2) {
    if (warp >= half && warp < 2 * half && kg == 0) {
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        float4* d = &stage[warp - half][(g * HD + sub * 8) / 4];
        d[0] = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
        d[1] = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
      }
    }
    __syncthreads();
    if (warp < half && kg == 0) {
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        const float4* s = &stage[warp][(g * HD + sub * 8) / 4];
        const float4 a = s[0], b = s[1];
        acc[g][0] = __fadd_rn(acc[g][0], a.x), acc[g][1] = __fadd_rn(acc[g][1], a.y);
        acc[g][2] = __fadd_rn(acc[g][2], a.z), acc[g][3] = __fadd_rn(acc[g][3], a.w);
        acc[g][4] = __fadd_rn(acc[g][4], b.x), acc[g][5] = __fadd_rn(acc[g][5], b.y);
        acc[g][6] = __fadd_rn(acc[g][6], b.z), acc[g][7] = __fadd_rn(acc[g][7], b.w);
      }
    }
    __syncthreads();
  }

  if (warp == 0 && kg == 0) {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      float4* o = reinterpret_cast<float4*>(part_o + ((lrow * n_head + h0 + g) * max_splits + split) * HD + sub * 8);
      o[0] = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
      o[1] = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
    }
  }
  if (threadIdx.x < GB) {
    float* ml = part_ml + ((lrow * n_head + h0 + threadIdx.x) * max_splits + split) * 2;
    ml[0] = stat[threadIdx.x][0];
    ml[1] = stat[threadIdx.x][1];
  }
}

// The merge's thread groups (parts) of a head of HD values: one float4 column a thread.
template <int HD>
constexpr int combine_parts() {
  static_assert(kCombineThreads % (HD / 4) == 0 && kCombineThreads >= HD / 4);
  return kCombineThreads / (HD / 4);
}

// One block per (row of the group, query head). Split j is weighted by exp(m_j - max_j m_j); the
// threads of part p sum splits p, p + kParts, ... in order, then the parts are added in order.
template <int HD, int kBatch>
__global__ void __launch_bounds__(kCombineThreads)
    attention_combine_kernel(const DeviceStep step, int64_t row0, int n_head, int max_splits,
                             const float* __restrict__ part_o, const float* __restrict__ part_ml,
                             float* __restrict__ out, const AttnOutGate gate) {
  pdl_enter();
  constexpr int kCols = HD / 4;  // float4 columns of a head
  constexpr int kParts = combine_parts<HD>();
  __shared__ float4 po[kParts][kCols];
  __shared__ float pl[kParts];
  __shared__ float red[kCombineThreads / kWarp];

  const int64_t lrh = blockIdx.x;
  const int64_t lrow = lrh / n_head;
  const int h = static_cast<int>(lrh % n_head);
  const int64_t row = row0 + lrow;
  const int n_splits = (step.positions[row] + kSplit) / kSplit;  // ceil((pos + 1) / kSplit)
  float4* dst = reinterpret_cast<float4*>(out + (row * n_head + h) * HD);
  if (n_splits > max_splits) {
    // The step's max_kv_len was smaller than this row's keys: poison the row, never read past.
    const float nan = __int_as_float(0x7fc00000);
    for (int c = threadIdx.x; c < kCols; c += kCombineThreads) dst[c] = make_float4(nan, nan, nan, nan);
    return;
  }
  const float* ml = part_ml + lrh * max_splits * 2;
  const float4* po_src = reinterpret_cast<const float4*>(part_o + lrh * max_splits * HD);
  const int col = threadIdx.x % kCols, part = threadIdx.x / kCols;
  // The gate's values, loaded now: their round trip overlaps the merge (part 0 writes the row).
  float4 g = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (gate.x != nullptr && part == 0) {
    const float* gx = gate.x + row * gate.row_stride + static_cast<int64_t>(h) * gate.head_stride + 4 * col;
    g = make_float4(gx[0], gx[1], gx[2], gx[3]);
  }

  float m = -INFINITY;  // max is exact, so its reduction order does not matter
  for (int j = threadIdx.x; j < n_splits; j += kCombineThreads) m = fmaxf(m, ml[2 * j]);
  m = warp_max(m);
  if (threadIdx.x % kWarp == 0) red[threadIdx.x / kWarp] = m;
  __syncthreads();
  m = red[0];
#pragma unroll
  for (int w = 1; w < kCombineThreads / kWarp; ++w) m = fmaxf(m, red[w]);

  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float l = 0.0f;
  // A thread's splits in batches of kBatch whose loads are all issued before the batch's
  // arithmetic: a long row (256 splits at 32K keys: 64 a thread) otherwise waits one L2 round trip
  // a split. The arithmetic is the same sequence in the same order whatever kBatch.
  for (int j0 = part; j0 < n_splits; j0 += kParts * kBatch) {
    float mj[kBatch], lj[kBatch];
    float4 xj[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int j = j0 + b * kParts;
      if (j < n_splits) {
        mj[b] = ml[2 * j];
        lj[b] = ml[2 * j + 1];
        xj[b] = po_src[static_cast<int64_t>(j) * kCols + col];
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (j0 + b * kParts >= n_splits) break;
      const float w = expf(__fsub_rn(mj[b], m));
      l = __fmaf_rn(lj[b], w, l);
      const float4 x = xj[b];
      acc.x = __fmaf_rn(x.x, w, acc.x);
      acc.y = __fmaf_rn(x.y, w, acc.y);
      acc.z = __fmaf_rn(x.z, w, acc.z);
      acc.w = __fmaf_rn(x.w, w, acc.w);
    }
  }
  po[part][col] = acc;
  if (col == 0) pl[part] = l;
  __syncthreads();
  if (part == 0) {
    float4 s = po[0][col];
    float lt = pl[0];
#pragma unroll
    for (int p = 1; p < kParts; ++p) {
      const float4 x = po[p][col];
      s.x = __fadd_rn(s.x, x.x), s.y = __fadd_rn(s.y, x.y), s.z = __fadd_rn(s.z, x.z), s.w = __fadd_rn(s.w, x.w);
      lt = __fadd_rn(lt, pl[p]);
    }
    float4 o = make_float4(__fdiv_rn(s.x, lt), __fdiv_rn(s.y, lt), __fdiv_rn(s.z, lt), __fdiv_rn(s.w, lt));
    if (gate.x != nullptr)  // sigmoid_gate_mul's product, on the value it would have read back
      o = make_float4(__fmul_rn(o.x, sigmoid(g.x)), __fmul_rn(o.y, sigmoid(g.y)), __fmul_rn(o.z, sigmoid(g.z)),
                      __fmul_rn(o.w, sigmoid(g.w)));
    dst[col] = o;
  }
}

int64_t max_splits_of(const DeviceStep& st) { return std::max<int64_t>(1, (int64_t{st.max_kv_len} + kSplit - 1) / kSplit); }

int64_t floats_per_row(const DeviceStep& st, const AttnShape& s) {
  return static_cast<int64_t>(s.n_head) * max_splits_of(st) * (s.head_dim + 2);
}

int64_t rows_per_launch(const DeviceStep& st, int64_t n_rows, const AttnShape& s) {
  return std::clamp<int64_t>(kWorkCapFloats / floats_per_row(st, s), 1, std::max<int64_t>(n_rows, 1));
}

// Query heads per block: the largest supported divisor of the GQA group (register budget <= 8).
int heads_per_block(int heads_per_kv) {
  for (int gb : {8, 6, 5, 4, 2, 1})
    if (heads_per_kv % gb == 0) return gb;
  return 1;
}

struct LaunchArgs {
  bool kv_q8;
  bool tensor_cores;  // the split step in k_attention_tc.cu
  int layer;
  const float* q;
  const DeviceStep* step;
  const AttnShape* s;
  int max_splits;
  float* part_o;
  float* part_ml;
  float* out;
  cudaStream_t stream;
  AttnOutGate gate;
};

template <int HD, int GB>
void launch_group(const LaunchArgs& a, int64_t row0, int64_t rows) {
  const int heads_per_kv = a.s->n_head / a.s->n_head_kv;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)));
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(a.s->n_head_kv * (heads_per_kv / GB)),
                  static_cast<unsigned>(a.max_splits));
  if (a.tensor_cores) {
    attention_tc_split(
        AttnTcLaunch{a.layer, a.q, a.step, a.s, row0, rows, a.max_splits, a.part_o, a.part_ml, a.stream, a.kv_q8});
  } else {
    auto* kernel = a.kv_q8 ? attention_split_kernel<HD, GB, true> : attention_split_kernel<HD, GB, false>;
    launch(kernel, grid, kAttnThreads, 0, a.stream, a.layer, a.q, *a.step, row0, a.s->n_head, a.s->n_head_kv,
           a.s->q_head_stride, heads_per_kv, a.max_splits, scale, a.part_o, a.part_ml);
    CUDA_LAUNCH_CHECK();
  }
  // Batches of 8 cost registers (80 a thread, 3 blocks an SM, against 32 and 8 unbatched): only
  // for rows of more than two splits a thread. Batches of 16 (128 registers) for more than 16 a
  // thread (over 8,192 keys at head 256; 9B B = 1 @ d32000 +0.3-0.8% on an H100, f16 and 8-bit
  // caches, same bits: bench/results/2026-12-06-0700-h100-session38.md).
  const int per_thread = (a.max_splits + combine_parts<HD>() - 1) / combine_parts<HD>();
  auto* combine = per_thread > 16  ? attention_combine_kernel<HD, 16>
                  : per_thread > 2 ? attention_combine_kernel<HD, 8>
                                   : attention_combine_kernel<HD, 1>;
  launch(combine, static_cast<unsigned>(rows * a.s->n_head), kCombineThreads, 0, a.stream, *a.step, row0, a.s->n_head,
         a.max_splits, a.part_o, a.part_ml, a.out, a.gate);
  CUDA_LAUNCH_CHECK();
}

template <int HD>
void launch_group_hd(const LaunchArgs& a, int64_t row0, int64_t rows) {
  switch (heads_per_block(a.s->n_head / a.s->n_head_kv)) {
    case 8: return launch_group<HD, 8>(a, row0, rows);
    case 6: return launch_group<HD, 6>(a, row0, rows);
    case 5: return launch_group<HD, 5>(a, row0, rows);
    case 4: return launch_group<HD, 4>(a, row0, rows);
    case 2: return launch_group<HD, 2>(a, row0, rows);
    default: return launch_group<HD, 1>(a, row0, rows);
  }
}

}  // namespace

int64_t attention_work_floats(const DeviceStep& host_step_shape, int64_t n_rows, const AttnShape& s) {
  if (n_rows <= 0) return 0;
  return rows_per_launch(host_step_shape, n_rows, s) * floats_per_row(host_step_shape, s);
}

void attention(int layer, const float* q, const DeviceStep& step, int64_t n_rows, const AttnShape& s, GgmlType kv_type,
               bool tensor_cores, float* out, float* work, cudaStream_t stream, const AttnOutGate& gate) {
  MEMRA_ASSERT(kv_type == GgmlType::F16 || kv_type == GgmlType::Q8_0, "CUDA KV cache type");
  MEMRA_ASSERT(kv_type == GgmlType::F16 || (s.n_head_kv * s.head_dim) % 64 == 0, "8-bit KV rows: kv_dim % 64");
  if (s.head_dim != 64 && s.head_dim != 128 && s.head_dim != 256)
    throw Error("the CUDA backend's attention supports head sizes 64, 128 and 256, not " +
                std::to_string(s.head_dim) + "; run this model on the CPU backend");
  MEMRA_ASSERT(layer >= 0 && n_rows >= 0 && n_rows <= step.n_rows);
  MEMRA_ASSERT(s.n_head > 0 && s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0);
  MEMRA_ASSERT(s.q_head_stride >= s.head_dim && s.q_head_stride % 4 == 0);
  MEMRA_ASSERT(reinterpret_cast<uintptr_t>(q) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0);
  MEMRA_ASSERT(reinterpret_cast<uintptr_t>(work) % 16 == 0);
  if (n_rows == 0) return;
  MEMRA_ASSERT(step.max_kv_len >= 1);
  const int64_t max_splits = max_splits_of(step);
  MEMRA_ASSERT(max_splits <= 65535, "grid z limit: at most 65535 splits");
  const int64_t group = rows_per_launch(step, n_rows, s);
  const int64_t o_floats = group * s.n_head * max_splits * s.head_dim;
  LaunchArgs a{kv_type == GgmlType::Q8_0, tensor_cores && attention_tc_supported(s, kv_type), layer, q, &step, &s,
               static_cast<int>(max_splits), work, work + o_floats, out, stream, gate};
  // Groups run one after another on the stream, so they can share the work buffer.
  for (int64_t row0 = 0; row0 < n_rows; row0 += group) {
    const int64_t rows = std::min(group, n_rows - row0);
    switch (s.head_dim) {
      case 64: launch_group_hd<64>(a, row0, rows); break;
      case 128: launch_group_hd<128>(a, row0, rows); break;
      default: launch_group_hd<256>(a, row0, rows); break;
    }
  }
}

}  // namespace memra::cuda
