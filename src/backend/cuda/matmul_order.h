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

namespace memra::cuda {

// Blocks per chunk for a row of nb blocks.
__host__ __device__ constexpr int64_t chunk_blocks(int64_t nb) { return (nb + 31) / 32; }

__host__ __device__ constexpr int bitrev5(int x) {
  return ((x & 1) << 4) | ((x & 2) << 2) | (x & 4) | ((x & 8) >> 2) | ((x & 16) >> 4);
}

}  // namespace memra::cuda
