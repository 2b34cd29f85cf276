// Probe: does mma.sync m16n8k16 (f16 in, f32 accumulate) give the same bits for an output when
// its two operands trade places? matmul_order.h's dot() puts the weights on the MMA's m side
// (16 weight rows as A) and the sequences on its n side (8 a tile, as B). At 64 rows a batched
// kernel could instead put the sequences on the m side (16 a tile, A) and the weights on n (8
// rows, B): each decoded weight fragment then serves 4 m-tiles, not 8 sequences per n-tile.
// The exactness contract lets a row's bits depend on nothing but its operands, so that layout is
// open only if sum_k w_ik x_jk comes out with the same bits as sum_k x_jk w_ik, C chained (the
// order's second product of a block starts from the first's result), in every fragment position.
//
// Each trial: W (16 weight rows x 32 columns) and X (16 sequences x 32 columns), f16, from a hash
// of (trial, element). Form 1 (today's): for each 8-sequence half h, D1 = mma(W[:, 0:16],
// X[h]^T[0:16], 0), then D1 = mma(W[:, 16:32], X[h]^T[16:32], D1). Form 2 (swapped): for each
// 8-row weight half v, D2 = mma(X[:, 0:16], W[v]^T[0:16], 0), then the same with columns 16-31.
// Compared: D1[i][j] against D2[j][i], all 256 (row, sequence) pairs, bit for bit.
// Value sets: "q4" codes -8..7 as W (Q4_0's c) and X with exponents spread over [-14, 15] (x' of
// act_f16 reaches 2^15); "f16" both operands with random exponents (the float types' D_b), mixed
// signs, so the 16 products of a dot span ~30 binades and the accumulator's alignment and
// truncation decide the low bits.
// Build and run on the device (nvcc is there):
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/mma_operand_swap.cu -o /tmp/mma_swap && /tmp/mma_swap
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "probe_check.h"

__device__ __forceinline__ uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Element (r, k) of matrix `which` (0: W, 1: X) of a trial, as f16 bits.
__device__ uint16_t element(int set, uint32_t trial, int which, int r, int k) {
  const uint32_t h = mix(trial * 2654435761u ^ mix(static_cast<uint32_t>(which * 4096 + r * 64 + k) + 0x9e3779b9u));
  const uint32_t sign = (h >> 31) << 15;
  if (set == 0 && which == 0) {  // a Q4_0 code c = q - 8
    const int c = static_cast<int>(h & 15u) - 8;
    return __half_as_ushort(__int2half_rn(c));
  }
  // Exponent spread: X of set 0 over [-14, 15]; set 1 both over [-14, 15]; zero now and then.
  if ((h & 63u) == 0) return static_cast<uint16_t>(sign);
  const uint32_t e = 1u + (h >> 6) % 30u;  // biased f16 exponent 1..30: 2^-14 .. 2^15
  const uint32_t mant = (h >> 11) & 0x3ffu;
  return static_cast<uint16_t>(sign | (e << 10) | mant);
}

__device__ __forceinline__ uint32_t pack(uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(hi) << 16 | lo; }

__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                    const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// A = M[:, k0 .. k0 + 16) (16 rows), lane (g, t): rows g, g + 8, columns 2t, 2t + 1, 2t + 8, 2t + 9.
__device__ void a_frag(const uint16_t (*m)[32], int k0, int g, int t, uint32_t (&a)[4]) {
  a[0] = pack(m[g][k0 + 2 * t], m[g][k0 + 2 * t + 1]);
  a[1] = pack(m[g + 8][k0 + 2 * t], m[g + 8][k0 + 2 * t + 1]);
  a[2] = pack(m[g][k0 + 2 * t + 8], m[g][k0 + 2 * t + 9]);
  a[3] = pack(m[g + 8][k0 + 2 * t + 8], m[g + 8][k0 + 2 * t + 9]);
}
// B = N[r0 .. r0 + 8)^T over columns k0 .. k0 + 16: lane (g, t) holds row r0 + g, columns 2t, 2t + 1
// and 2t + 8, 2t + 9.
__device__ void b_frag(const uint16_t (*n)[32], int r0, int k0, int g, int t, uint32_t& b0, uint32_t& b1) {
  b0 = pack(n[r0 + g][k0 + 2 * t], n[r0 + g][k0 + 2 * t + 1]);
  b1 = pack(n[r0 + g][k0 + 2 * t + 8], n[r0 + g][k0 + 2 * t + 9]);
}

struct Result {
  unsigned long long compared, differ;
  float first_d1, first_d2;
  uint32_t first_trial;
  int first_i, first_j;
};

constexpr int kWarps = 8;

__global__ void __launch_bounds__(kWarps * 32) probe(int set, uint32_t trials_per_warp, Result* res) {
  __shared__ uint16_t w[kWarps][16][32], x[kWarps][16][32];
  __shared__ float d1[kWarps][16][16], d2[kWarps][16][16];  // [weight row i][sequence j]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const uint32_t warp_id = blockIdx.x * kWarps + warp;
  unsigned long long compared = 0, differ = 0;
  const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (uint32_t it = 0; it < trials_per_warp; ++it) {
    const uint32_t trial = warp_id * trials_per_warp + it;
    for (int e = lane; e < 16 * 32; e += 32) {
      w[warp][e / 32][e % 32] = element(set, trial, 0, e / 32, e % 32);
      x[warp][e / 32][e % 32] = element(set, trial, 1, e / 32, e % 32);
    }
    __syncwarp();
    // Form 1: weights as A, each 8-sequence half of X as B.
    for (int h = 0; h < 2; ++h) {
      uint32_t a[4], b0, b1;
      float d[4];
      a_frag(w[warp], 0, g, t, a);
      b_frag(x[warp], 8 * h, 0, g, t, b0, b1);
      mma(d, a, b0, b1, zero);
      a_frag(w[warp], 16, g, t, a);
      b_frag(x[warp], 8 * h, 16, g, t, b0, b1);
      mma(d, a, b0, b1, d);
      // d: rows g, g + 8 (weights), columns 2t, 2t + 1 (sequences 8h + ..).
      d1[warp][g][8 * h + 2 * t] = d[0];
      d1[warp][g][8 * h + 2 * t + 1] = d[1];
      d1[warp][g + 8][8 * h + 2 * t] = d[2];
      d1[warp][g + 8][8 * h + 2 * t + 1] = d[3];
    }
    // Form 2: sequences as A, each 8-row half of W as B.
    for (int v = 0; v < 2; ++v) {
      uint32_t a[4], b0, b1;
      float d[4];
      a_frag(x[warp], 0, g, t, a);
      b_frag(w[warp], 8 * v, 0, g, t, b0, b1);
      mma(d, a, b0, b1, zero);
      a_frag(x[warp], 16, g, t, a);
      b_frag(w[warp], 8 * v, 16, g, t, b0, b1);
      mma(d, a, b0, b1, d);
      // d: rows g, g + 8 (sequences), columns 2t, 2t + 1 (weight rows 8v + ..).
      d2[warp][8 * v + 2 * t][g] = d[0];
      d2[warp][8 * v + 2 * t + 1][g] = d[1];
      d2[warp][8 * v + 2 * t][g + 8] = d[2];
      d2[warp][8 * v + 2 * t + 1][g + 8] = d[3];
    }
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int i = e / 16, j = e % 16;
      const float p = d1[warp][i][j], q = d2[warp][i][j];
      ++compared;
      if (__float_as_uint(p) != __float_as_uint(q)) {
        ++differ;
        if (atomicCAS(&res->first_trial, 0xffffffffu, trial) == 0xffffffffu) {
          res->first_d1 = p;
          res->first_d2 = q;
          res->first_i = i;
          res->first_j = j;
        }
      }
    }
    __syncwarp();
  }
  atomicAdd(&res->compared, compared);
  atomicAdd(&res->differ, differ);
}

int main() {
  int dev = 0;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("mma_operand_swap on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  Result* res = nullptr;
  CK(cudaMallocManaged(&res, sizeof(Result)));
  const char* names[2] = {"q4 codes x spread x'", "f16 x f16, both spread"};
  int bad = 0;
  for (int set = 0; set < 2; ++set) {
    *res = Result{0, 0, 0.0f, 0.0f, 0xffffffffu, 0, 0};
    const int blocks = prop.multiProcessorCount * 4;
    const uint32_t per_warp = 256;
    probe<<<blocks, kWarps * 32>>>(set, per_warp, res);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::printf("%-24s %llu outputs (%u trials of 256), %llu differ", names[set], res->compared,
                static_cast<unsigned>(blocks * kWarps * per_warp), res->differ);
    if (res->differ)
      std::printf("; first: trial %u, row %d, sequence %d: %.9g vs %.9g", res->first_trial, res->first_i,
                  res->first_j, res->first_d1, res->first_d2);
    std::printf("\n");
    bad += res->differ != 0;
  }
  std::printf("%s\n", bad ? "SWAP CHANGES BITS" : "swap keeps every bit");
  CK(cudaFree(res));
  return 0;
}
