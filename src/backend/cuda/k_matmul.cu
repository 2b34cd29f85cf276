// The matmul family: weights (any device type, weight_layout.h) times f16 activations (F16Act,
// k_act_f16.cu) on the tensor cores (mma.sync m16n8k16), for 1 to any number of activation rows,
// computing matmul_order.h's canonical order: every element walks its row's blocks in order, one
// tensor-core dot and one or two fused multiply-adds per block. Tile shapes change with the
// number of rows for speed; the bits never do.
//
// Shape. A CTA of W warps owns W * MT row groups (16 weight rows each; SwiGLU: MT/2 of gate and
// the same MT/2 of up) and NT n-tiles of 8 activation rows, and walks the k-tiles (256 columns)
// of its rows. Per k-tile, a pipeline of STAGES stages brings each warp its weight tiles
// (verbatim, one bulk copy a tile) and, shared by the CTA, the activation n-tiles of the k-tile,
// completing on one barrier a stage. Weights never change, so under programmatic dependent
// launch the first stages' weights are requested before waiting for the previous kernel.
// One-row launches mostly take the streaming kernel instead (matmul_stream_kernel.cuh: a copy ring
// per warp, no block barrier per k-tile), which computes the same order.


#include <algorithm>

#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_kernel.cuh"
#include "backend/cuda/matmul_stream_kernel.cuh"

namespace memra::cuda {

namespace matmul_impl {
// Defined (instantiated) in k_matmul_inst_*.cu.
extern template void launch_type<GgmlType::Q4_0>(const Args&, const Config&, int64_t, cudaStream_t);
extern template void launch_type<GgmlType::Q8_0>(const Args&, const Config&, int64_t, cudaStream_t);
extern template void launch_type<GgmlType::Q4_K>(const Args&, const Config&, int64_t, cudaStream_t);
extern template void launch_type<GgmlType::Q5_K>(const Args&, const Config&, int64_t, cudaStream_t);
extern template void launch_type<GgmlType::Q6_K>(const Args&, const Config&, int64_t, cudaStream_t);
extern template void launch_type<GgmlType::F16>(const Args&, const Config&, int64_t, cudaStream_t);
extern template void launch_type<GgmlType::BF16>(const Args&, const Config&, int64_t, cudaStream_t);
extern template void launch_type<GgmlType::F32>(const Args&, const Config&, int64_t, cudaStream_t);
extern template void launch_stream_type<GgmlType::Q4_0>(const Args&, int, int, int, cudaStream_t);
extern template void launch_stream_type<GgmlType::Q8_0>(const Args&, int, int, int, cudaStream_t);
extern template void launch_stream_type<GgmlType::Q4_K>(const Args&, int, int, int, cudaStream_t);
extern template void launch_stream_type<GgmlType::Q5_K>(const Args&, int, int, int, cudaStream_t);
extern template void launch_stream_type<GgmlType::Q6_K>(const Args&, int, int, int, cudaStream_t);
extern template void launch_stream_type<GgmlType::F16>(const Args&, int, int, int, cudaStream_t);
extern template void launch_stream_type<GgmlType::BF16>(const Args&, int, int, int, cudaStream_t);
extern template void launch_stream_type<GgmlType::F32>(const Args&, int, int, int, cudaStream_t);
}  // namespace matmul_impl

namespace {

using namespace matmul_impl;

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

// Tile shape for `rows` activation rows over `groups` row groups split in `segs` K segments: a
// performance choice only. Small batches (one or two n-tiles) stream weights: 4 warps per block
// unless that leaves an SM without a block (H200, 9B Q4_0, 2026-12-02: at least one block per SM
// instead of four, with 2 stages, gave tg128 B = 1 304 -> 329 tok/s, B = 4 1,278, B = 8 2,188,
// B = 16 3,007 -> 3,382; 8 warps per block was slower); larger ones share activation tiles among 8 warps.
// The CPU emulation (tests/cudasim) builds only the 1- and 8-n-tile shapes: the kernel's logic is
// one template, the other shapes only change its constants, and CI compiles this under the
// sanitizers on two cores.
#ifdef MEMRA_CUDASIM
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

// The launch's blocks for a shape: n-tile tiles along grid x, row tiles times segments along y.
int64_t launch_blocks(const Config& c, int64_t rows, int64_t groups, int segs, bool swiglu) {
  const int64_t mt_rows = swiglu ? 1 : c.mt;  // SwiGLU: one row group of gate and the same of up
  const int64_t per_tile = int64_t{c.warps} * mt_rows;
  const int64_t seq_tiles = (rows + 8 * c.nt - 1) / (8 * c.nt);
  return seq_tiles * ((groups + per_tile - 1) / per_tile) * segs;
}

Config pick_config(int64_t rows, int64_t groups, int segs, bool swiglu, GgmlType type) {
  // Shapes from the widest. One m-tile per warp for the small batches (more warps: measured
  // faster at B = 1-16 than two m-tiles per warp, 2026-12-01).
  static constexpr Config kShapes[] = {{2, 8, 8}, {2, 4, 8}, {1, 2, 4}, {1, 2, 2}, {1, 2, 1},
                                       {1, 1, 4}, {1, 1, 2}, {1, 1, 1}};
  constexpr int kShapeCount = sizeof(kShapes) / sizeof(kShapes[0]);
  // Up to 16 rows the row count's n-tiles, with fewer warps a block while the launch leaves an SM
  // without one (H200, 9B Q4_0, 2026-12-02: at least one block per SM instead of four, with 2
  // stages, gave tg128 B = 1 304 -> 329 tok/s, B = 16 3,007 -> 3,382).
  // From 17 rows, narrower shapes too (fewer warps, then fewer n-tiles: each block decodes its
  // weights for fewer rows) while the launch has under two blocks an SM: a matrix of few row
  // groups under the 8-n-tile shape ran on 32-100 blocks (9B at B = 64: ssm_out 66.8 us, 141 GB/s;
  // the MoE router of 35B-A3B 88 us for 2 MB). H200, 2026-12-02, tg64 @ d512, blocks wanted
  // 0 / 1 / 2 / 4 / 8 per SM: 9B B = 32 3,888 / 4,530 / 4,705 / 4,618 / 4,000 tok/s, B = 64
  // 4,368 / 4,901 / 5,471 / 5,300 / 5,152, pp512 6,861 / - / 6,820 / 6,856 / 6,479; B = 16 with
  // one per SM 3,775, with two 3,646 (-4%), so up to 16 rows the shape keeps its n-tiles, unless
  // the matrix is small (below). 8 warps a block at 2-16 rows: slower at every B (2026-12-03, B = 2
  // 707 -> 684, B = 4 1,334 -> 1,281, B = 16 3,843 -> 3,403 tok/s).
  int first, last;
  int64_t want;
  if (rows <= 8) {
    first = 5, last = 7, want = sm_count();
  } else if (rows <= 16 && !kEmulated) {
    first = 2, last = 4, want = sm_count();
    // A matrix too small to give every SM a block of the 2-n-tile shape (the 4096 x 4096 ssm_out
    // and attn_output: 256 row groups x 2 K segments, one serial 8-k-tile chain a warp) takes the
    // 1-n-tile shapes: twice the warps, each with half the products (the weights decoded twice).
    // H200, 9B Q4_0 tg32 @ d512 (2026-12-03): B = 12 3,006 -> 3,058, B = 16 3,750 -> 3,870 tok/s;
    // the same for launches under 4 or 8 blocks an SM (every matrix but the head): 2,534 / 3,231.
    if (launch_blocks(kShapes[2], rows, groups, segs, swiglu) < sm_count()) first = 5, last = 7;
  } else {
    first = rows <= 32 ? 1 : 0, last = kShapeCount - 1, want = 2 * int64_t{sm_count()};
    // SwiGLU at 33-48 rows: the 4-n-tile shape's two 32-row tiles are a quarter (48 rows) to a half
    // (33) padding, whose products are computed all the same; the 2-n-tile shape's three 16-row
    // tiles pad at most 15 rows. H100, 9B Q4_0 tg32 @ d512 (2026-12-06, the shape forced, same
    // bits): B = 48 5,190 / 5,192 / 5,194 -> 5,400 / 5,403 tok/s; at B = 64, where the 32-row tiles
    // fill, 6,141 -> 6,097 / 6,102 (kept).
    if (!kEmulated && swiglu && rows > 32 && rows <= 48) first = 2;
    // The same for launches under two blocks an SM at the 2-n-tile 4-warp shape (H200, 9B Q4_0
    // tg32 @ d512, 2026-12-03, threshold 1 / 2 / 4 blocks an SM: B = 24 3,761 / 3,821 / 3,848, B = 32
    // 4,700 / 4,746 / 4,731, B = 64 5,540 / 5,549 / 5,330 tok/s; without the rule B = 32 4,686,
    // B = 64 5,513).
    if (!kEmulated && launch_blocks(kShapes[2], rows, groups, segs, swiglu) < want) first = 5;
  }
  int pick = first;
  for (int i = first; i <= last; ++i) {
    // The CPU emulation (tests/cudasim) builds only the 1- and 8-n-tile shapes.
    if (kEmulated && kShapes[i].nt != 1 && kShapes[i].nt != 8) continue;
    pick = i;
    if (launch_blocks(kShapes[i], rows, groups, segs, swiglu) >= want) break;
  }
  Config c = kShapes[pick];
  if (swiglu) c.mt = 2;
  if (c.mt == 2 && c.nt == 8) c.warps = wide_shape_threads(type) / 32;
  return c;
}

// Split units (matmul_stream_kernel.cuh, SPLIT): while the launch's units leave the SMs' schedulers
// under 4 warps each, each unit takes 2, then 4 warps (at most a warp per k-tile of its segment).
// H200, 2026-12-03, against MEMRA_CUDA_STREAM_PARTS=1: 35B-A3B Q4_0 tg64 B = 1 370.4 -> 380.2 tok/s;
// 9B and 2B Q4_0 tg128 B = 1 unchanged (372.6 / 371.6, 729.5 / 729.6); bits identical.
int g_stream_parts = 0;  // MEMRA_CUDA_STREAM_PARTS: 0 stream_parts' rule, else that many (1: no split)

int stream_parts(int64_t units, int n_kt, int segs) {
  // At most a warp per k-tile of a segment, and a block's segs * parts warps within the kernel's
  // 8 (__launch_bounds__(256)): MEMRA_CUDA_STREAM_PARTS=2 on a 12288-column ffn_down (8 segments)
  // asked for 16-warp blocks and its launch failed (H200, 2026-12-03).
  const int most = std::max(1, std::min({4, n_kt / segs, 8 / segs}));
  if (g_stream_parts > 0) return std::min(g_stream_parts, most);
  const int64_t schedulers = 4 * int64_t{sm_count()};
  int parts = 1;
  while (parts < most && units * parts * 2 <= 4 * schedulers) parts *= 2;
  return parts;
}

// The streaming kernel's plan for a launch (matmul_stream_kernel.cuh): the set size (R row groups,
// W = segs * R warps a block), then the deepest ring that lets the sets' blocks share the SMs in
// one wave (at most 16 warps an SM; past that the blocks walk several sets). False when even one
// block an SM would get fewer than 3 stages.
// Where it runs: one activation row, the SwiGLU pair or one matrix of fewer than 4096 row groups.
// H200, 9B Q4_0, tg64 @ d512 (2026-12-02, bits identical either way): B = 1 352.5 -> 370.1 tok/s
// with this rule; 363.6 with every launch of <= 8 rows (the output head, Q6_K, 343 -> 371 us: its
// decode is issue-bound and the many 4-warp blocks of matmul_kernel.cuh hold more warps; the fused
// qkv launch 18.0 -> 19.2 us); B = 2 719 -> 674 and B = 4 1,341 -> 1,167 (the activation rows of
// every k-tile in each block cost warps; 8-32 warps an SM and 2-3 stages all measured below).
// Fused projections (several targets) stream only split: unsplit, the 9B's fused qkv launch ran
// 18.0 -> 19.2 us streamed; split is for launches of few row groups (the MoE router and its shared
// expert's gate).
bool plan_stream(Args& a, GgmlType type, int64_t total_rg, int& warps, int& per_sm) {
  if (a.grp_off || a.rows != 1) return false;
  const int segs = a.segs, mt = a.swiglu ? 2 : 1;
  const int parts = stream_parts(total_rg * segs, a.n_kt, segs);
  if (!a.swiglu && (total_rg >= 4096 || (a.n_targets != 1 && parts == 1))) return false;
  // Units of a block: 4 warps' worth (unsplit), 8 warps' worth (split).
  const int r = parts == 1 ? std::max(1, 4 / segs) : std::max(1, 8 / (segs * parts));
  warps = segs * r * parts;
  a.parts = parts;
  a.set_rgs = r;
  a.n_sets = static_cast<int>((total_rg + r - 1) / r);
  const int64_t sms = sm_count();
  const int want = static_cast<int>(std::min<int64_t>(std::max(1, 16 / warps), (a.n_sets + sms - 1) / sms));
  const StreamSmem base = stream_smem(type, mt, a.n_kt, warps, segs, 0, parts);
  for (per_sm = want; per_sm >= 1; --per_sm) {
    const int budget = (228 << 10) / per_sm - (1 << 10);  // an SM's 228 KiB, 1 KiB reserved a block
    const int stages = std::min(kStreamMaxStages, (budget - base.total) / (warps * (base.slot + kSlotBarrierBytes)));
    if (stages >= 3) {
      a.stages = stages;
      a.rows_cap = static_cast<int>(a.rows);
      return true;
    }
  }
  return false;
}

// grid_z: the launch's grid z (1; grouped launches: their slots, or their block list's entries).
void run(Args& args, GgmlType type, int64_t groups_total, const int64_t* groups, int n, cudaStream_t stream,
         int grid_z = 1) {
  args.segs = k_segments(args.n_kt);
  args.n_targets = n;
  {
    int warps = 0, per_sm = 0;
    if (plan_stream(args, type, groups_total, warps, per_sm)) {
      args.tile_begin[0] = 0;
      for (int i = 0; i < n; ++i) args.tile_begin[i + 1] = args.tile_begin[i] + static_cast<int>(groups[i]);
      for (int i = n; i < kMaxTargets; ++i) args.tile_begin[i + 1] = args.tile_begin[n];
      args.n_targets = n;
      const int sms = sm_count();
      switch (type) {
        case GgmlType::Q4_0: launch_stream_type<GgmlType::Q4_0>(args, warps, per_sm, sms, stream); break;
        case GgmlType::Q8_0: launch_stream_type<GgmlType::Q8_0>(args, warps, per_sm, sms, stream); break;
        case GgmlType::Q4_K: launch_stream_type<GgmlType::Q4_K>(args, warps, per_sm, sms, stream); break;
        case GgmlType::Q5_K: launch_stream_type<GgmlType::Q5_K>(args, warps, per_sm, sms, stream); break;
        case GgmlType::Q6_K: launch_stream_type<GgmlType::Q6_K>(args, warps, per_sm, sms, stream); break;
        case GgmlType::F16: launch_stream_type<GgmlType::F16>(args, warps, per_sm, sms, stream); break;
        case GgmlType::BF16: launch_stream_type<GgmlType::BF16>(args, warps, per_sm, sms, stream); break;
        case GgmlType::F32: launch_stream_type<GgmlType::F32>(args, warps, per_sm, sms, stream); break;
        default: MEMRA_ASSERT(false, "matmul: no kernel for this weight type");
      }
      CUDA_LAUNCH_CHECK();
      return;
    }
  }
  const int64_t shape_rows = args.shape_rows > 0 ? args.shape_rows : args.rows;
  Config c = pick_config(shape_rows, groups_total, args.segs, args.swiglu != 0, type);
  MEMRA_ASSERT(!args.tiles || 8 * c.nt == args.tile_rows,
               "matmul_grouped: a block list of {}-row tiles for a launch of {}-row tiles", args.tile_rows,
               8 * c.nt);
  // A block stages every row its n-tiles cover: a grouped launch's group may hold more rows than
  // the shape was chosen for (the emulation's 8-n-tile shape for a 16-row choice read past the
  // staged rows).
  args.rows_cap = static_cast<int>(std::min<int64_t>(8 * c.nt, args.rows));
  // The wide float types need fewer warps per CTA for their stages to fit in shared memory.
  constexpr int kSmemBudget = 227 << 10;  // the sm_90 per-block limit
  auto smem = [&](int warps) {
    const bool lo = type == GgmlType::F16 || type == GgmlType::BF16 || type == GgmlType::F32;
    const bool sums = type == GgmlType::Q4_K || type == GgmlType::Q5_K;
    return kStages * (warps * c.mt * args.tile_bytes + c.nt * kActTileBytes * (lo ? 2 : 1) +
                     (sums ? c.nt * kSumTileBytes : 0)) +
           8 * 8 * c.nt + 8 * kStages;
  };
  while (c.warps > 1 && smem(c.warps) > kSmemBudget) c.warps /= 2;
  MEMRA_ASSERT(smem(c.warps) <= kSmemBudget, "matmul: {} bytes of shared memory for one warp", smem(c.warps));
  // Row tiles span targets (matmul_kernel.cuh): a launch of several projections runs as many
  // blocks as its row groups need, not a partial tile per target. Each target starts at a
  // multiple of a warp's m-tiles. H100, 9B Q4_0 pp512 (2026-12-05): under ncu the fused GDN
  // projection (qkv 512 + gate 256 + beta 2 + alpha 2 row groups) ran a tile per target, 35 tiles,
  // 560 blocks of 12 warps: 299 us, 5 rounds of 132 SMs at ~60 us like SwiGLU's (1,024 blocks,
  // 485 us), for 4.2 rounds of work; spanning tiles make it 33 tiles, 528 blocks, 4 rounds. With
  // the 12-warp blocks, pp512 9,906 / 9,905 -> 10,680 / 10,637 tok/s against main before both
  // (the 12-warp blocks alone, another call: +6.6%); decode B = 1 / 16 / 64 within noise, same bits.
  args.groups = grid_z;
  const int mt_rows = args.swiglu ? c.mt / 2 : c.mt;
  const int64_t per_tile = static_cast<int64_t>(c.warps) * mt_rows;
  args.tile_begin[0] = 0;
  for (int i = 0; i < n; ++i)
    args.tile_begin[i + 1] = args.tile_begin[i] + static_cast<int>((groups[i] + mt_rows - 1) / mt_rows * mt_rows);
  for (int i = n; i < kMaxTargets; ++i) args.tile_begin[i + 1] = args.tile_begin[n];
  args.n_targets = n;
  const int64_t row_tiles = (args.tile_begin[n] + per_tile - 1) / per_tile;
  switch (type) {
    case GgmlType::Q4_0: launch_type<GgmlType::Q4_0>(args, c, row_tiles, stream); break;
    case GgmlType::Q8_0: launch_type<GgmlType::Q8_0>(args, c, row_tiles, stream); break;
    case GgmlType::Q4_K: launch_type<GgmlType::Q4_K>(args, c, row_tiles, stream); break;
    case GgmlType::Q5_K: launch_type<GgmlType::Q5_K>(args, c, row_tiles, stream); break;
    case GgmlType::Q6_K: launch_type<GgmlType::Q6_K>(args, c, row_tiles, stream); break;
    case GgmlType::F16: launch_type<GgmlType::F16>(args, c, row_tiles, stream); break;
    case GgmlType::BF16: launch_type<GgmlType::BF16>(args, c, row_tiles, stream); break;
    case GgmlType::F32: launch_type<GgmlType::F32>(args, c, row_tiles, stream); break;
    default: MEMRA_ASSERT(false, "matmul: no kernel for this weight type");
  }
  CUDA_LAUNCH_CHECK();
}

Args base_args(const DevWeight& w, const F16Act& x) {
  MEMRA_ASSERT(x.cols == w.n_in && x.n_kt == w.n_kt, "matmul: activations of {} columns for a weight of {}", x.cols,
               w.n_in);
  Args a{};
  a.parts = 1;
  a.group_stride = w.group_stride;
  a.tile_bytes = static_cast<int>(w.tile_bytes);
  a.n_kt = static_cast<int>(w.n_kt);
  a.rows = x.rows;
  a.groups = 1;
  a.act = x.frag;
  a.act_lo = x.frag_lo;
  a.sums = x.sums;
  a.exps = x.exps;
  return a;
}

}  // namespace

void set_stream_parts(int parts) {
  MEMRA_ASSERT(parts >= 0 && parts <= 4);
  g_stream_parts = parts;
}

void matmul(const MatmulTarget* targets, int n, const F16Act& x, cudaStream_t stream) {
  MEMRA_ASSERT(n >= 1 && n <= kMaxTargets);
  if (x.rows == 0) return;
  const DevWeight& w0 = *targets[0].w;
  Args a = base_args(w0, x);
  int64_t groups[kMaxTargets], groups_total = 0;
  for (int i = 0; i < n; ++i) {
    const MatmulTarget& t = targets[i];
    const DevWeight& w = *t.w;
    MEMRA_ASSERT(w.type == w0.type && w.n_in == w0.n_in && w.group_stride == w0.group_stride,
                 "matmul: the projections of one launch share type and width");
    MEMRA_ASSERT(t.mat >= 0 && t.mat < w.n_mat && t.out_stride >= w.n_out);
    a.t[i] = Target{w.data + w.mat_stride * static_cast<size_t>(t.mat), nullptr, t.out, t.out_stride, w.n_out,
                    static_cast<int>(w.n_rg), t.accumulate ? 1 : 0};
    groups[i] = w.n_rg;
    groups_total += w.n_rg;
  }
  a.swiglu = 0;
  run(a, w0.type, groups_total, groups, n, stream);
}

void matmul_swiglu(const DevWeight& gate, const DevWeight& up, const F16Act& x, float* act, cudaStream_t stream) {
  MEMRA_ASSERT(gate.type == up.type && gate.n_in == up.n_in && gate.n_out == up.n_out);
  if (x.rows == 0) return;
  Args a = base_args(gate, x);
  a.t[0] = Target{gate.data, up.data, act, gate.n_out, gate.n_out, static_cast<int>(gate.n_rg), 0};
  a.swiglu = 1;
  const int64_t groups[1] = {gate.n_rg};
  run(a, gate.type, gate.n_rg, groups, 1, stream);
}

void matmul_grouped(const DevWeight& w, const DevWeight* up, const F16Act& x, const GroupedRows& g, float* out,
                    cudaStream_t stream, const DevWeight* shared, const DevWeight* shared_up) {
  MEMRA_ASSERT(!up || (up->type == w.type && up->n_in == w.n_in && up->n_out == w.n_out && up->n_mat == w.n_mat));
  MEMRA_ASSERT(!shared || (same_matrix_geometry(*shared, w) && (!up) == (!shared_up) &&
                           (!shared_up || same_matrix_geometry(*shared_up, w))),
               "matmul_grouped: the shared matrices must have the experts' type and shape");
  MEMRA_ASSERT(g.groups >= 1 && g.max_rows >= 1 && g.grp_off && g.grp_expert);
  Args a = base_args(w, x);
  a.rows = g.max_rows;  // a group has at most this many rows: grid x covers them
  // The tile shape for at most 16 rows a group, whatever the batch: at B = 64 the k = 8 choices
  // of 64 rows spread over ~220 of 256 experts (~2 rows each), and a tile shaped for the worst case
  // (8 n-tiles, 64 staged rows, one block per SM) did 64 rows of work per expert: B = 64 ran at
  // 1,509 tok/s, below B = 16's 1,722 (H200, 35B-A3B Q4_0, 2026-12-02). A group of more rows takes
  // more n-tiles along grid x; tiles past a group's rows leave at once. The shape never changes bits.
  a.shape_rows = std::min<int64_t>(g.max_rows, 16);
  a.t[0] = Target{w.data, up ? up->data : nullptr, out, w.n_out, w.n_out, static_cast<int>(w.n_rg), 0};
  a.swiglu = up ? 1 : 0;
  a.grp_off = g.grp_off;
  a.grp_expert = g.grp_expert;
  a.act_row = g.act_row;
  a.mat_stride = w.mat_stride;
  a.shared_w = shared ? shared->data : nullptr;
  a.shared_up = shared_up ? shared_up->data : nullptr;
  a.groups = g.groups;
  const bool listed = g.list.rows > 0;
  if (listed) {  // grid z: the block list's entries instead of slots x row tiles
    MEMRA_ASSERT(g.list.tile && g.list.capacity >= 1 && g.list.rows >= 8);
    a.tiles = g.list.tile;
    a.tile_slots = g.groups;
    a.tile_rows = g.list.rows;
  }
  // The warps choice counts every group's rows as if all groups were full.
  const int64_t groups[1] = {w.n_rg};
  run(a, w.type, w.n_rg * g.groups, groups, 1, stream, listed ? g.list.capacity : g.groups);
}

int grouped_tile_rows(const DevWeight& w, bool swiglu, int groups, int64_t max_rows) {
  // run()'s choice for matmul_grouped's launch (never the streaming kernel: it takes no groups).
  return 8 * pick_config(std::min<int64_t>(max_rows, 16), w.n_rg * groups, k_segments(w.n_kt), swiglu, w.type).nt;
}

}  // namespace memra::cuda
