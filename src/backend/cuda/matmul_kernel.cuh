// The matmul family's kernel and its launch by tile shape (k_matmul.cu explains the design and
// chooses the shape). Instantiated per weight type in k_matmul_inst_*.cu, so the heavy template
// compiles in parallel.
#pragma once

#include <algorithm>
#include <type_traits>
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/matmul_tile_decode.cuh"
#include "backend/cuda/mma_f16.cuh"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda::matmul_impl {


constexpr int kMaxTargets = 4;
constexpr int kActTileBytes = kTileBlocks * 8 * 4 * 16;  // one n-tile's fragments of one k-tile: 4 KiB
constexpr int kSumTileBytes = 8 * 32;                    // its block-sum fragments (F16Act::sums): 256 bytes
// In shared memory a stage holds the block's n-tiles of one k-tile in the F16Act layout,
// [n][b][g][t] 16-byte pieces (4 KiB an n-tile): the 8 lanes of each LDS.128 phase (rows g, g + 1;
// t = 0..3) read 128 contiguous bytes, so no padding is needed, and an ungrouped launch fills it
// with one bulk copy an n-tile (see issue_acts).

struct Target {
  const uint8_t* w;   // matrix base (device layout)
  const uint8_t* up;  // SwiGLU: the up matrix (same geometry)
  float* out;
  int64_t out_stride;
  int64_t n_out;
  int n_rg;
  int accumulate;
};

struct Args {
  Target t[kMaxTargets];
  int tile_begin[kMaxTargets + 1];  // first row group of each target, all targets numbered end to end
  int n_targets;
  int swiglu;
  int segs;             // K segments (matmul_order.h): the blocks of a cluster along grid y
  int64_t group_stride;
  int tile_bytes;
  int n_kt;
  int64_t rows;         // activation rows (grouped: the most a group can have)
  int64_t shape_rows;   // rows the tile shape is chosen for (0: rows); grid x still covers rows
  int rows_cap;         // activation rows a block stages: min(8 NT, rows)
  const uint8_t* act;   // F16Act fragments
  const uint8_t* act_lo;
  const uint8_t* sums;
  const int32_t* exps;
  // Grouped launches (mixture-of-experts): grid z is a group slot; slot z multiplies matrix
  // grp_expert[z] (mat_stride bytes apart in t[0].w / t[0].up) with the activation rows
  // act_row[grp_off[z] .. grp_off[z+1]) (F16Act rows) and writes output rows grp_off[z] ...;
  // a slot past the used ones has an empty range. Null grp_off: one group of `rows` rows.
  const int32_t* grp_off;
  const int32_t* grp_expert;
  const int32_t* act_row;
  size_t mat_stride;
  const uint8_t* shared_w;   // grp_expert -1: the shared expert's matrices
  const uint8_t* shared_up;
  int groups;  // grid z: group slots (1 without groups), or the entries of `tiles`
  // With a block list (GroupTiles): block z takes entry tiles[z] = xt * tile_slots + slot (-1:
  // none), its slot's row tile xt; grid x is 1.
  const int32_t* tiles;
  int tile_slots;
  int tile_rows;  // rows a listed tile covers: the launch's 8 NT (checked by run())
  // The streaming kernel (matmul_stream_kernel.cuh): row groups a block owns at a time, the
  // number of such sets, and the depth of each warp's copy ring.
  int set_rgs;
  int n_sets;
  int stages;
  int parts;  // warps a (row group, K segment) unit is split over (1: one warp a unit)
};

template <GgmlType T, int MT, int NT>
struct Shape {
  using S = TileSpec<T>;
  static constexpr int kWarpStage = MT * S::f.tile_bytes;  // one warp's verbatim weight tiles per stage
  // Stage: the warps' weight tiles, activation n-tiles (hi, then lo for the float types), sums.
  static constexpr int kActBytes = NT * kActTileBytes * (S::kUsesLo ? 2 : 1);
  static constexpr int kActSumBytes = kActBytes + (S::kUsesSums ? NT * kSumTileBytes : 0);
  MEMRA_ORDER_HD static constexpr int stage_bytes(int warps) { return warps * kWarpStage + kActSumBytes; }
};

// SW: SwiGLU launch (m-tiles [0, MT/2) of gate, [MT/2, MT) of up, the same rows). ONE_ROW: every
// group has at most one activation row (a.rows == 1), column 0 of the n-tile, so the lanes' odd
// outputs are padding and are not folded (block_products); the stored outputs keep their bits.
// THREADS: the block size the registers are allocated for (256, or wide_shape_threads(T) at (2, 8)).
template <GgmlType T, int MT, int NT, bool SW, int STAGES, bool ONE_ROW = false, int THREADS = 256>
__global__ void __launch_bounds__(THREADS) matmul_kernel(const Args a) {
  using S = TileSpec<T>;
  using Sh = Shape<T, MT, NT>;
  MEMRA_DYNAMIC_SMEM(uint8_t, smem, 16);
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int n_warps = static_cast<int>(blockDim.x) / 32;
  const int g = lane / 4, t = lane % 4;
  const int rows_cap = a.rows_cap;
  const int stage_bytes = Sh::stage_bytes(n_warps);
  constexpr int lo_off = NT * kActTileBytes, sums_off = Sh::kActBytes;
  const int act_off = n_warps * Sh::kWarpStage;

  // Which target, row groups and K segment this CTA owns.
  const int seg = static_cast<int>(blockIdx.y) % a.segs;
  const int tile = static_cast<int>(blockIdx.y) / a.segs;
  const int kt0 = seg * a.n_kt / a.segs, kt1 = (seg + 1) * a.n_kt / a.segs;
  // Row tiles run over the targets' row groups end to end (a tile may hold the end of one target
  // and the start of the next); each target starts at a multiple of a warp's m-tiles (run()), so
  // a warp's row groups are one target's. Warps past the last target's rows copy and store nothing.
  constexpr int mt_rows = SW ? MT / 2 : MT;  // row groups per warp
  const int rgg = (tile * n_warps + warp) * mt_rows;  // the warp's first row group, all targets
  int e = 0;
  while (e + 1 < a.n_targets && rgg >= a.tile_begin[e + 1]) ++e;
  const Target& tg = a.t[e];
  const int rg0 = rgg - a.tile_begin[e];
  int64_t n8_0 = static_cast<int64_t>(blockIdx.x) * NT;  // first n-tile of the CTA

  // The group: its rows and matrix. The tables come from the kernel before (routing), so a
  // grouped launch reads them, and only then its weights, after the wait.
  const bool grouped = a.grp_off != nullptr;
  int64_t row0 = 0, rows = a.rows;
  const uint8_t *wbase = tg.w, *ubase = tg.up;
  if (grouped) {
    pdl_wait();
    int z = static_cast<int>(blockIdx.z);
    if (a.tiles) {
      const int32_t entry = a.tiles[z];
      if (entry < 0) return;  // past the list: the whole cluster (same z) leaves together
      z = entry % a.tile_slots;
      n8_0 = static_cast<int64_t>(entry / a.tile_slots) * NT;
    }
    row0 = a.grp_off[z];
    rows = a.grp_off[z + 1] - row0;
    if (rows <= n8_0 * 8) return;  // the whole cluster (same x and z) leaves together
    const int expert = a.grp_expert[z];
    if (expert < 0) {
      wbase = a.shared_w;
      if (SW) ubase = a.shared_up;
    } else {
      const size_t off = a.mat_stride * static_cast<size_t>(expert);
      wbase += off;
      if (SW) ubase += off;
    }
  }
  const uint8_t* wtile[MT];  // k-tile 0 of each m-tile's row group (nullptr: past the matrix)
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const int rg = rg0 + (m % mt_rows);
    const uint8_t* base = (SW && m >= mt_rows) ? ubase : wbase;
    wtile[m] = rg < tg.n_rg ? base + static_cast<int64_t>(rg) * a.group_stride : nullptr;
  }

  // Staged rows past the last activation row are padding: an output column depends on its own
  // B column only, and padding columns are never stored, so their contents do not matter (an
  // ungrouped launch copies whole n-tiles, padding rows included; other stage bytes keep what
  // they hold). src_row: each staged row's row in the F16Act.
  const int64_t left = rows - n8_0 * 8;
  const int rows_here = left < rows_cap ? static_cast<int>(left) : rows_cap;
  int64_t* src_row = reinterpret_cast<int64_t*>(smem + STAGES * stage_bytes);  // after the stages
  // Stage s's bulk copies complete on bars[s] (below).
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + STAGES * stage_bytes + 8 * 8 * NT);
  for (int r = tid; r < rows_here; r += blockDim.x) {
    const int64_t lr = row0 + n8_0 * 8 + r;
    src_row[r] = a.act_row ? a.act_row[lr] : lr;
  }
  // Stage s completes on bars[s]: one arrival a warp (lane 0: its weight tiles' bulk copies) and
  // one of thread 0 (the activations' bulk copies; none when grouped or one row, whose rows are
  // per-thread cp.async groups, waited for with cp_async_wait). Why bulk copies: per-lane copies
  // cost every thread ~5 copies a k-tile of weights (the per-row scales copied once a lane) and
  // ~4-8 of activations with their address arithmetic; one instruction a tile instead gave, H200,
  // 9B Q4_0, tg32 @ d512 (2026-12-04, same bits): B = 1 376 -> 391 tok/s, B = 8 2,412 -> 2,633,
  // B = 16 3,811 -> 4,137, B = 64 5,504 -> 6,313, pp512 9,156 -> 10,064 (activations alone in bulk:
  // B = 16 3,965, B = 64 5,561, pp512 9,547).
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) mbarrier_init(bars + s, n_warps + 1);
    mbarrier_init_fence();
  }
  __syncthreads();  // src_row, the barriers
  // The n-tiles of the F16Act this block's rows cover (an ungrouped launch: rows are n-tiles).
  const int nt_here = (left + 7) / 8 < NT ? static_cast<int>((left + 7) / 8) : NT;
  // A one-row block copies its row's 32 pieces by per-thread cp.async (a commit group, as grouped
  // launches do) instead of the whole 4 KiB n-tile in bulk: 8x the bytes cost one-row launches
  // time. H200, tg128 (2026-12-04, same bits): 2B BF16 491 -> 514 tok/s, 9B Q4_0 / Q4_K flat.
  const bool bulk_acts = !grouped && rows_here >= 2;

  // k-tile kt of the segment goes to stage (kt - kt0) % STAGES.
  const uint64_t wpol = weight_read_policy();  // the weights' L2 policy: evict_first
  auto issue_weights = [&](int kt) {
    if (kt >= kt1) return;
    if (lane != 0) return;
    const int stage = (kt - kt0) % STAGES;
    uint8_t* dst = smem + stage * stage_bytes + warp * Sh::kWarpStage;
    int n_tiles = 0;
#pragma unroll
    for (int m = 0; m < MT; ++m) n_tiles += wtile[m] != nullptr;
    fence_proxy_async();  // the block's reads of this stage's last k-tile (ordered by the barrier) come first
    mbarrier_arrive_expect(bars + stage, n_tiles * S::f.tile_bytes);
#pragma unroll
    for (int m = 0; m < MT; ++m)
      if (wtile[m])
        bulk_copy_hint(dst + m * S::f.tile_bytes, wtile[m] + static_cast<int64_t>(kt) * a.tile_bytes, S::f.tile_bytes,
                       bars + stage, wpol);
  };
  // Ungrouped from 2 rows: one bulk copy an n-tile (4 KiB, [b][g][t]: the staged layout), its lo and sums,
  // completing on the stage's barrier (thread 0 is warp 0's lane 0: issue_weights, always called
  // first for the same k-tile, made its proxy fence). Grouped (rows gathered through act_row) or one row: piece i of the
  // block's rows is row i / 32, block (i / 4) % 8, t = i % 4, copied by the block's threads.
  auto issue_acts = [&](int kt) {
    if (kt >= kt1) return;
    const int stage = (kt - kt0) % STAGES;
    uint8_t* dst = smem + stage * stage_bytes + act_off;
    if (tid == 0) mbarrier_arrive_expect(bars + stage, bulk_acts ? nt_here * (Sh::kActSumBytes / NT) : 0);
    if (bulk_acts) {
      if (tid == 0) {
        for (int n = 0; n < nt_here; ++n) {
          const int64_t src = ((n8_0 + n) * a.n_kt + kt) * kActTileBytes;
          bulk_copy(dst + n * kActTileBytes, a.act + src, kActTileBytes, bars + stage);
          if constexpr (S::kUsesLo) bulk_copy(dst + lo_off + n * kActTileBytes, a.act_lo + src, kActTileBytes, bars + stage);
          if constexpr (S::kUsesSums)
            bulk_copy(dst + sums_off + n * kSumTileBytes, a.sums + ((n8_0 + n) * a.n_kt + kt) * kSumTileBytes,
                      kSumTileBytes, bars + stage);
        }
      }
      return;
    }
    for (int i = tid; i < rows_here * 32; i += blockDim.x) {
      const int row = i >> 5, b = (i >> 2) & 7, pt = i & 3;
      const int64_t sr = src_row[row];
      const int64_t src = ((sr >> 3) * a.n_kt + kt) * kActTileBytes + b * 512 + (sr & 7) * 64 + pt * 16;
      const int off = (row >> 3) * kActTileBytes + b * 512 + (row & 7) * 64 + pt * 16;
      cp_async16(dst + off, a.act + src);
      if constexpr (S::kUsesLo) cp_async16(dst + lo_off + off, a.act_lo + src);
    }
    if constexpr (S::kUsesSums) {  // 32 bytes a row: sums[n8][kt][g][t]
      for (int i = tid; i < rows_here * 2; i += blockDim.x) {
        const int row = i >> 1, half = i & 1;
        const int64_t sr = src_row[row];
        cp_async16(dst + sums_off + (row >> 3) * kSumTileBytes + (row & 7) * 32 + half * 16,
                   a.sums + ((sr >> 3) * a.n_kt + kt) * kSumTileBytes + (sr & 7) * 32 + half * 16);
      }
    }
  };

  // Prologue: the weights of the first STAGES-1 k-tiles (before the wait: no kernel writes them),
  // then their activations; one commit group each (see the wait count below).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    issue_weights(kt0 + s);
    cp_async_commit();
  }
  if (!grouped) pdl_wait();
  pdl_launch_dependents();
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    issue_acts(kt0 + s);
    cp_async_commit();
  }

  float acc[MT][NT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.0f;

#pragma unroll 1
  for (int kt = kt0; kt < kt1; ++kt) {
    // Groups committed so far: 2 (STAGES - 1) + kt; k-tile kt's data is in the one that leaves
    // STAGES - 2 after it. The barrier then also frees the buffer of k-tile kt - 1 for reuse.
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    issue_weights(kt + STAGES - 1);
    issue_acts(kt + STAGES - 1);
    cp_async_commit();
    mbarrier_wait(bars + (kt - kt0) % STAGES, static_cast<uint32_t>((kt - kt0) / STAGES) & 1u);

    const uint8_t* stage = smem + ((kt - kt0) % STAGES) * stage_bytes;
    const uint8_t* tile0 = stage + warp * Sh::kWarpStage;
    const uint8_t* act = stage + act_off;
    TileRegs<T> regs[MT] = {};
    constexpr int kRowBytes = S::kRowBytes;
#pragma unroll
    for (int m = 0; m < MT; ++m)
      load_tile_regs<T>(tile0 + m * S::f.tile_bytes + lane * 16,
                        tile0 + m * S::f.tile_bytes + S::f.row_data_off + g * kRowBytes, t, regs[m]);

    auto block = [&](auto bconst) {
      constexpr int B = decltype(bconst)::value;
      // B fragments: lane (g, t) of n-tile n reads row 8n + g of the staged n-tile. Rows past the
      // activation rows are the MMA's padding columns, whose outputs are never stored (an output
      // column depends on its own B column only), so they are read as they are, without a predicate.
      uint4 bf[NT];
      [[maybe_unused]] uint4 bl[NT];
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const int off = n * kActTileBytes + B * 512 + g * 64 + t * 16;
        bf[n] = lds<uint4>(act + off);
        if constexpr (S::kUsesLo) bl[n] = lds<uint4>(act + lo_off + off);
      }
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const uint8_t* tile = tile0 + m * S::f.tile_bytes;
        const uint8_t* wl = tile + lane * 16;
        BlockFrags fr;
        BlockScales sc;
        decode_block<T, B, (NT <= 2)>(wl, tile + S::f.row_data_off + g * kRowBytes, tile + S::f.d_off + g * 4,
                                      regs[m], fr, sc);
#pragma unroll
        for (int n = 0; n < NT; ++n) block_products<T, !ONE_ROW>(wl, B, fr, sc, bf[n], bl[n], acc[m][n]);
      }
    };
    for_each_block(block);
    if constexpr (S::kUsesSums) {
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const uint2 sf = lds<uint2>(act + sums_off + n * kSumTileBytes + lane * 8);
#pragma unroll
        for (int m = 0; m < MT; ++m) min_term<T, !ONE_ROW>(regs[m], sf, acc[m][n]);
      }
    }
  }
  cp_async_wait<0>();

  // The segments' sums meet in the canonical tree (matmul_order.h): each block of the cluster
  // leaves its partials in its own shared memory, and block `seg` finishes the elements whose
  // index is seg modulo segs, reading every block's partial of them.
  constexpr int kElems = MT * NT * 4;
  float* part = reinterpret_cast<float*>(smem) + (warp * kElems) * 32 + lane;  // [warp][elem][lane]
  if (a.segs > 1) {
    __syncthreads();  // every warp is done with the stages the partials overwrite
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) part[((m * NT + n) * 4 + i) * 32] = acc[m][n][i];
    cluster_sync();
  }
  auto total = [&](int m, int n, int i) {
    if (a.segs == 1) return acc[m][n][i];
    float* p = part + ((m * NT + n) * 4 + i) * 32;
    return segment_tree(a.segs, [&](int s) { return *cluster_map(p, s); });
  };

  // Epilogue: scale by the row exponent, then store / accumulate / SwiGLU.
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
      const int64_t lr = (n8_0 + n) * 8 + 2 * t + cc;  // the row within the group
#pragma unroll
      for (int m = 0; m < mt_rows; ++m) {
        const int rg = rg0 + m;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = 2 * h + cc;
          if (((m * NT + n) * 4 + i) % a.segs != seg) continue;
          const int64_t j = static_cast<int64_t>(rg) * kGroupRows + g + 8 * h;
          if (lr >= rows || j >= tg.n_out) continue;
          const int r = static_cast<int>(lr - n8_0 * 8);  // staged row
          const float scale = exp2_int(a.exps[src_row[r]]);
          float* orow = tg.out + (row0 + lr) * tg.out_stride;
          const float v = __fmul_rn(total(m, n, i), scale);
          if constexpr (SW) {
            const float u = __fmul_rn(total(m + mt_rows, n, i), scale);
            orow[j] = __fmul_rn(silu(v), u);
          } else {
            orow[j] = tg.accumulate ? __fadd_rn(orow[j], v) : v;
          }
        }
      }
    }
  }
  if (a.segs > 1) cluster_sync();  // no block leaves while another reads its partials
}

struct Config {
  int mt, nt, warps;
};

// Pipeline depth: 2 k-tiles, one in flight while one is computed, for every shape. The kernels are
// latency-bound at decode sizes, with shared memory setting how many warps an SM holds, and more
// warps beat deeper pipelines (H200, 9B Q4_0, 2026-12-02, the depth never changes bits): tg128 at
// 1-2 n-tiles, 3 -> 2 stages, B = 1 297 -> 304 tok/s and B = 16 2,596 -> 3,007 (4 and 5 stages:
// 244 and 207 at B = 1); at 4 n-tiles B = 32 3,736 -> 3,870; 8 n-tiles and the float types' wide
// tiles were at 2 already (a k-tile's tensor-core work outlasts its loads). run() sizes the block.
constexpr int kStages = 2;

// The block size of the (2, 8) shape (two m-tiles, 8 n-tiles: more than 32 rows): its kernel's
// register budget and, in warps, what pick_config asks for before run() halves it for shared
// memory. 384 threads where the kernel compiles for them with its k-loop
// nearly spill-free: Q4_0 and Q4_K take 168 registers (from 195-201 at 256 threads, where one 8-warp
// block fills an SM's 138 KB of stages); ptxas keeps 56-80 bytes of stack, and at most one local
// load or store lies between the first and last tensor-core instruction (SASS, 2026-12-05).
// 12 warps (175-190 KB) hold an SM at 3 warps a scheduler instead of 2: the kernel is
// latency-bound there (Nsight: tensor pipe 26%, 62% of cycles without an eligible warp).
// H100, 9B synth, pp512 (2026-12-05, same call, bits identical): Q4_0 9,719 / 9,827 -> 10,372 /
// 10,382 tok/s (SwiGLU 572 -> 509 us a call, ffn_down 344 -> 299, fused qkv 462 -> 439); Q4_K 9,148
// / 9,127 -> 9,494 / 9,459; 16 warps (128 registers, 16 spills in Q4_0's loop) 9,762 / 9,850. Q8_0's
// 12-warp stages would not fit (run() would halve them to 6), Q5_K / Q6_K spill at 8 already.
constexpr int wide_shape_threads(GgmlType t) { return t == GgmlType::Q4_0 || t == GgmlType::Q4_K ? 384 : 256; }

template <GgmlType T, int MT, int NT, bool SW, bool ONE_ROW = false, int THREADS = 256>
void launch_shape(const Args& args, int warps, int64_t row_tiles, cudaStream_t stream) {
  MEMRA_ASSERT(!ONE_ROW || args.rows == 1, "matmul: the one-row kernel takes one row a group");
  MEMRA_ASSERT(warps >= 1 && 32 * warps <= THREADS, "matmul: {} warps for a kernel of {} threads", warps, THREADS);
  auto kernel = matmul_kernel<T, MT, NT, SW, kStages, ONE_ROW, THREADS>;
  // The stages, then the staged rows' source rows (int64 each).
  const size_t smem = static_cast<size_t>(kStages) * Shape<T, MT, NT>::stage_bytes(warps) +
                      sizeof(int64_t) * static_cast<size_t>(8 * NT) + sizeof(uint64_t) * kStages;
  MEMRA_ASSERT(static_cast<size_t>(MT * NT * 4) * 32 * warps * sizeof(float) <= smem, "partials fit in the stages");
  static size_t configured = 0;  // the dynamic shared memory limit raised so far for this kernel
  if (smem > configured) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    configured = smem;
  }
  const int64_t seq_tiles = args.tiles ? 1 : (args.rows + 8 * NT - 1) / (8 * NT);
  const int64_t grid_y = row_tiles * args.segs;
  MEMRA_ASSERT(seq_tiles <= 0x7fffffff && grid_y <= 65535, "matmul: launch too large ({} x {} blocks)", seq_tiles,
               grid_y);
  cudaLaunchConfig_t cfg{};
  MEMRA_ASSERT(args.groups >= 1 && args.groups <= 65535);
  cfg.gridDim = dim3(static_cast<unsigned>(seq_tiles), static_cast<unsigned>(grid_y), static_cast<unsigned>(args.groups));
  cfg.blockDim = dim3(32 * warps);
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

// One activation row (a group of at most one row) takes the 1-n-tile shapes' ONE_ROW form: the
// launches of a one-row step that do not stream (the output head, fused projections, the MoE
// experts). Its own instantiation, so the 2-8-row kernels keep their code and registers.
template <GgmlType T>
void launch_type(const Args& args, const Config& c, int64_t row_tiles, cudaStream_t stream) {
  const bool one_row = args.rows == 1;
  constexpr int kWide = wide_shape_threads(T);
  if (args.swiglu) {
    if (c.nt == 1 && one_row) return launch_shape<T, 2, 1, true, true>(args, c.warps, row_tiles, stream);
    if (c.nt == 1) return launch_shape<T, 2, 1, true>(args, c.warps, row_tiles, stream);
    if (c.nt == 8) return launch_shape<T, 2, 8, true, false, kWide>(args, c.warps, row_tiles, stream);
#ifndef MEMRA_CUDASIM  // k_matmul.cu: the emulation builds the 1- and 8-n-tile shapes only
    if (c.nt == 2) return launch_shape<T, 2, 2, true>(args, c.warps, row_tiles, stream);
    if (c.nt == 4) return launch_shape<T, 2, 4, true>(args, c.warps, row_tiles, stream);
#endif
  } else {
    if (c.mt == 1 && c.nt == 1 && one_row) return launch_shape<T, 1, 1, false, true>(args, c.warps, row_tiles, stream);
    if (c.mt == 1 && c.nt == 1) return launch_shape<T, 1, 1, false>(args, c.warps, row_tiles, stream);
    if (c.mt == 2 && c.nt == 8) return launch_shape<T, 2, 8, false, false, kWide>(args, c.warps, row_tiles, stream);
#ifndef MEMRA_CUDASIM
    if (c.mt == 1 && c.nt == 2) return launch_shape<T, 1, 2, false>(args, c.warps, row_tiles, stream);
    if (c.mt == 2 && c.nt == 4) return launch_shape<T, 2, 4, false>(args, c.warps, row_tiles, stream);
#endif
  }
  MEMRA_ASSERT(false, "matmul: no kernel for shape {}x{}", c.mt, c.nt);
}

}  // namespace memra::cuda::matmul_impl
