// The canonical reduction order of every matmul kernel (GEMV now, tensor-core GEMM later).
//
// A row of n_in weights is nb = n_in/32 blocks of 32. For output (r, j):
//   term(b)  = a float value per block b, defined per weight type from EXACT integer block sums
//              (int8 activations x integer weight codes) and the block scales, with a fixed
//              sequence of IEEE round-to-nearest float operations (see k_matmul_q8.cu);
//              float weights: a fused-multiply-add chain over the block's 32 elements in order.
//   P_c      = sum over b = c, c+32, c+64, ... (< nb) of term(b), accumulated in that order from 0.
//   result   = pairwise tree over P_0 .. P_31 in index order: ((P0+P1)+(P2+P3))+...
// A warp computes it with lane l holding P_{bitrev5(l)}, then an xor butterfly 16, 8, 4, 2, 1
// (lane pairs l, l^16 hold adjacent chunks, and so on up the tree).
// The order depends on nothing but n_in, so a row's result is the same bits whatever the number
// of rows in the launch, which kernel computes it, or which other sequences share the step.
#pragma once

namespace memra::cuda {

__host__ __device__ constexpr int bitrev5(int x) {
  return ((x & 1) << 4) | ((x & 2) << 2) | (x & 4) | ((x & 8) >> 2) | ((x & 16) >> 4);
}

}  // namespace memra::cuda
