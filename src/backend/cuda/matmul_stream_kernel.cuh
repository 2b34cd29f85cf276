// The matmul family's streaming kernel for decode steps of one activation row (column 0 of an n-tile):
// matmul_order.h's canonical order (the bits of matmul_kernel.cuh's shapes, which the op tests
// compare), laid out so that each warp streams its weights on its own. k_matmul.cu (plan_stream)
// runs it where it measured faster: one row, the SwiGLU pair and single matrices below 4096 row
// groups (H200, 9B Q4_0 tg B = 1 352.5 -> 370.1 tok/s; at 2-8 rows the activations it keeps per
// block cost warps and it lost 6-18%; bench/results/2026-12-02-1830-h200-session11.md).
//
// Why a second kernel: at one n-tile a k-tile is ~330 instructions of decode and tensor-core work
// per 2.3 KB of Q4_0 weights, so a launch is bound by how many weight bytes each SM keeps in
// flight. matmul_kernel.cuh stages the CTA's activation n-tiles per k-tile (a block barrier every
// k-tile; until 2026-12-04 it also copied each lane's rows' scales redundantly); its stage count is
// fixed, so a launch either keeps one k-tile in flight a warp or loses a wave to shared memory
// (H200, 2026-12-02: 3-5 stages ran B = 1 at 297 / 244 / 207 tok/s against 2 stages' 304).
//
// Here:
//   - the block copies the activation rows of every k-tile once, after the PDL wait (1-8 rows of
//     n_in f16 values: 8 KiB for one row of 4096 columns), and keeps them for all its work;
//   - each warp owns a ring of `stages` slots; a slot is a verbatim copy of the warp's weight tiles
//     of one k-tile (the tile's bytes; kBulkRing below says how they are copied), and the warp
//     waits on its own copies only (never a block barrier between k-tiles);
//   - a warp's work is a (row group, K segment) unit; a block of W = segs * R warps owns R row
//     groups at a time (a "set"), every segment of them, and walks sets gridDim.x apart, so the
//     segment partials meet in shared memory in matmul_order.h's tree and a persistent grid keeps
//     its pipelines full across sets (the copies of the next set's first k-tiles are in flight
//     while the last k-tiles of the set are computed);
//   - the host picks `stages` so the launch's sets fit on the SMs in one wave where they can
//     (k_matmul.cu), from 3 to kStreamMaxStages.
// What it showed: 3-8 k-tiles in flight a warp instead of one moved the one-row matmuls by only
// 3-10%, so that kernel is bound by instruction issue (~330 a Q4_0 k-tile), not bytes in flight.
// Converting the float row to the f16 form inside this kernel (each block: the row's largest
// magnitude, then act_f16's conversion; no act_f16 launch) gave the same bits and ran slower: 9B
// Q4_0 tg128 B = 1 369.8 -> 343.2 tok/s (H200, 2026-12-02; ffn_down 24 -> 26.8 us: every block
// reads and converts the whole row), so the form is made once, by act_f16 or the RMSNorm.
#pragma once

#include "backend/cuda/matmul_kernel.cuh"

namespace memra::cuda::matmul_impl {

constexpr int kStreamMaxStages = 8;

// Shared memory of a streaming block (bytes): the activation rows of every k-tile (hi, lo, sums),
// the segment partials, the split form's block terms (two rounds' worth: every warp's k-tile of a
// round, [round parity][warp][m][fold slot][row][kFoldTerms]), then each warp's ring.
struct StreamSmem {
  int act, act_lo, sums, red, terms, ring, slot, bars, total;
};
// Shared memory a ring slot costs beyond its tile bytes: its barrier.
constexpr int kSlotBarrierBytes = 8;
// One activation row: its k-tiles are 512 bytes each (hi, and lo for the float types).
MEMRA_ORDER_HD inline StreamSmem stream_smem(GgmlType type, int mt, int n_kt, int warps, int segs, int stages,
                                             int parts = 1) {
  const TileFormat f = tile_format(type);
  const bool lo = type == GgmlType::F16 || type == GgmlType::BF16 || type == GgmlType::F32;
  const bool sums = type == GgmlType::Q4_K || type == GgmlType::Q5_K;
  StreamSmem s{};
  s.act = 0;
  s.act_lo = n_kt * 512;
  s.sums = s.act_lo + (lo ? n_kt * 512 : 0);
  s.red = s.sums + (sums ? n_kt * kSumTileBytes : 0);
  s.terms = s.red + (segs > 1 ? warps * mt * 4 * 32 * 4 : 0);
  s.ring = s.terms + (parts > 1 ? 2 * warps * mt * fold_slots(type) * kGroupRows * fold_terms(type) * 4 : 0);
  s.slot = mt * f.tile_bytes;
  s.bars = s.ring + warps * stages * s.slot;  // a multiple of 16: every part above is
  s.total = s.bars + warps * stages * kSlotBarrierBytes;
  return s;
}

// Waits until at most n (runtime, 0..kStreamMaxStages-1) of this thread's copy groups are pending.
__device__ __forceinline__ void cp_async_wait_n(int n) {
  switch (n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    default: cp_async_wait<7>(); break;
  }
}

// How a warp fills its ring slots: per-lane cp.async (16 bytes a lane a copy, one commit group a
// k-tile), or one bulk copy a tile from lane 0 completing on the slot's mbarrier. Bulk where a
// tile is 3 KiB or more (a lane's share is 6.5+ copies). H200, 2026-12-03, tg128 B = 1, bits
// identical, two rounds each: 9B Q8_0 (4,352-byte tiles) 274.6 / 275.2 / 276.0 / 276.6 -> 281.8 /
// 282.6 / 282.0 / 282.5 tok/s (+2.3%), 9B Q6_K (3,360) 216.0 / 216.7 -> 219.7 / 219.8 (+1.6%), 2B
// BF16 (8,192) 496.8 / 494.4 -> 502.2 / 498.6 (+1%); at Q4_0's 2,304 bytes bulk copies measured
// 0.4-0.6% slower (9B 387.6 / 385.4 -> 385.1 / 383.9; 2B flat); Q4_K / Q5_K (2,304 / 2,816) unmeasured.
template <GgmlType T>
constexpr bool kBulkRing = TileSpec<T>::f.tile_bytes >= 3072;

// a.segs, a.n_kt, a.rows = a.rows_cap = 1 (column 0 of the n-tile: only the lanes' even outputs are
// folded), a.t / a.tile_begin (first global row group
// of each target), a.set_rgs (R), a.n_sets, a.stages, a.parts. Not grouped. SW: m-tile 0 is the
// gate's row group, m-tile 1 the up matrix's same row group.
//
// SPLIT (a.parts = P > 1, one activation row): a (row group, K segment) unit is P warps. Warp p
// takes the unit's k-tiles kt0 + p, kt0 + p + P, ...: it decodes them and makes the blocks'
// tensor-core dots, and leaves each block's epilogue terms (block_products' scales and dots, of
// the one stored column) in shared memory; in round r the P warps do the r-th k-tile each, and
// after a block barrier warp 0 of the unit folds the round's k-tiles' blocks in order into its
// outputs (lane m * 16 + j: row j of m-tile m). The dots are the same instructions on the same
// operands, the fold is the same fused multiply-adds in the same order: the bits of P = 1.
// Why: a 4096-row matrix has 512 units for 528 warp schedulers, so at P = 1 each scheduler runs
// one warp's serial chain of 8 k-tiles at ~16% issue (Nsight Compute, H200, 2026-12-02). Measured
// (H200, 2026-12-03): 9B ssm_out 12.8 -> 12.2 us a call, tg128 B = 1 371.6 -> 372.6 (within noise;
// the launch, not the chain, is most of those 12 us); 35B-A3B tg64 B = 1 370.4 -> 380.2, where the
// router and its shared-expert gate (2 targets, 17 row groups) now stream split.
template <GgmlType T, bool SW, bool SPLIT>
__device__ __forceinline__ void matmul_stream_body(const Args& a) {
  using S = TileSpec<T>;
  constexpr int MT = SW ? 2 : 1;
  constexpr int kTileBytes = S::f.tile_bytes;
  constexpr int kRowBytes = S::kRowBytes;
  constexpr int TC = kFoldTerms<T>;
  constexpr bool kBulk = kBulkRing<T>;
  MEMRA_DYNAMIC_SMEM(uint8_t, smem, 16);
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int n_warps = static_cast<int>(blockDim.x) / 32;
  const int g = lane / 4, t = lane % 4;
  const int segs = a.segs, n_kt = a.n_kt, stages = a.stages;
  const int parts = SPLIT ? a.parts : 1;
  const int part = warp % parts, unit = warp / parts;  // unit: rg_in_set * segs + seg
  const int seg = unit % segs, rg_in_set = unit / segs;
  const int kt0 = seg * n_kt / segs, kt1 = (seg + 1) * n_kt / segs;
  const StreamSmem L = stream_smem(T, MT, n_kt, n_warps, segs, stages, parts);
  uint8_t* ring = smem + L.ring + warp * stages * L.slot;
  // kBulk: slot s of the ring completes on bars[s]: lane 0 arms it with the slot's bytes and
  // issues the bulk copies; every lane waits on the phase (bit s of `phases`: the phase parity it
  // waits for next). A slot with no copy (a unit past the matrix) is neither armed nor waited on.
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + L.bars) + warp * stages;
  if (kBulk && lane == 0) {
    for (int s = 0; s < stages; ++s) mbarrier_init(bars + s, 1);
    mbarrier_init_fence();
  }
  __syncwarp();
  [[maybe_unused]] uint32_t phases = 0;
  const int total_rg = a.tile_begin[a.n_targets];
  // Rounds a set takes: every unit walks the longest segment's k-tiles, P at a time.
  const int rounds = ((n_kt + segs - 1) / segs + parts - 1) / parts;

  // The weights of unit (set, this warp's row group): k-tile 0 of each m-tile, null past the end.
  auto unit_tiles = [&](int set, const uint8_t* (&w)[MT]) {
    const int rgg = set * a.set_rgs + rg_in_set;
    if (rgg >= total_rg) {
#pragma unroll
      for (int m = 0; m < MT; ++m) w[m] = nullptr;
      return;
    }
    int e = 0;
    while (rgg >= a.tile_begin[e + 1]) ++e;
    const int64_t off = static_cast<int64_t>(rgg - a.tile_begin[e]) * a.group_stride;
    w[0] = a.t[e].w + off;
    if constexpr (SW) w[1] = a.t[e].up + off;
  };

  // The issue cursor: the next k-tile to copy (set, kt) and its slot. A warp of a split unit
  // whose segment has no k-tile kt0 + part copies nothing.
  int is_set = kt0 + part < kt1 ? static_cast<int>(blockIdx.x) : a.n_sets, is_kt = kt0 + part, is_slot = 0;
  const uint8_t* is_w[MT];
  unit_tiles(is_set, is_w);
  // The weights' L2 policy, evict_first: bulk copies only (the lane copies take none: mma_f16.cuh).
  [[maybe_unused]] const uint64_t wpol = kBulk ? weight_read_policy() : 0;
  auto issue = [&]() {
    if (is_set < a.n_sets) {
      uint8_t* dst = ring + is_slot * L.slot;
      if constexpr (kBulk) {
        if (lane == 0 && is_w[0]) {  // SW: both matrices' tiles, or neither (unit_tiles)
          uint64_t* bar = bars + is_slot;
          fence_proxy_async();  // the lanes' reads of the slot's last k-tile (ordered by __syncwarp) come first
          mbarrier_arrive_expect(bar, MT * kTileBytes);
#pragma unroll
          for (int m = 0; m < MT; ++m)
            bulk_copy_hint(dst + m * kTileBytes, is_w[m] + static_cast<int64_t>(is_kt) * kTileBytes, kTileBytes, bar,
                           wpol);
        }
      } else {
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if (!is_w[m]) continue;
          const uint8_t* src = is_w[m] + static_cast<int64_t>(is_kt) * kTileBytes;
#pragma unroll
          for (int c = lane; c < kTileBytes / 16; c += 32)
            cp_async16(dst + m * kTileBytes + c * 16, src + c * 16);  // no policy: mma_f16.cuh
        }
      }
      is_kt += parts;
      if (is_kt >= kt1) {
        is_kt = kt0 + part;
        is_set += static_cast<int>(gridDim.x);
        unit_tiles(is_set, is_w);
      }
    }
    if constexpr (!kBulk) cp_async_commit();  // one group per call, empty past the last k-tile
    is_slot = is_slot + 1 == stages ? 0 : is_slot + 1;
  };

  // Weights never change: the first stages - 1 k-tiles are requested before the wait.
  for (int s = 0; s < stages - 1; ++s) issue();
  pdl_wait();
  pdl_launch_dependents();
  // The activation row's k-tiles, [kt][b][t] (16 bytes each), the sum fragments [kt][g][t].
  {
    const int chunks = n_kt * 32;
    for (int c = tid; c < chunks; c += blockDim.x) {
      const int kt = c / 32, b = (c / 4) % 8, tt = c % 4;
      const int64_t src = static_cast<int64_t>(kt) * kActTileBytes + b * 512 + tt * 16;
      cp_async16(smem + L.act + c * 16, a.act + src);
      if constexpr (S::kUsesLo) cp_async16(smem + L.act_lo + c * 16, a.act_lo + src);
    }
    if constexpr (S::kUsesSums) {
      for (int c = tid; c < n_kt * (kSumTileBytes / 16); c += blockDim.x)
        cp_async16(smem + L.sums + c * 16, a.sums + c * 16);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
  }

  const int lane_act = t * 16;  // this lane's B-fragment piece: every column reads the one row (padding)
  constexpr int b_stride = 64;
  float acc[MT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[m][i] = 0.0f;
  // SPLIT: the folded output of lane m * 16 + j (row j of m-tile m; MT = 1: lanes 16-31 repeat
  // m-tile 0), and the round counter whose parity picks the terms buffer.
  [[maybe_unused]] float folded = 0.0f;
  [[maybe_unused]] int round_no = 0;
  [[maybe_unused]] float* terms = reinterpret_cast<float*>(smem + L.terms);
  constexpr int kSlots = kFoldSlots<T>;
  constexpr int kTermsWarp = MT * kSlots * kGroupRows * TC;  // floats a warp leaves a round

  int cur_set = static_cast<int>(blockIdx.x), cur_slot = 0;
  const uint8_t* cur_w[MT];
  unit_tiles(cur_set, cur_w);

  // The epilogue's reads, issued now so that their round trips overlap the k-tiles instead of
  // following them: the row's exponent (the previous kernel wrote it: read after the wait), and an
  // accumulating target's current outputs of the block's first set (only this lane writes them,
  // in its epilogue). The same values as the epilogue's own reads: the same bits. H100, two
  // alternations in one call (2026-12-07): 9B Q4_0 tg128 B = 1 372.4 / 370.2 -> 382.5 / 376.9 tok/s,
  // 35B-A3B Q4_0 tg64 B = 1 @ d512 379.5 / 379.4 -> 384.3 / 383.1.
  const bool pre = seg == 0 && part == 0 && t == 0 && cur_w[0];
  [[maybe_unused]] float pre_scale = 1.0f, pre_out[2] = {0.0f, 0.0f};
  if (pre) {
    pre_scale = exp2_int(a.exps[0]);
    if constexpr (!SW) {
      const int rgg = cur_set * a.set_rgs + rg_in_set;
      int e = 0;
      while (rgg >= a.tile_begin[e + 1]) ++e;
      const Target& tg = a.t[e];
      if (tg.accumulate) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t j = static_cast<int64_t>(rgg - a.tile_begin[e]) * kGroupRows + g + 8 * h;
          if (j < tg.n_out) pre_out[h] = tg.out[j];
        }
      }
    }
  }
  const int first_set = cur_set;

  // One k-tile of the warp's unit from ring slot cur_slot: its blocks' products into acc, or
  // (SPLIT) their epilogue terms into `out_terms`.
  auto k_tile = [&](int kt, [[maybe_unused]] float* out_terms) {
    __syncwarp();  // every lane is done with the slot the next copy overwrites
    issue();
    if constexpr (!kBulk) {
      cp_async_wait_n(stages - 1);
      __syncwarp();  // this k-tile's copies (made by every lane of the warp) are visible
    }
    if (cur_w[0]) {
      if constexpr (kBulk) {
        mbarrier_wait(bars + cur_slot, (phases >> cur_slot) & 1u);
        phases ^= 1u << cur_slot;
      }
      const uint8_t* slot = ring + cur_slot * L.slot;
      const uint8_t* act = smem + L.act + kt * 512;
      [[maybe_unused]] const uint8_t* act_lo = smem + L.act_lo + kt * 512;
      [[maybe_unused]] const uint8_t* sums = smem + L.sums + kt * kSumTileBytes;
      TileRegs<T> regs[MT] = {};
#pragma unroll
      for (int m = 0; m < MT; ++m)
        load_tile_regs<T>(slot + m * kTileBytes + lane * 16,
                          slot + m * kTileBytes + S::f.row_data_off + g * kRowBytes, t, regs[m]);
      auto block = [&](auto bconst) {
        constexpr int B = decltype(bconst)::value;
        const uint4 bf = lds<uint4>(act + B * b_stride + lane_act);
        [[maybe_unused]] uint4 bl;
        if constexpr (S::kUsesLo) bl = lds<uint4>(act_lo + B * b_stride + lane_act);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const uint8_t* tile = slot + m * kTileBytes;
          const uint8_t* wl = tile + lane * 16;
          const uint8_t* rp = tile + S::f.row_data_off + g * kRowBytes;
          BlockFrags fr;
          BlockScales sc;
          decode_block<T, B, true>(wl, rp, tile + S::f.d_off + g * 4, regs[m], fr, sc);
          if constexpr (!SPLIT) {
            block_products<T, false>(wl, B, fr, sc, bf, bl, acc[m]);
          } else {
            // Column 0 (the one row) of rows g and g + 8: outputs 0 and 2 of the lanes t = 0.
            float d[4];
            [[maybe_unused]] float d2[4];
            block_dots<T>(wl, B, fr, bf, bl, d, d2);
            if (t == 0) {
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                float* q = out_terms + ((m * kSlots + B) * kGroupRows + g + 8 * h) * TC;
                if constexpr (TC == 1) {
                  q[0] = d[2 * h];
                } else if constexpr (TC == 2) {
                  *reinterpret_cast<float2*>(q) = make_float2(sc.s[h], d[2 * h]);
                } else {
                  *reinterpret_cast<float4*>(q) = make_float4(sc.s[h], d[2 * h], sc.s2[h], d2[2 * h]);
                }
              }
            }
          }
        }
      };
      for_each_block(block);
      if constexpr (S::kUsesSums) {  // the min term, after the blocks (slot kTileBlocks of the split form)
        const uint2 sf = lds<uint2>(sums + lane * 8);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if constexpr (!SPLIT) {
            min_term<T, false>(regs[m], sf, acc[m]);
          } else {
            float mm[4];
            min_dots<T>(regs[m], sf, mm);
            if (t == 0) {
#pragma unroll
              for (int h = 0; h < 2; ++h)
                *reinterpret_cast<float2*>(out_terms + ((m * kSlots + kTileBlocks) * kGroupRows + g + 8 * h) * TC) =
                    make_float2(regs[m].min_scale[h], mm[2 * h]);
            }
          }
        }
      }
    }
    cur_slot = cur_slot + 1 == stages ? 0 : cur_slot + 1;
  };

#pragma unroll 1
  while (cur_set < a.n_sets) {
    if constexpr (!SPLIT) {
#pragma unroll 1
      for (int kt = kt0; kt < kt1; ++kt) k_tile(kt, nullptr);
    } else {
#pragma unroll 1
      for (int r = 0; r < rounds; ++r, ++round_no) {
        float* buf = terms + (round_no & 1) * n_warps * kTermsWarp;
        const int kt = kt0 + r * parts + part;
        if (kt < kt1) k_tile(kt, buf + warp * kTermsWarp);
        // The round's terms are visible; the buffer of the round before the last is free again
        // (its folds ended before their warps reached this barrier).
        __syncthreads();
        if (part == 0) {
          const int m = min(lane / kGroupRows, MT - 1), j = lane % kGroupRows;
          for (int q = 0; q < parts && kt0 + r * parts + q < kt1; ++q) {
            const float* src = buf + (warp + q) * kTermsWarp + (m * kSlots * kGroupRows + j) * TC;
#pragma unroll
            for (int b = 0; b < kSlots; ++b) {
              const float* v = src + b * kGroupRows * TC;
              if constexpr (TC == 1) {
                fold_block<T>(folded, 0.0f, v[0], 0.0f, 0.0f);
              } else if constexpr (TC == 2) {
                const float2 x = *reinterpret_cast<const float2*>(v);
                fold_block<T>(folded, x.x, x.y, 0.0f, 0.0f);
              } else {
                const float4 x = *reinterpret_cast<const float4*>(v);
                fold_block<T>(folded, x.x, x.y, x.z, x.w);
              }
            }
          }
        }
      }
      if (part == 0) {  // to the fragment layout of acc: rows g and g + 8 of each m-tile
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const float lo = __shfl_sync(0xffffffffu, folded, m * kGroupRows + g);
          const float hi = __shfl_sync(0xffffffffu, folded, m * kGroupRows + g + 8);
          acc[m][0] = acc[m][1] = lo;
          acc[m][2] = acc[m][3] = hi;
        }
        folded = 0.0f;
      }
    }

    // The set's segments meet (matmul_order.h's tree) and its outputs are stored by the warp of
    // segment 0 of each row group (SPLIT: its part-0 warps hold the outputs).
    float* red = reinterpret_cast<float*>(smem + L.red);  // [unit][MT * 4][lane]
    if (segs > 1) {
      if (part == 0) {
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int i = 0; i < 4; ++i) red[(unit * MT * 4 + m * 4 + i) * 32 + lane] = acc[m][i];
      }
      __syncthreads();
    }
    if (seg == 0 && part == 0 && cur_w[0]) {
      const int rgg = cur_set * a.set_rgs + rg_in_set;
      int e = 0;
      while (rgg >= a.tile_begin[e + 1]) ++e;
      const Target& tg = a.t[e];
      const int rg = rgg - a.tile_begin[e];
      auto total = [&](int m, int i) {
        if (segs == 1) return acc[m][i];
        auto p = [&](int s) { return red[((unit + s) * MT * 4 + m * 4 + i) * 32 + lane]; };
        return segment_tree(segs, p);
      };
      // The one row is column 0: outputs 0 and 2 (rows g, g + 8) of the lanes t = 0.
#pragma unroll
      for (int i = 0; i < 4; i += 2) {
        const int64_t j = static_cast<int64_t>(rg) * kGroupRows + g + 8 * (i >> 1);
        if (t != 0 || j >= tg.n_out) continue;
        const float scale = pre ? pre_scale : exp2_int(a.exps[0]);
        float* orow = tg.out;
        const float v = __fmul_rn(total(0, i), scale);
        if constexpr (SW) {
          const float u = __fmul_rn(total(1, i), scale);
          orow[j] = __fmul_rn(silu(v), u);
        } else {
          orow[j] = tg.accumulate ? __fadd_rn(pre && cur_set == first_set ? pre_out[i >> 1] : orow[j], v) : v;
        }
      }
    }
    if (segs > 1) __syncthreads();  // the partials are read before the next set overwrites them
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][i] = 0.0f;
    cur_set += static_cast<int>(gridDim.x);
    unit_tiles(cur_set, cur_w);
  }
  if constexpr (!kBulk) cp_async_wait<0>();
}

template <GgmlType T, bool SW, bool SPLIT>
__global__ void __launch_bounds__(256) matmul_stream_kernel(const Args a) {
  matmul_stream_body<T, SW, SPLIT>(a);
}
// Registers: a block holds at most 16 warps an SM (plan_stream), which fit at 128 registers a
// thread. Q6_K's SwiGLU form gets that bound (2 blocks of 256 threads): without it ptxas took 152
// (12 warps an SM) once its odd outputs were no longer folded; at 128 it spills 8 bytes. The other
// forms stay below 128 unbounded, and any explicit bound (even a minimum of 1 block) moves their
// allocation (bf16 61 -> 146 registers), so they keep the plain kernel.
template <GgmlType T, bool SW, bool SPLIT>
__global__ void __launch_bounds__(256, 2) matmul_stream_kernel_128(const Args a) {
  matmul_stream_body<T, SW, SPLIT>(a);
}
template <GgmlType T, bool SW>
constexpr bool kStream128 = T == GgmlType::Q6_K && SW;

// Blocks: the sets, at most `per_sm` resident blocks an SM (fewer where registers allow fewer);
// a block walks the sets past the grid.
template <GgmlType T, bool SW, bool SPLIT>
void launch_stream_shape(const Args& args, int warps, int per_sm, int sms, cudaStream_t stream) {
  auto kernel = [] {
    if constexpr (kStream128<T, SW>) return matmul_stream_kernel_128<T, SW, SPLIT>;
    else return matmul_stream_kernel<T, SW, SPLIT>;
  }();
  const size_t smem = static_cast<size_t>(
      stream_smem(T, SW ? 2 : 1, args.n_kt, warps, args.segs, args.stages, args.parts).total);
  static size_t configured = 0;
  if (smem > configured) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    configured = smem;
  }
  // Blocks an SM holds, asked once per block shape (a launch's plan repeats every decode step).
  static size_t occ_smem = 0;
  static int occ_warps = 0, occ = 0;
  if (smem != occ_smem || warps != occ_warps) {
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, 32 * warps, smem));
    occ_smem = smem;
    occ_warps = warps;
  }
  MEMRA_ASSERT(occ >= 1, "matmul: a streaming block of {} warps and {} bytes does not fit an SM", warps, smem);
  const int grid = static_cast<int>(std::min<int64_t>(args.n_sets, int64_t{std::min(per_sm, occ)} * sms));
  launch(kernel, dim3(static_cast<unsigned>(grid)), dim3(32 * warps), smem, stream, args);
}

template <GgmlType T>
void launch_stream_type(const Args& args, int warps, int per_sm, int sms, cudaStream_t stream) {
  // One activation row: the kernel folds only the even outputs of a lane (block_products<T, false>).
  MEMRA_ASSERT(args.parts >= 1 && args.rows == 1 && args.rows_cap == 1, "matmul: the streaming kernel takes one row");
  if (args.parts > 1) {
    if (args.swiglu) return launch_stream_shape<T, true, true>(args, warps, per_sm, sms, stream);
    return launch_stream_shape<T, false, true>(args, warps, per_sm, sms, stream);
  }
  if (args.swiglu) return launch_stream_shape<T, true, false>(args, warps, per_sm, sms, stream);
  launch_stream_shape<T, false, false>(args, warps, per_sm, sms, stream);
}

}  // namespace memra::cuda::matmul_impl
