// The matmul family's warpgroup kernel for batches (k_matmul.cu chooses it): the canonical order
// of matmul_order.h with wgmma (wgmma.cuh) instead of mma.sync, so one block's 64 or 128 weight
// rows meet N = 16, 32 or 64 activation rows per tensor-core instruction, and a weight block is
// decoded once for all N rows (the mma.sync kernel decodes it once per 8-row n-tile group it
// holds in registers, 2-4 times at 64 rows, and re-reads the activation fragments per warp).
//
// Shape. A block is one warpgroup (4 warps); warp w owns MT row groups (SwiGLU: one of gate and the
// same one of up) as A fragments, decoded from its own weight pieces exactly as matmul_kernel.cuh
// does. Per k-tile a 2-stage cp.async pipeline brings the warps' weight pieces and the block's N
// activation rows in wgmma's K-major layout (from F16Act::rowmajor, 16-byte chunks). Per 32-element
// block: decode, two wgmma (elements 0-15 from +0, 16-31 accumulating: D_b; Q6_K two from +0),
// wait, then the block's fused multiply-adds into acc, in block order: matmul_order.h's chain.
// K segments and their tree as matmul_kernel.cuh (a cluster along grid y).
#pragma once

#include "backend/cuda/matmul_kernel.cuh"
#include "backend/cuda/wgmma.cuh"

namespace memra::cuda::matmul_impl {

constexpr int kWgStages = 2;

template <GgmlType T, int N, int MT>
struct WgShape {
  using S = TileSpec<T>;
  static constexpr int kWarpStage = MT * S::kPieces * 512;
  static constexpr int kActStage = N * 512;  // 16 k16 slices of N rows x 32 bytes
  static constexpr int kSlice = N * 32;
  static constexpr int kStage = 4 * kWarpStage + kActStage;
  static constexpr int kSmem = kWgStages * kStage;
};

// The types this kernel decodes (no activation sums or low parts: those stay on matmul_kernel.cuh).
constexpr bool wg_supports(GgmlType t) { return t == GgmlType::Q4_0 || t == GgmlType::Q8_0 || t == GgmlType::Q6_K; }

template <GgmlType T, int N, int MT, bool SW>
__global__ void __launch_bounds__(kWgThreads) matmul_wg_kernel(const Args a) {
  using S = TileSpec<T>;
  using Sh = WgShape<T, N, MT>;
  static_assert(!SW || MT == 2, "SwiGLU: one row group of gate and one of up per warp");
  MEMRA_DYNAMIC_SMEM(uint8_t, smem, 128);
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  constexpr int mt_rows = SW ? 1 : MT;
  constexpr bool kTwoD = T == GgmlType::Q6_K;  // two dots a block, each from +0

  const int seg = static_cast<int>(blockIdx.y) % a.segs;
  const int tile = static_cast<int>(blockIdx.y) / a.segs;
  const int kt0 = seg * a.n_kt / a.segs, kt1 = (seg + 1) * a.n_kt / a.segs;
  int e = 0;
  while (tile >= a.tile_begin[e + 1]) ++e;
  const Target& tg = a.t[e];
  const int rg0 = (tile - a.tile_begin[e]) * 4 * mt_rows + warp * mt_rows;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * N;  // first activation row of the block
  const int64_t rows = a.rows;
  const int rows_here = static_cast<int>(rows - n0 < N ? rows - n0 : N);

  const uint8_t* wtile[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const int rg = rg0 + (m % mt_rows);
    const uint8_t* base = (SW && m >= mt_rows) ? tg.up : tg.w;
    wtile[m] = rg < tg.n_rg ? base + static_cast<int64_t>(rg) * a.group_stride : nullptr;
  }

  // Activation rows past the last one are never copied: zero them in every stage once.
  for (int s = 0; s < kWgStages; ++s) {
    uint8_t* st = smem + s * Sh::kStage + 4 * Sh::kWarpStage;
    for (int i = tid; i < 32 * N; i += kWgThreads) {
      const int n = i % N, q = i / N;  // row, 16-byte chunk of the k-tile
      if (n >= rows_here) *reinterpret_cast<uint4*>(st + (q / 2) * Sh::kSlice + wg_b_offset(n, 8 * (q % 2))) = make_uint4(0, 0, 0, 0);
    }
  }

  auto issue_weights = [&](int kt) {
    if (kt >= kt1) return;
    uint8_t* dst = smem + ((kt - kt0) % kWgStages) * Sh::kStage + warp * Sh::kWarpStage + lane * 16;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (!wtile[m]) continue;
      const uint8_t* src = wtile[m] + static_cast<int64_t>(kt) * a.tile_bytes;
      uint8_t* d = dst + m * S::kPieces * 512;
#pragma unroll
      for (int i = 0; i < S::kLanePieces; ++i) cp_async16(d + i * 512, src + i * 512 + lane * 16);
      constexpr int roff = S::f.row_data_off;
      if constexpr (S::kRowPieces == 1) {
        cp_async16(d + S::kLanePieces * 512, src + roff + g * 16);
      } else if constexpr (S::kRowPieces >= 2) {
        cp_async16(d + S::kLanePieces * 512, src + roff + g * 32);
        cp_async16(d + (S::kLanePieces + 1) * 512, src + roff + g * 32 + 16);
      }
      if constexpr (S::kRowPieces == 3) cp_async4(d + (S::kLanePieces + 2) * 512, src + S::f.d_off + g * 4);
    }
  };
  // Row n's chunk q (halves 8q .. 8q + 7 of the k-tile): 4 consecutive threads copy 64 contiguous
  // bytes of a row, a warp 8 rows.
  const int64_t row_bytes = static_cast<int64_t>(a.n_kt) * kTileK * 2;
  auto issue_acts = [&](int kt) {
    if (kt >= kt1) return;
    uint8_t* dst = smem + ((kt - kt0) % kWgStages) * Sh::kStage + 4 * Sh::kWarpStage;
    const uint8_t* src = a.act_rm + n0 * row_bytes + static_cast<int64_t>(kt) * kTileK * 2;
#pragma unroll
    for (int qg = 0; qg < 8; ++qg) {
      const int q = qg * 4 + tid % 4;
      for (int n = tid / 4; n < rows_here; n += kWgThreads / 4)
        cp_async16(dst + (q / 2) * Sh::kSlice + wg_b_offset(n, 8 * (q % 2)), src + n * row_bytes + q * 16);
    }
  };

#pragma unroll
  for (int s = 0; s < kWgStages - 1; ++s) {
    issue_weights(kt0 + s);
    cp_async_commit();
  }
  pdl_wait();
  pdl_launch_dependents();
#pragma unroll
  for (int s = 0; s < kWgStages - 1; ++s) {
    issue_acts(kt0 + s);
    cp_async_commit();
  }

  constexpr int kD = N / 2;  // accumulator floats of one m-tile
  float acc[MT][kD];
  float d[MT][kD];
  [[maybe_unused]] float d2[MT][kTwoD ? kD : 1];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int i = 0; i < kD; ++i) acc[m][i] = d[m][i] = 0.0f;
  if constexpr (kTwoD) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int i = 0; i < kD; ++i) d2[m][i] = 0.0f;
  }

#pragma unroll 1
  for (int kt = kt0; kt < kt1; ++kt) {
    cp_async_wait<kWgStages - 2>();
    fence_proxy_async();  // the copies (generic proxy) before wgmma's reads (async proxy)
    __syncthreads();      // also: every wgmma of k-tile kt - 1 has completed (waited below)
    issue_weights(kt + kWgStages - 1);
    issue_acts(kt + kWgStages - 1);
    cp_async_commit();

    const uint8_t* stage = smem + ((kt - kt0) % kWgStages) * Sh::kStage;
    const uint8_t* wl0 = stage + warp * Sh::kWarpStage + lane * 16;
    const uint8_t* act = stage + 4 * Sh::kWarpStage;
    TileRegs<T> regs[MT] = {};
#pragma unroll
    for (int m = 0; m < MT; ++m) load_tile_regs<T>(wl0 + m * S::kPieces * 512, wl0 + (m * S::kPieces + S::kLanePieces) * 512, regs[m]);

    auto block = [&](auto bconst) {
      constexpr int B = decltype(bconst)::value;
      BlockFrags fr[MT];
      BlockScales sc[MT];
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const uint8_t* wl = wl0 + m * S::kPieces * 512;
        decode_block<T, B, true>(wl, wl + S::kLanePieces * 512, wl + (S::kLanePieces + 2) * 512, regs[m], fr[m], sc[m]);
      }
      wgmma_fence();
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        if constexpr (kTwoD) {
          wgmma_f16<N>(d[m], fr[m].a[0], act + (2 * B) * Sh::kSlice, false);
          wgmma_f16<N>(d2[m], fr[m].a[1], act + (2 * B + 1) * Sh::kSlice, false);
        } else {
          wgmma_f16<N>(d[m], fr[m].a[0], act + (2 * B) * Sh::kSlice, false);
          wgmma_f16<N>(d[m], fr[m].a[1], act + (2 * B + 1) * Sh::kSlice, true);
        }
      }
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int m = 0; m < MT; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i) reg_fence(fr[m].a[h][i]);
#pragma unroll
        for (int i = 0; i < kD; ++i) {
          reg_fence(d[m][i]);
          if constexpr (kTwoD) reg_fence(d2[m][i]);
        }
#pragma unroll
        for (int i = 0; i < kD; ++i) {
          const int h = (i >> 1) & 1;  // row g (0) or g + 8 (1)
          acc[m][i] = __fmaf_rn(sc[m].s[h], d[m][i], acc[m][i]);
          if constexpr (kTwoD) acc[m][i] = __fmaf_rn(sc[m].s2[h], d2[m][i], acc[m][i]);
        }
      }
    };
    for_each_block(block);
  }
  cp_async_wait<0>();

  // The segments meet in the canonical tree (as matmul_kernel.cuh).
  constexpr int kElems = MT * kD;
  float* part = reinterpret_cast<float*>(smem) + (warp * kElems) * 32 + lane;  // [warp][elem][lane]
  if (a.segs > 1) {
    __syncthreads();
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int i = 0; i < kD; ++i) part[(m * kD + i) * 32] = acc[m][i];
    cluster_sync();
  }
  auto total = [&](int m, int i) {
    if (a.segs == 1) return acc[m][i];
    float* p = part + (m * kD + i) * 32;
    return segment_tree(a.segs, [&](int s) { return *cluster_map(p, s); });
  };

#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
      const int64_t lr = n0 + 8 * j + 2 * t + cc;
#pragma unroll
      for (int m = 0; m < mt_rows; ++m) {
        const int rg = rg0 + m;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = 4 * j + 2 * h + cc;
          if ((m * kD + i) % a.segs != seg) continue;
          const int64_t jo = static_cast<int64_t>(rg) * kGroupRows + g + 8 * h;
          if (lr >= rows || jo >= tg.n_out) continue;
          const float scale = exp2_int(a.exps[lr]);
          float* orow = tg.out + lr * tg.out_stride;
          const float v = __fmul_rn(total(m, i), scale);
          if constexpr (SW) {
            const float u = __fmul_rn(total(m + mt_rows, i), scale);
            orow[jo] = __fmul_rn(silu(v), u);
          } else {
            orow[jo] = tg.accumulate ? __fadd_rn(orow[jo], v) : v;
          }
        }
      }
    }
  }
  if (a.segs > 1) cluster_sync();
}

template <GgmlType T, int N, int MT, bool SW>
void launch_wg_shape(const Args& args, int64_t row_tiles, cudaStream_t stream) {
  auto kernel = matmul_wg_kernel<T, N, MT, SW>;
  constexpr size_t smem = WgShape<T, N, MT>::kSmem;
  static_assert(static_cast<size_t>(MT * N / 2) * kWgThreads * sizeof(float) <= smem, "partials fit in the stages");
  static bool configured = false;
  if (!configured) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    configured = true;
  }
  const int64_t seq_tiles = (args.rows + N - 1) / N;
  const int64_t grid_y = row_tiles * args.segs;
  MEMRA_ASSERT(seq_tiles <= 0x7fffffff && grid_y <= 65535, "matmul: launch too large ({} x {} blocks)", seq_tiles,
               grid_y);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(seq_tiles), static_cast<unsigned>(grid_y), 1);
  cfg.blockDim = dim3(kWgThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  int n_attr = 0;
  attr[n_attr].id = cudaLaunchAttributeClusterDimension;
  attr[n_attr].val.clusterDim.x = 1;
  attr[n_attr].val.clusterDim.y = static_cast<unsigned>(args.segs);
  attr[n_attr].val.clusterDim.z = 1;
  ++n_attr;
  if (pdl_enabled()) {
    attr[n_attr].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n_attr].val.programmaticStreamSerializationAllowed = 1;
    ++n_attr;
  }
  cfg.attrs = attr;
  cfg.numAttrs = static_cast<unsigned>(n_attr);
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args));
}

// n: 16, 32 or 64 activation rows a block; mt: row groups a warp (SwiGLU: 2, gate and up).
template <GgmlType T>
void launch_wg_type(const Args& args, int n, int mt, int64_t row_tiles, cudaStream_t stream) {
  if (args.swiglu) {
    if (n == 64) return launch_wg_shape<T, 64, 2, true>(args, row_tiles, stream);
#ifndef MEMRA_CUDASIM  // the emulation builds the 64-row shapes only (k_matmul.cu)
    if (n == 32) return launch_wg_shape<T, 32, 2, true>(args, row_tiles, stream);
    if (n == 16) return launch_wg_shape<T, 16, 2, true>(args, row_tiles, stream);
#endif
  } else {
    if (n == 64 && mt == 1) return launch_wg_shape<T, 64, 1, false>(args, row_tiles, stream);
    if (n == 64 && mt == 2) return launch_wg_shape<T, 64, 2, false>(args, row_tiles, stream);
#ifndef MEMRA_CUDASIM
    if (n == 32 && mt == 1) return launch_wg_shape<T, 32, 1, false>(args, row_tiles, stream);
    if (n == 32 && mt == 2) return launch_wg_shape<T, 32, 2, false>(args, row_tiles, stream);
    if (n == 16 && mt == 1) return launch_wg_shape<T, 16, 1, false>(args, row_tiles, stream);
    if (n == 16 && mt == 2) return launch_wg_shape<T, 16, 2, false>(args, row_tiles, stream);
#endif
  }
  MEMRA_ASSERT(false, "matmul: no warpgroup kernel for {} rows x {} m-tiles", n, mt);
}

}  // namespace memra::cuda::matmul_impl
