// Causal attention of a prompt chunk on the tensor cores (mma.sync m16n8k16): the rows of one
// sequence that a step carries in a chunk of at least kAttnPromptMinRows rows, f16 cache.
// k_attention.cu's split kernel reads every key once per row (a block per row, head group and
// 128-key split, CUDA-core dots): at pp512 @ d4096 on the 9B that was ~26% of the prefill
// (H100, 2026-12-05: 8,184 tok/s against 11,000 at depth 0). Here a warp carries 16 consecutive
// rows of one query head as the MMA's m side, and the block's warps (query heads of one KV head)
// share each 32-key K and V tile in shared memory.
//
// Exactness. A row's output is a function of its own query, its position and its sequence's cache:
// the key tiles are walked from key 0 in one order for every row; a key past a row's position has
// the score -inf, so its weight exp(-inf) is 0, the tile maximum and row sum are unchanged by it and
// the rescale factor of a tile without keys for the row is exp(0) = 1 (x * 1 and x + 0 are exact).
// Which rows share a warp is fixed by the chunk (16-row tiles from the chunk's first row), and the
// chunk by the prefill grid; which kernel a row takes is decided by its own sequence's row count
// in the step (kAttnPromptMinRows), never by the other sequences. The order differs from the split
// kernel's, so a prompt row attended here and the same row decoded alone differ in rounding (the
// CPU tolerance kAttnTol holds for both: tests/gpu_ops_test.cpp runs chunks of both sizes).
//
// Precision. K and V are f16 in the cache, so their MMA operands are exact; q (float) and the
// weights p = exp(s - m) (float) enter as an f16 hi part plus an f16 lo part (x - hi, rounded),
// ~22 significant bits, each product exact in the MMA's float accumulation. Scores are scaled by
// 1/sqrt(hd) in float after the MMA, as the split kernel does; the softmax runs online over the
// tiles (max, rescale by exp(m_old - m_new), sum), the output is divided by the row's sum at the
// end and the gate applied with sigmoid_gate_mul's bits.
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_f16.cuh"
#include "step/kv_blocks.h"

namespace memra::cuda {
namespace {

constexpr int kTcRows = 16;  // rows a warp carries: the MMA's m side
constexpr int kTcKeys = 32;  // keys a tile
constexpr int kTcMaxWarps = 4;
static_assert(kKvBlock % kTcKeys == 0, "a key tile lies in one KV block");

// Shared memory in f16 elements: two stages of (K tile, V tile), then each warp's q hi and lo.
// Rows are padded by 8 elements (16 bytes): a fragment read's lanes g = 0..7 then fall on
// different banks (row stride HD + 8 elements = 4 (mod 32) words apart for every HD here).
template <int HD>
struct PromptSmem {
  static constexpr int kRow = HD + 8;
  static constexpr int kTile = kTcKeys * kRow;
  static constexpr int kQ = kTcRows * kRow;
  static constexpr size_t bytes(int warps) { return sizeof(uint16_t) * (4 * size_t{kTile} + 2 * size_t{kQ} * warps); }
};

// x as an f16 hi part and an f16 lo part: hi = f16(x), lo = f16(x - hi) (x - hi is exact in float).
__device__ __forceinline__ void split_f16(float x, uint16_t& hi, uint16_t& lo) {
  const __half h = __float2half_rn(x);
  hi = __half_as_ushort(h);
  lo = __half_as_ushort(__float2half_rn(__fsub_rn(x, __half2float(h))));
}
// Two floats as the hi and lo words of an MMA fragment register (the first in the low half).
__device__ __forceinline__ void split_pair(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  uint16_t h0, l0, h1, l1;
  split_f16(x0, h0, l0);
  split_f16(x1, h1, l1);
  hi = static_cast<uint32_t>(h0) | static_cast<uint32_t>(h1) << 16;
  lo = static_cast<uint32_t>(l0) | static_cast<uint32_t>(l1) << 16;
}

// Block (16-row tile x, KV head and head group y, sequence z); warp w takes query head
// kvh * heads_per_kv + group * warps + w. Lane (g, t) holds the scores and outputs of rows g and
// g + 8 (the MMA's C fragment): keys / dims 8j + 2t, 8j + 2t + 1 of n-tile j.
template <int HD>
__global__ void __launch_bounds__(kTcMaxWarps * kWarp)
    attention_prompt_kernel(int layer, const float* __restrict__ q, const DeviceStep step, int n_head, int n_head_kv,
                            int q_head_stride, int heads_per_kv, int min_rows, float scale, float* __restrict__ out,
                            const AttnOutGate gate) {
  pdl_enter();
  using L = PromptSmem<HD>;
  MEMRA_DYNAMIC_SMEM(uint16_t, smem, 16);
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int g = lane / 4, t = lane % 4;
  const int li = lane / 8, lr = lane % 8;  // the matrix and row whose address the lane gives ldmatrix_x4
  const int seq = static_cast<int>(blockIdx.z);
  const int n = step.seq_n_rows[seq];
  const int tile_row = static_cast<int>(blockIdx.x) * kTcRows;
  if (n < min_rows || tile_row >= n) return;  // uniform per block
  const int groups = heads_per_kv / warps;
  const int kvh = static_cast<int>(blockIdx.y) / groups;
  const int head = kvh * heads_per_kv + (static_cast<int>(blockIdx.y) % groups) * warps + warp;
  const int64_t row0 = step.seq_row0[seq] + tile_row;
  const int rows_here = min(kTcRows, n - tile_row);

  // The rows' positions (rows past the chunk take the tile's first row's: they see only valid
  // keys and are never stored), and the keys any row of the tile sees.
  int pos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    pos[h] = step.positions[row0 + (r < rows_here ? r : 0)];
  }
  int last = lane < rows_here ? step.positions[row0 + lane] : 0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
  const int n_keys = last + 1;
  const int n_tiles = (n_keys + kTcKeys - 1) / kTcKeys;
  const int64_t kv_dim = static_cast<int64_t>(n_head_kv) * HD;
  uint8_t* const* const blocks = step.kv_blocks[static_cast<int64_t>(layer) * step.n_seqs + seq];

  // Copies key tile kt into stage s: K and V rows as they are in the cache (16-byte pieces by
  // cp.async), zeros past the tile's last key any row sees (stale cache bytes never reach an MMA,
  // not even multiplied by a zero weight).
  auto load_tile = [&](int kt, int s) {
    const int k0 = kt * kTcKeys;
    const uint8_t* kc = blocks[k0 / kKvBlock];
    const uint8_t* vc = kc + static_cast<int64_t>(kKvBlock) * 2 * kv_dim;
    uint16_t* ks = smem + s * 2 * L::kTile;
    uint16_t* vs = ks + L::kTile;
    constexpr int kPieces = kTcKeys * HD / 8;
    for (int i = static_cast<int>(threadIdx.x); i < kPieces; i += static_cast<int>(blockDim.x)) {
      const int key = i / (HD / 8), c = (i % (HD / 8)) * 8;
      uint16_t* kd = ks + key * L::kRow + c;
      uint16_t* vd = vs + key * L::kRow + c;
      if (k0 + key < n_keys) {
        const int64_t at = (static_cast<int64_t>(k0 % kKvBlock + key) * kv_dim + static_cast<int64_t>(kvh) * HD + c) * 2;
        cp_async16(kd, kc + at);
        cp_async16(vd, vc + at);
      } else {
        *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vd) = make_uint4(0, 0, 0, 0);
      }
    }
    cp_async_commit();
  };
  load_tile(0, 0);

  // This warp's query rows as f16 hi and lo parts (rows past the chunk: zeros).
  uint16_t* const qh = smem + 4 * L::kTile + warp * 2 * L::kQ;
  uint16_t* const ql = qh + L::kQ;
  for (int i = lane; i < kTcRows * HD; i += kWarp) {
    const int r = i / HD, d = i % HD;
    const float x = r < rows_here ? q[((row0 + r) * n_head + head) * q_head_stride + d] : 0.0f;
    split_f16(x, qh[r * L::kRow + d], ql[r * L::kRow + d]);
  }

  float o[HD / 8][4];
#pragma unroll
  for (int j = 0; j < HD / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) o[j][i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

#pragma unroll 1
  for (int kt = 0; kt < n_tiles; ++kt) {
    // Tile kt landed for every thread; every warp is done with tile kt - 1, whose stage is refilled.
    cp_async_wait<0>();
    __syncthreads();
    if (kt + 1 < n_tiles) load_tile(kt + 1, (kt + 1) & 1);
    const uint16_t* ks = smem + (kt & 1) * 2 * L::kTile;
    const uint16_t* vs = ks + L::kTile;

    // Scores: S = q_hi K^T + q_lo K^T, 16 dims a step in dim order. ldmatrix_x4: the q rows' A
    // fragments, and two n-tiles' (keys') B fragments of K a call.
    float s[kTcKeys / 8][4];
#pragma unroll
    for (int j = 0; j < kTcKeys / 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[j][i] = 0.0f;
#pragma unroll 4
    for (int kk = 0; kk < HD / 16; ++kk) {
      uint32_t ah[4], al[4];
      const int qa = (lr + 8 * (li & 1)) * L::kRow + 16 * kk + 8 * (li >> 1);
      ldmatrix_x4<false>(ah, qh + qa);
      ldmatrix_x4<false>(al, ql + qa);
#pragma unroll
      for (int jj = 0; jj < kTcKeys / 16; ++jj) {
        uint32_t kb[4];
        ldmatrix_x4<false>(kb, ks + (8 * (2 * jj + (li >> 1)) + lr) * L::kRow + 16 * kk + 8 * (li & 1));
        mma_16816(s[2 * jj], ah, kb[0], kb[1], s[2 * jj]);
        mma_16816(s[2 * jj], al, kb[0], kb[1], s[2 * jj]);
        mma_16816(s[2 * jj + 1], ah, kb[2], kb[3], s[2 * jj + 1]);
        mma_16816(s[2 * jj + 1], al, kb[2], kb[3], s[2 * jj + 1]);
      }
    }

    // Online softmax per row (h = 0: row g, 1: row g + 8); s becomes the weights.
    const int k0 = kt * kTcKeys;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < kTcKeys / 8; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int key = k0 + 8 * j + 2 * t + c;
          const float v = key <= pos[h] ? __fmul_rn(s[j][2 * h + c], scale) : -INFINITY;
          s[j][2 * h + c] = v;
          mx = fmaxf(mx, v);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(m[h], mx);  // finite: key 0 is in every row's first tile
      const float alpha = expf(__fsub_rn(m[h], mn));
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kTcKeys / 8; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float e = expf(__fsub_rn(s[j][2 * h + c], mn));
          s[j][2 * h + c] = e;
          sum = __fadd_rn(sum, e);
        }
      // The four lanes of a row (t = 0..3) in a fixed tree; a + b == b + a, so all hold the total.
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 1));
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
      l[h] = __fadd_rn(__fmul_rn(l[h], alpha), sum);
      m[h] = mn;
#pragma unroll
      for (int j = 0; j < HD / 8; ++j) {
        o[j][2 * h] = __fmul_rn(o[j][2 * h], alpha);
        o[j][2 * h + 1] = __fmul_rn(o[j][2 * h + 1], alpha);
      }
    }

    // O += P_hi V + P_lo V, 16 keys a step in key order. P's A fragment is the scores' C fragments
    // of n-tiles 2kk and 2kk + 1; V's B fragments (V stored key-major) by ldmatrix_x4<TRANS>, two
    // n-tiles (dims) a call.
#pragma unroll
    for (int kk = 0; kk < kTcKeys / 16; ++kk) {
      uint32_t ph[4], pl[4];
      split_pair(s[2 * kk][0], s[2 * kk][1], ph[0], pl[0]);
      split_pair(s[2 * kk][2], s[2 * kk][3], ph[1], pl[1]);
      split_pair(s[2 * kk + 1][0], s[2 * kk + 1][1], ph[2], pl[2]);
      split_pair(s[2 * kk + 1][2], s[2 * kk + 1][3], ph[3], pl[3]);
      const uint16_t* vb = vs + (16 * kk + 8 * (li & 1) + lr) * L::kRow + 8 * (li >> 1);
#pragma unroll
      for (int jj = 0; jj < HD / 16; ++jj) {
        uint32_t b[4];
        ldmatrix_x4<true>(b, vb + 16 * jj);
        mma_16816(o[2 * jj], ph, b[0], b[1], o[2 * jj]);
        mma_16816(o[2 * jj], pl, b[0], b[1], o[2 * jj]);
        mma_16816(o[2 * jj + 1], ph, b[2], b[3], o[2 * jj + 1]);
        mma_16816(o[2 * jj + 1], pl, b[2], b[3], o[2 * jj + 1]);
      }
    }
  }

  // out = O / l, then the gate (sigmoid_gate_mul's product).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    if (r >= rows_here) continue;
    const int64_t row = row0 + r;
    float* dst = out + (row * n_head + head) * HD;
    const float* gx =
        gate.x != nullptr ? gate.x + row * gate.row_stride + static_cast<int64_t>(head) * gate.head_stride : nullptr;
#pragma unroll
    for (int j = 0; j < HD / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int d = 8 * j + 2 * t + c;
        float v = __fdiv_rn(o[j][2 * h + c], l[h]);
        if (gx != nullptr) v = __fmul_rn(v, sigmoid(gx[d]));
        dst[d] = v;
      }
  }
}

template <int HD>
void launch_prompt(int layer, const float* q, const DeviceStep& step, const AttnShape& s, int warps, float* out,
                   cudaStream_t stream, const AttnOutGate& gate) {
  const int heads_per_kv = s.n_head / s.n_head_kv;
  const size_t smem = PromptSmem<HD>::bytes(warps);
  static size_t configured = 0;  // the dynamic shared-memory limit raised so far for this kernel
  if (smem > configured) {
    CUDA_CHECK(cudaFuncSetAttribute(attention_prompt_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
    configured = smem;
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)));
  const dim3 grid(static_cast<unsigned>((step.max_seq_rows + kTcRows - 1) / kTcRows),
                  static_cast<unsigned>(s.n_head_kv * (heads_per_kv / warps)), static_cast<unsigned>(step.n_seqs));
  launch(attention_prompt_kernel<HD>, grid, static_cast<unsigned>(warps * kWarp), smem, stream, layer, q, step,
         s.n_head, s.n_head_kv, s.q_head_stride, heads_per_kv, kAttnPromptMinRows, scale, out, gate);
  CUDA_LAUNCH_CHECK();
}

}  // namespace

int attention_prompt_warps(const AttnShape& s, GgmlType kv_type) {
  if (kv_type != GgmlType::F16 || (s.head_dim != 64 && s.head_dim != 128 && s.head_dim != 256)) return 0;
  const int heads_per_kv = s.n_head / s.n_head_kv;
  for (int w = kTcMaxWarps; w >= 1; w /= 2)
    if (heads_per_kv % w == 0) return w;
  return 1;
}

void attention_prompt(int layer, const float* q, const DeviceStep& step, const AttnShape& s, GgmlType kv_type,
                      float* out, cudaStream_t stream, const AttnOutGate& gate) {
  const int warps = attention_prompt_warps(s, kv_type);
  MEMRA_ASSERT(warps > 0 && step.max_seq_rows >= kAttnPromptMinRows, "attention_prompt: no prompt-form rows");
  switch (s.head_dim) {
    case 64: return launch_prompt<64>(layer, q, step, s, warps, out, stream, gate);
    case 128: return launch_prompt<128>(layer, q, step, s, warps, out, stream, gate);
    default: return launch_prompt<256>(layer, q, step, s, warps, out, stream, gate);
  }
}

}  // namespace memra::cuda
