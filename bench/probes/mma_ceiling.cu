// Probe: how fast mma.sync m16n8k16 (f16 in, f32 accumulate) runs on this GPU, alone and in the
// canonical order's pattern (matmul_order.h: per 32-element block two chained products from +0,
// then one fused multiply-add per output with the block's scale), by warps an SM. It bounds what the
// (2, 8) matmul kernel (pp512, B = 64; session 33's results, section 7) can reach without changing
// the order: the kernel does the pattern below plus its weight decode and shared-memory loads.
//
// Patterns, per warp, T output tiles (T = 16: the (2, 8) shape's 2 m-tiles x 8 n-tiles), operands
// in registers (no memory traffic at all):
//   chain   acc_t = mma(A, B, acc_t), twice a block: products accumulate in place (the ceiling).
//   order   per block: D_t = mma(A1, B1, mma(A0, B0, 0)) for every t, then acc_t += d_b * D_t.
//   order2  the same, two blocks in flight: block b + 1's products are issued before block b's
//           multiply-adds (twice the D registers).
// Rows: pattern x T x blocks an SM (128-thread blocks: 4, 8, 12, ... warps an SM, as far as the
// registers allow); columns: TFLOPS and multiply-adds a clock an SM (at the clock the device reports
// as its maximum; run with the clocks unlocked, as the benchmarks do).
// Build and run on the device (nvcc is there):
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/mma_ceiling.cu -o /tmp/mma_ceiling && /tmp/mma_ceiling
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "probe_check.h"

constexpr int kThreads = 128;
constexpr int kOutSlots = 1 << 16;  // out's floats: one a block, more than any grid below

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                         const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}

enum Pattern : int { kChain = 0, kOrder = 1, kOrder2 = 2 };

// Each warp runs `blocks` 32-element blocks over T tiles; the result is summed into out so that no
// product is dead. Operand values are small f16 numbers derived from the lane (their values do not
// change the timing).
template <int P, int T>
__global__ void __launch_bounds__(kThreads) pattern_kernel(int blocks, float* out) {
  // Tile t = (m, n): m-tile m's A fragments times n-tile n's B fragments, as in the matmul kernel
  // (distinct operands, so no two products are the same instruction on the same registers).
  constexpr int M = 2, N = T / M;
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t h = 0x3c003c00u ^ (lane << 1);  // two f16 near 1
  uint32_t a0[M][4], a1[M][4], b0[N][2], b1[N][2];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int i = 0; i < 4; ++i) a0[m][i] = h ^ (2u * (8 * m + i)), a1[m][i] = h ^ (2u * (8 * m + i + 4));
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int i = 0; i < 2; ++i) b0[n][i] = h ^ (2u * (32 + 4 * n + i)), b1[n][i] = h ^ (2u * (32 + 4 * n + i + 2));
  const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float acc[T][4];
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;
  float scale = 1.0f + 1e-7f * static_cast<float>(lane);

  if constexpr (P == kChain) {
#pragma unroll 1
    for (int b = 0; b < blocks; ++b) {
#pragma unroll
      for (int t = 0; t < T; ++t) {
        mma16816(acc[t], a0[t % M], b0[t / M], acc[t]);
        mma16816(acc[t], a1[t % M], b1[t / M], acc[t]);
      }
    }
  } else {
    // One block's products of every tile from +0 (two chained halves), and its multiply-adds.
    auto products = [&](float (&d)[T][4]) {
#pragma unroll
      for (int t = 0; t < T; ++t) mma16816(d[t], a0[t % M], b0[t / M], zero);
#pragma unroll
      for (int t = 0; t < T; ++t) mma16816(d[t], a1[t % M], b1[t / M], d[t]);
    };
    auto fold = [&](const float (&d)[T][4]) {
#pragma unroll
      for (int t = 0; t < T; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][i] = fmaf(scale, d[t][i], acc[t][i]);
    };
    if constexpr (P == kOrder) {
      float d[T][4];
#pragma unroll 1
      for (int b = 0; b < blocks; ++b) {
        products(d);
        fold(d);
        scale = scale * 1.0000001f;
      }
    } else {
      // Block b + 1's products before block b's multiply-adds, the two D sets taking turns.
      float d0[T][4], d1[T][4];
      products(d0);
#pragma unroll 1
      for (int b = 0; b < blocks; b += 2) {
        products(d1);
        fold(d0);
        products(d0);
        fold(d1);
        scale = scale * 1.0000001f;
      }
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int t = 0; t < T; ++t) s += acc[t][0] + acc[t][1] + acc[t][2] + acc[t][3];
  if (s == 12345.0f) out[blockIdx.x] = s;  // never true in practice; keeps the products alive
}

template <int P, int T>
void row(const char* name, int sms, double clock_ghz, float* out) {
  auto kernel = pattern_kernel<P, T>;
  int max_per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&max_per_sm, kernel, kThreads, 0));
  cudaFuncAttributes attr{};
  CK(cudaFuncGetAttributes(&attr, kernel));
  const int blocks = 256;  // 32-element blocks a warp: 512 products a tile
  for (int per_sm = 1; per_sm <= max_per_sm; ++per_sm) {
    // A grid of exactly per_sm blocks an SM, one wave: every warp runs the same work.
    const int grid = per_sm * sms;
    if (grid > kOutSlots) break;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    kernel<<<grid, kThreads>>>(blocks, out);  // warm-up
    CK(cudaGetLastError());
    float best = 1e30f;
    for (int rep = 0; rep < 5; ++rep) {
      CK(cudaEventRecord(e0));
      kernel<<<grid, kThreads>>>(blocks, out);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0.0f;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (ms < best) best = ms;
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    const double macs = static_cast<double>(grid) * (kThreads / 32) * T * 2.0 * blocks * 2048.0;
    const double tflops = 2.0 * macs / (best * 1e-3) / 1e12;
    const double mac_clk_sm = macs / (best * 1e-3) / (clock_ghz * 1e9) / sms;
    std::printf("| %-6s | %2d | %3d | %2d | %2d | %8.3f | %7.1f | %6.0f |\n", name, T, attr.numRegs, per_sm,
                per_sm * kThreads / 32, best, tflops, mac_clk_sm);
  }
}

int main() {
  int dev = 0, sms = 0, clock_khz = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  const double ghz = clock_khz / 1e6;
  std::printf("%s, %d SMs, max SM clock %.3f GHz (multiply-adds a clock an SM at that clock)\n\n", prop.name, sms, ghz);
  float* out = nullptr;
  CK(cudaMalloc(&out, kOutSlots * sizeof(float)));
  std::printf("| pattern | T | regs | blocks/SM | warps/SM | ms | TFLOPS | MAC/clk/SM |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  row<kChain, 16>("chain", sms, ghz, out);
  row<kChain, 8>("chain", sms, ghz, out);
  row<kOrder, 16>("order", sms, ghz, out);
  row<kOrder, 8>("order", sms, ghz, out);
  row<kOrder2, 16>("order2", sms, ghz, out);
  row<kOrder2, 8>("order2", sms, ghz, out);
  CK(cudaFree(out));
  return 0;
}
