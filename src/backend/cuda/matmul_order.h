// The canonical reduction order of every matmul kernel (GEMV now, tensor-core GEMM later).
//
// A row of n_in weights is nb = n_in/32 blocks of 32. For output (r, j):
//   term(b)  = a float value per block b, defined per weight type from EXACT integer block sums
//              (int8 activations x integer weight codes) and the block scales, with a fixed
//              sequence of IEEE round-to-nearest float operations (see k_matmul_q8.cu);
//              float weights: a fused-multiply-add chain over the block's 32 elements in order.
//   chunks   = 32 contiguous runs of blocks: cs = ceil(nb / 32), chunk c = blocks [c*cs, (c+1)*cs) ∩ [0, nb)
//              (trailing chunks may be empty).
//   P_c      = sum of term(b) over chunk c's blocks in increasing b, accumulated from +0.0f.
//   result   = pairwise tree over P_0 .. P_31 in index order: ((P0+P1)+(P2+P3))+...
// A warp computes it with lane l holding P_{bitrev5(l)}, then an xor butterfly 16, 8, 4, 2, 1
// (lane pairs l, l^16 hold adjacent chunks, and so on up the tree). A tile kernel walks the
// blocks in increasing order (K-sequential), closing chunk c at its last block and folding it
// into a binary-counter stack that reproduces the same pairwise tree.
// The order depends on nothing but n_in, so a row's result is the same bits whatever the number
// of rows in the launch, which kernel computes it, or which other sequences share the step.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define MEMRA_ORDER_HD __host__ __device__
#else
#define MEMRA_ORDER_HD
#endif

namespace memra::cuda {

// Blocks per chunk for a row of nb blocks.
MEMRA_ORDER_HD constexpr int64_t chunk_blocks(int64_t nb) { return (nb + 31) / 32; }

MEMRA_ORDER_HD constexpr int bitrev5(int x) {
  return ((x & 1) << 4) | ((x & 2) << 2) | (x & 4) | ((x & 8) >> 2) | ((x & 16) >> 4);
}

// Storage order. Quantized weight rows and 8-bit activation rows keep their per-block data in
// "slots": block b = c*cs + u (chunk c, step u) lives in slot u*32 + bitrev5(c). Lane l of a warp
// owns chunk bitrev5(l), so at step u the 32 lanes read slots u*32 .. u*32+31: one contiguous,
// fully coalesced piece per load instruction. A row has 32*cs slots (>= nb; the extra ones are
// zero and never read). Per-super-block data (K-quant scales) stays in natural order.
MEMRA_ORDER_HD constexpr int64_t n_slots(int64_t nb) { return 32 * chunk_blocks(nb); }
MEMRA_ORDER_HD constexpr int64_t slot_of_block(int64_t b, int64_t nb) {
  const int64_t cs = chunk_blocks(nb);
  return (b % cs) * 32 + bitrev5(static_cast<int>(b / cs));
}

}  // namespace memra::cuda
