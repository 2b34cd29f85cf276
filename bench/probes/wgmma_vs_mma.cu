// Probe (H200, sm_90a): does wgmma (A from registers, B from shared memory) give the same bits as
// the mma.sync m16n8k16 chain of matmul_order.h for one 32-element block? Each CTA (one warpgroup)
// takes a 64 x 32 A (weight codes) and a 32 x 64 B (activation rows), computes
//   mma.sync:  D = mma(A[:, 0:16], B[0:16], +0); D = mma(A[:, 16:32], B[16:32], D)
//   wgmma:     D = wgmma(A[:, 0:16], B[0:16], scale-d 0); D = wgmma(A[:, 16:32], B[16:32], scale-d 1)
// and the host compares them bit for bit, and both against a float64 sum (to check the shared
// memory layout and descriptor; |err| <= 2^-20 sum |a b|). Build:
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 bench/probes/wgmma_vs_mma.cu -o /tmp/wgmma_probe
// Result (H200, 2026-12-03): 0 of 33,554,432 outputs differ; descriptor LBO 128 / SBO 256 right,
// swapped all wrong (bench/results/2026-12-03-0500-h200-session13.md). The kernel built on it:
// bench/notes/experiments/2026-12-03-wgmma-kernel.patch.
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <random>
#include <vector>

#include "probe_check.h"

constexpr int M = 64, N = 64, K = 32;

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, const float (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

__device__ __forceinline__ uint64_t desc(const void* p, uint32_t lbo, uint32_t sbo) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  return (static_cast<uint64_t>((a & 0x3FFFF) >> 4)) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

#define WG_D32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define WG_OUT32(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], const uint32_t (&a)[4], uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " WG_D32 ", {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
      : WG_OUT32(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}

// A: [trial][M][K] f16, B: [trial][N][K] f16 (row n = one activation row). Out: [trial][M][N] floats.
__global__ void __launch_bounds__(128) probe(const __half* A, const __half* B, float* out_mma, float* out_wg,
                                             uint32_t lbo, uint32_t sbo) {
  __shared__ __align__(128) uint8_t sb[2 * 2048];
  const int tr = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const __half* a = A + static_cast<size_t>(tr) * M * K;
  const __half* b = B + static_cast<size_t>(tr) * N * K;
  // B core matrices: k16 slice ks, n8 group j, k8 chunk c, row r at ks*2048 + j*256 + c*128 + r*16.
  for (int i = tid; i < N * K / 8; i += 128) {  // 16-byte pieces: row n, k8 chunk kc (0..3)
    const int n = i / 4, kc = i % 4;
    const int ks = kc / 2, c = kc % 2, j = n / 8, r = n % 8;
    std::memcpy(sb + ks * 2048 + j * 256 + c * 128 + r * 16, b + n * K + kc * 8, 16);
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  auto pair = [&](int row, int col) {
    uint32_t v;
    std::memcpy(&v, a + row * K + col, 4);
    return v;
  };
  uint32_t af[2][4];
  for (int ks = 0; ks < 2; ++ks) {
    const int r0 = 16 * warp + g, c0 = 16 * ks + 2 * t;
    af[ks][0] = pair(r0, c0);
    af[ks][1] = pair(r0 + 8, c0);
    af[ks][2] = pair(r0, c0 + 8);
    af[ks][3] = pair(r0 + 8, c0 + 8);
  }
  // mma.sync chain, n8 tile by n8 tile; B fragments from the same rows.
  float* om = out_mma + static_cast<size_t>(tr) * M * N;
  for (int j = 0; j < N / 8; ++j) {
    auto bpair = [&](int n, int k) {
      uint32_t v;
      std::memcpy(&v, b + n * K + k, 4);
      return v;
    };
    const float zero[4] = {0, 0, 0, 0};
    float d0[4], d1[4];
    mma16816(d0, af[0], bpair(8 * j + g, 2 * t), bpair(8 * j + g, 2 * t + 8), zero);
    mma16816(d1, af[1], bpair(8 * j + g, 16 + 2 * t), bpair(8 * j + g, 16 + 2 * t + 8), d0);
    const int r0 = 16 * warp + g, c0 = 8 * j + 2 * t;
    om[r0 * N + c0] = d1[0];
    om[r0 * N + c0 + 1] = d1[1];
    om[(r0 + 8) * N + c0] = d1[2];
    om[(r0 + 8) * N + c0 + 1] = d1[3];
  }
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.0f;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  wgmma_m64n64k16(d, af[0], desc(sb, lbo, sbo), 0);
  wgmma_m64n64k16(d, af[1], desc(sb + 2048, lbo, sbo), 1);
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  float* ow = out_wg + static_cast<size_t>(tr) * M * N;
  for (int j = 0; j < N / 8; ++j) {
    const int r0 = 16 * warp + g, c0 = 8 * j + 2 * t;
    ow[r0 * N + c0] = d[4 * j];
    ow[r0 * N + c0 + 1] = d[4 * j + 1];
    ow[(r0 + 8) * N + c0] = d[4 * j + 2];
    ow[(r0 + 8) * N + c0 + 1] = d[4 * j + 3];
  }
}

int main() {
  const int trials = 8192;
  std::mt19937_64 rng(12345);
  std::vector<__half> A(static_cast<size_t>(trials) * M * K), B(static_cast<size_t>(trials) * N * K);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int tr = 0; tr < trials; ++tr) {
    const int kind = tr % 4;  // weight codes: Q4 (-8..7), Q8 (-128..127), Q6 (-32..31), f16 values
    for (int i = 0; i < M * K; ++i) {
      double v;
      if (kind == 0) v = static_cast<int>(rng() % 16) - 8;
      else if (kind == 1) v = static_cast<int>(rng() % 256) - 128;
      else if (kind == 2) v = static_cast<int>(rng() % 64) - 32;
      else v = (u(rng) < 0.5 ? -1 : 1) * std::ldexp(1.0 + u(rng), static_cast<int>(rng() % 30) - 15);
      A[static_cast<size_t>(tr) * M * K + i] = __float2half_rn(static_cast<float>(v));
    }
    // Activations: per row, a spread of magnitudes below 2^15 (log-uniform over 2^-10 .. 2^15).
    for (int i = 0; i < N * K; ++i) {
      const double mag = std::ldexp(1.0 + u(rng), static_cast<int>(rng() % 25) - 10);
      const double v = (u(rng) < 0.5 ? -mag : mag);
      B[static_cast<size_t>(tr) * N * K + i] = __float2half_rn(static_cast<float>(std::min(v, 65000.0)));
    }
  }
  __half *dA, *dB;
  float *dm, *dw;
  const size_t outn = static_cast<size_t>(trials) * M * N;
  CK(cudaMalloc(&dA, A.size() * 2));
  CK(cudaMalloc(&dB, B.size() * 2));
  CK(cudaMalloc(&dm, outn * 4));
  CK(cudaMalloc(&dw, outn * 4));
  CK(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice));
  std::vector<float> om(outn), ow(outn);
  const uint32_t variants[2][2] = {{128, 256}, {256, 128}};
  for (auto& v : variants) {
    CK(cudaMemset(dw, 0xff, outn * 4));
    probe<<<trials, 128>>>(dA, dB, dm, dw, v[0], v[1]);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(om.data(), dm, outn * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ow.data(), dw, outn * 4, cudaMemcpyDeviceToHost));
    size_t differ = 0, mma_bad = 0, wg_bad = 0, first = outn;
    double worst = 0;
    for (int tr = 0; tr < trials; ++tr)
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
          double ref = 0, mag = 0;
          for (int k = 0; k < K; ++k) {
            const double p = static_cast<double>(__half2float(A[(static_cast<size_t>(tr) * M + m) * K + k])) *
                             __half2float(B[(static_cast<size_t>(tr) * N + n) * K + k]);
            ref += p;
            mag += std::fabs(p);
          }
          const size_t i = (static_cast<size_t>(tr) * M + m) * N + n;
          const double tol = std::ldexp(mag, -20) + 1e-30;
          if (std::fabs(om[i] - ref) > tol) ++mma_bad;
          if (!(std::fabs(ow[i] - ref) <= tol)) ++wg_bad;
          worst = std::max(worst, std::fabs(om[i] - ref) / (mag + 1e-30));
          uint32_t x, y;
          std::memcpy(&x, &om[i], 4);
          std::memcpy(&y, &ow[i], 4);
          if (x != y) {
            if (first == outn) first = i;
            ++differ;
          }
        }
    std::printf("LBO %u SBO %u: %zu outputs, mma.sync vs ref bad %zu (worst rel %.3g), wgmma vs ref bad %zu, "
                "mma.sync vs wgmma bits differ %zu\n", v[0], v[1], outn, mma_bad, worst, wg_bad, differ);
    if (differ && first < outn)
      std::printf("  first differing: trial %zu m %zu n %zu mma %.9g wgmma %.9g\n", first / (M * N), (first / N) % M,
                  first % N, om[first], ow[first]);
  }
  return 0;
}
