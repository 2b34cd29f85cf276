// Host emulator for k_matmul_mma.cu (no GPU needed): runs the kernel's own source, with its PTX
// wrappers replaced by models of ldmatrix, mma.sync (PTX ISA fragment tables) and cp.async, on
// cooperative fibers (256 per CTA, a cluster at a time), and checks every output bit against a
// scalar implementation of the canonical order (matmul_order.h). Modes (environment):
//   EMU_SHUFFLE=1  random, sticky starvation of whole warps between barriers (exposes missing
//                  barriers: a warp runs far ahead of another)
//   EMU_EAGER=1    cp.async data lands at issue (exposes write-after-read hazards on buffers);
//                  by default it lands only at the cp.async.wait_group that covers it (exposes
//                  reads before the wait).
// Build and run: tools/mma_emu/run.sh [quick]
#include "emu_shim.h"
#include "kernel_emu.inc"  // tools/mma_emu/gen.py output
#include "quant/quant.h"

#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <random>
#include <vector>

using namespace memra;
using namespace memra::cuda;

namespace emu {

struct Copy {
  void* dst;
  const void* src;
  int n;
};

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  bool done = false;
  int cta = 0, tid = 0;  // CTA within the cluster, thread within the CTA
  std::deque<std::vector<Copy>> groups;  // committed, not yet landed
  std::vector<Copy> open;
};

struct Barrier {
  int count = 0, arrived = 0, gen = 0;
};

ucontext_t g_sched;
std::vector<Fiber> g_fibers;
int g_cur = 0;
std::vector<std::vector<uint8_t>> g_smem;  // per CTA of the cluster
std::vector<Barrier> g_block_bar;          // per CTA
std::vector<Barrier> g_warp_bar;           // per (CTA, warp)
Barrier g_cluster_bar;
Dim3 g_block_base;  // blockIdx of rank 0
Dim3 g_block_dim{256, 1, 1};
int g_ks = 1;
// warp exchange: per (CTA, warp, lane) 8 words
std::vector<uint32_t> g_xchg;
std::function<void()> g_body;

void yield() { swapcontext(&g_fibers[g_cur].ctx, &g_sched); }

long g_progress = 0;
void wait(Barrier& b) {
  ++g_progress;
  const int gen = b.gen;
  if (++b.arrived == b.count) {
    b.arrived = 0;
    ++b.gen;
    return;
  }
  while (b.gen == gen) yield();
}

Fiber& me() { return g_fibers[g_cur]; }
uint8_t* smem() { return g_smem[me().cta].data(); }
uint32_t smem_addr(const void* p) {
  const uint8_t* q = static_cast<const uint8_t*>(p);
  const uint8_t* base = smem();
  if (q < base || q >= base + g_smem[me().cta].size()) {
    std::fprintf(stderr, "smem_addr outside shared memory\n");
    std::abort();
  }
  return static_cast<uint32_t>(q - base);
}
void cp_async(void* dst, const void* src, int n) {
  uint8_t* d = static_cast<uint8_t*>(dst);
  if (d < smem() || d + n > smem() + g_smem[me().cta].size() || (reinterpret_cast<uintptr_t>(dst) % n) ||
      (reinterpret_cast<uintptr_t>(src) % n)) {
    std::fprintf(stderr, "bad cp.async\n");
    std::abort();
  }
  if (std::getenv("EMU_EAGER")) std::memcpy(dst, src, n);  // lands at once: exposes write-after-read hazards
  else me().open.push_back({dst, src, n});
}
void cp_commit() {
  me().groups.push_back(std::move(me().open));
  me().open.clear();
}
void cp_wait(int n) {
  // Copies land as late as allowed: only when waited for. A read before the wait sees stale data.
  while (static_cast<int>(me().groups.size()) > n) {
    for (const Copy& c : me().groups.front()) std::memcpy(c.dst, c.src, c.n);
    me().groups.pop_front();
  }
}
void syncthreads() { wait(g_block_bar[me().cta]); }
Dim3 thread_idx() { return {static_cast<unsigned>(me().tid), 0, 0}; }
Dim3 block_idx() { return {g_block_base.x + static_cast<unsigned>(me().cta), g_block_base.y, 0}; }
Dim3 block_dim() { return g_block_dim; }
void cluster_sync() { wait(g_cluster_bar); }
void* map_rank(void* p, int rank) {
  uint8_t* q = static_cast<uint8_t*>(p);
  const ptrdiff_t off = q - smem();
  return g_smem[rank].data() + off;
}

uint32_t* xchg(int lane) { return &g_xchg[((me().cta * 8 + me().tid / 32) * 32 + lane) * 8]; }
Barrier& warp_bar() { return g_warp_bar[me().cta * 8 + me().tid / 32]; }

// ldmatrix .x4 .b16: lane i gives the address of row i%8 of matrix i/8; lane l receives, of
// matrix m, the 32-bit word l%4 of row l/4.
void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  const int lane = me().tid % 32;
  if (addr % 16) {
    std::fprintf(stderr, "ldmatrix row address not 16-byte aligned\n");
    std::abort();
  }
  xchg(lane)[0] = addr;
  wait(warp_bar());
  uint32_t r[4];
  for (int m = 0; m < 4; ++m) {
    const uint32_t row = xchg(m * 8 + lane / 4)[0];
    std::memcpy(&r[m], smem() + row + 4 * (lane % 4), 4);
  }
  wait(warp_bar());
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}

// mma.sync m16n8k32 / m16n8k16 .s8.s8.s32 per the PTX ISA fragment tables.
void mma(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1, int k) {
  const int lane = me().tid % 32;
  uint32_t* x = xchg(lane);
  x[0] = a0, x[1] = a1, x[2] = a2, x[3] = a3, x[4] = b0, x[5] = b1;
  wait(warp_bar());
  int A[16][32] = {}, B[32][8] = {};
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l % 4;
    const uint32_t* y = xchg(l);
    const int na = k == 32 ? 16 : 8, nb = k == 32 ? 8 : 4;
    for (int i = 0; i < na; ++i) {
      const int v = static_cast<int8_t>(y[i / 4] >> (8 * (i % 4)));
      int row, col;
      if (k == 32) {
        row = (i < 4 || (i >= 8 && i < 12)) ? g : g + 8;
        col = t * 4 + (i & 3) + (i >= 8 ? 16 : 0);
      } else {
        row = i < 4 ? g : g + 8;
        col = t * 4 + (i & 3);
      }
      A[row][col] = v;
    }
    for (int i = 0; i < nb; ++i) {
      const int v = static_cast<int8_t>(y[4 + i / 4] >> (8 * (i % 4)));
      const int row = k == 32 ? t * 4 + (i & 3) + (i >= 4 ? 16 : 0) : t * 4 + i, col = g;
      B[row][col] = v;
    }
  }
  const int g = lane >> 2, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i >= 2 ? 8 : 0), col = t * 2 + (i & 1);
    int s = 0x4B400000;  // the kernel's C operand
    for (int kk = 0; kk < k; ++kk) s += A[row][kk] * B[kk][col];
    d[i] = s;
  }
  wait(warp_bar());
}

void trampoline() {
  g_body();
  g_fibers[g_cur].done = true;
  swapcontext(&g_fibers[g_cur].ctx, &g_sched);
}

// Runs `body` as ks * 256 fibers (one cluster) until all finish.
void run_cluster(int ks, size_t smem_bytes, Dim3 base, std::function<void()> body) {
  g_ks = ks;
  g_block_base = base;
  g_body = std::move(body);
  g_smem.assign(ks, std::vector<uint8_t>(smem_bytes));
  std::mt19937 junk(base.x * 131 + base.y);
  for (auto& s : g_smem)
    for (auto& b : s) b = static_cast<uint8_t>(junk());  // garbage, as on the device
  g_block_bar.assign(ks, Barrier{256, 0, 0});
  g_warp_bar.assign(ks * 8, Barrier{32, 0, 0});
  g_cluster_bar = Barrier{ks * 256, 0, 0};
  g_xchg.assign(static_cast<size_t>(ks) * 256 * 8, 0);
  g_fibers.clear();
  g_fibers.resize(ks * 256);
  for (int i = 0; i < ks * 256; ++i) {
    Fiber& f = g_fibers[i];
    f.cta = i / 256;
    f.tid = i % 256;
    f.stack.resize(256 * 1024);
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.data();
    f.ctx.uc_stack.ss_size = f.stack.size();
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, trampoline, 0);
  }
  std::vector<int> order(ks * 256);
  for (int i = 0; i < ks * 256; ++i) order[i] = i;
  const bool shuffle = std::getenv("EMU_SHUFFLE") != nullptr;
  std::vector<char> run_warp(ks * 8, 1);
  int sticky = 0;
  long last_progress = -1;
  std::mt19937 sh(base.x * 7 + base.y * 13 + 1);
  for (bool any = true; any;) {
    any = false;
    if (shuffle) std::shuffle(order.begin(), order.end(), sh);
    // Sticky starvation: a random subset of warps runs for many sweeps (until it stops making
    // progress or its time is up), so one warp can get far ahead of another between barriers.
    if (shuffle && (--sticky <= 0 || g_progress == last_progress)) {
      bool some = false;
      for (auto& r : run_warp) some |= (r = static_cast<char>(sh() % 3 == 0));
      if (!some || g_progress == last_progress) run_warp.assign(run_warp.size(), 1);
      sticky = 20 + static_cast<int>(sh() % 200);
    }
    last_progress = g_progress;
    for (int ii = 0; ii < ks * 256; ++ii) {
      const int i = order[ii];
      if (g_fibers[i].done) continue;
      any = true;
      if (shuffle && !(run_warp[i / 32])) continue;  // starve whole warps: varied interleavings
      g_cur = i;
      swapcontext(&g_sched, &g_fibers[i].ctx);
    }
  }
}

}  // namespace emu

// ---------------- reference: the canonical order, scalar ----------------

static float f16(uint16_t h) { return __half2float(__ushort_as_half(h)); }
static uint16_t rd16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
static uint32_t rd32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

static float block_term_ref(GgmlType T, const DevWeight& w, const uint8_t* row, int64_t b, const int8_t* xq, float dx,
                            int xs) {
  const int64_t k = slot_of_block(b, w.nb);
  int q[32];
  const uint8_t* qs = row + 16 * k;
  for (int i = 0; i < 32; ++i) q[i] = i < 16 ? (qs[i] & 0xF) : (qs[i - 16] >> 4);
  if (T == GgmlType::Q8_0)
    for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(row[32 * k + i]);
  if (T == GgmlType::Q5_K) {
    const uint32_t qh = rd32(row + w.off_b + 4 * k);
    for (int i = 0; i < 32; ++i) q[i] |= ((qh >> i) & 1) << 4;
  }
  if (T == GgmlType::Q6_K) {
    for (int i = 0; i < 32; ++i) {
      const int wsel = i / 16, k4 = (i % 16) / 4, p = i % 4;
      const uint32_t word = rd32(row + w.off_b + 8 * k + 4 * wsel);
      q[i] |= ((word >> (8 * p + 2 * k4)) & 3) << 4;
      q[i] -= 32;
    }
  }
  int dot = 0, d0 = 0, d1 = 0;
  for (int i = 0; i < 32; ++i) {
    dot += q[i] * xq[i];
    (i < 16 ? d0 : d1) += q[i] * xq[i];
  }
  switch (T) {
    case GgmlType::Q4_0: return (f16(rd16(row + w.off_b + 2 * k)) * dx) * static_cast<float>(dot - 8 * xs);
    case GgmlType::Q8_0: return (f16(rd16(row + w.off_b + 2 * k)) * dx) * static_cast<float>(dot);
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      const uint8_t* meta = row + (T == GgmlType::Q5_K ? w.off_c : w.off_b) + 16 * (b / 8);
      const int j = static_cast<int>(b % 8);
      const uint8_t* sc8 = meta + 4;
      int sc, m;
      if (j < 4) {
        sc = sc8[j] & 63;
        m = sc8[j + 4] & 63;
      } else {
        sc = (sc8[j + 4] & 0xF) | ((sc8[j - 4] >> 6) << 4);
        m = (sc8[j + 4] >> 4) | ((sc8[j] >> 6) << 4);
      }
      const float a = (f16(rd16(meta)) * dx) * static_cast<float>(sc * dot);
      const float c = (f16(rd16(meta + 2)) * dx) * static_cast<float>(m * xs);
      return a - c;
    }
    default: {
      const int s0 = static_cast<int8_t>(row[w.off_c + 2 * k]), s1 = static_cast<int8_t>(row[w.off_c + 2 * k + 1]);
      const float d = f16(rd16(row + w.off_c + 2 * w.ns + 2 * (b / 8)));
      return (d * dx) * static_cast<float>(s0 * d0 + s1 * d1);
    }
  }
}

static float ref_output(GgmlType T, const DevWeight& w, const uint8_t* row, const Q8Act& x, int64_t r) {
  const int64_t nb = w.nb, cs = chunk_blocks(nb);
  float P[32];
  for (int c = 0; c < 32; ++c) {
    P[c] = 0.0f;
    for (int64_t b = c * cs; b < std::min(nb, (c + 1) * cs); ++b) {
      const int64_t k = r * x.slots + slot_of_block(b, nb);
      P[c] = P[c] + block_term_ref(T, w, row, b, x.q + 32 * k, x.d[k], x.s[k]);
    }
  }
  for (int n = 32; n > 1; n /= 2)
    for (int i = 0; i < n / 2; ++i) P[i] = P[2 * i] + P[2 * i + 1];
  return P[0];
}

// ---------------- driver ----------------

static uint16_t rand_f16(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.001f, 1.0f);
  float v = u(rng) * ((rng() & 1) ? -1.0f : 1.0f);
  return __half_as_ushort(__float2half(v));
}

template <GgmlType T>
static int run_case(int64_t n_in, int64_t n_out, int64_t rows, int ks, bool acc, uint64_t seed) {
  std::mt19937_64 rng(seed);
  DevWeight w = plan_layout(T, n_in, n_out, 1);
  std::vector<uint8_t> wbytes(w.mat_stride);
  for (auto& b : wbytes) b = static_cast<uint8_t>(rng());
  for (int64_t j = 0; j < n_out; ++j) {  // valid f16 scales where the type has them
    uint8_t* row = wbytes.data() + j * w.row_stride;
    if (T == GgmlType::Q4_0 || T == GgmlType::Q8_0)
      for (int64_t k = 0; k < w.ns; ++k) {
        uint16_t h = rand_f16(rng);
        std::memcpy(row + w.off_b + 2 * k, &h, 2);
      }
    if (T == GgmlType::Q4_K || T == GgmlType::Q5_K)
      for (int64_t sb = 0; sb < w.nb / 8; ++sb) {
        uint8_t* meta = row + (T == GgmlType::Q5_K ? w.off_c : w.off_b) + 16 * sb;
        uint16_t h0 = rand_f16(rng), h1 = rand_f16(rng);
        std::memcpy(meta, &h0, 2);
        std::memcpy(meta + 2, &h1, 2);
      }
    if (T == GgmlType::Q6_K)
      for (int64_t sb = 0; sb < w.nb / 8; ++sb) {
        uint16_t h = rand_f16(rng);
        std::memcpy(row + w.off_c + 2 * w.ns + 2 * sb, &h, 2);
      }
  }
  w.data = wbytes.data();
  // activations in slot layout
  std::vector<int8_t> q(static_cast<size_t>(rows * w.ns * 32), 0);
  std::vector<float> d(static_cast<size_t>(rows * w.ns), 0.0f);
  std::vector<int32_t> s(static_cast<size_t>(rows * w.ns), 0);
  std::uniform_real_distribution<float> ud(1e-3f, 0.05f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < w.nb; ++b) {
      const int64_t k = r * w.ns + slot_of_block(b, w.nb);
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int v = static_cast<int>(rng() % 255) - 127;
        q[32 * k + i] = static_cast<int8_t>(v);
        sum += v;
      }
      s[k] = sum;
      d[k] = ud(rng);
    }
  Q8Act x;
  x.q = q.data();
  x.d = d.data();
  x.s = s.data();
  x.rows = rows;
  x.cols = n_in;
  x.slots = w.ns;
  // launcher logic (mirrors matmul_q8_mma)
  const int nb = static_cast<int>(w.nb);
  const int64_t R = (rows + kTR - 1) / kTR * kTR;
  const int mode = T == GgmlType::Q4_0 ? kAuxQ4_0 : (T == GgmlType::Q4_K || T == GgmlType::Q5_K) ? kAuxSum : kAuxNone;
  std::vector<int4> tq(static_cast<size_t>(nb * R * 2));
  std::vector<float2> aux(static_cast<size_t>(nb * R));
  {
    const int64_t n_pieces = static_cast<int64_t>(nb) * R * 2;
    const unsigned grid = static_cast<unsigned>((n_pieces + 255) / 256);
    emu::g_fibers.assign(1, emu::Fiber{});
    emu::g_cur = 0;
    for (unsigned bx = 0; bx < grid; ++bx)
      for (int tx = 0; tx < 256; ++tx) {
        emu::g_block_base = {bx, 0, 0};
        emu::g_fibers[0].cta = 0;
        emu::g_fibers[0].tid = tx;
        act_tiles_kernel(x.q, x.d, x.s, x.rows, nb, x.slots, R, mode, tq.data(), aux.data());
      }
  }
  std::vector<float> out(static_cast<size_t>(rows * n_out)), init(out.size());
  for (auto& v : init) v = std::uniform_real_distribution<float>(-2, 2)(rng);
  out = init;
  MmaArgs args;
  args.w = w.data;
  args.row_stride = static_cast<int64_t>(w.row_stride);
  args.off_b = w.off_b;
  args.off_c = w.off_c;
  args.nb = nb;
  args.ns = static_cast<int>(w.ns);
  args.cs = static_cast<int>(chunk_blocks(w.nb));
  args.n_out = n_out;
  args.rows = rows;
  args.R = R;
  args.aq = tq.data();
  args.aux = aux.data();
  args.out = out.data();
  args.out_stride = n_out;
  args.accumulate = acc;
  args.ks = ks;
  const int64_t tiles_j = (n_out + kTJ - 1) / kTJ, tiles_r = R / kTR;
  for (int64_t ty = 0; ty < tiles_r; ++ty)
    for (int64_t tx = 0; tx < tiles_j; ++tx)
      emu::run_cluster(ks, Cfg<T>::kSmem, {static_cast<unsigned>(tx * ks), static_cast<unsigned>(ty), 0},
                       [&] { matmul_mma_kernel<T>(args); });
  int bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n_out; ++j) {
      float want = ref_output(T, w, wbytes.data() + j * w.row_stride, x, r);
      if (acc) want = init[r * n_out + j] + want;
      const float got = out[r * n_out + j];
      if (std::memcmp(&got, &want, 4) != 0) {
        if (bad < 3)
          std::printf("  MISMATCH r %lld j %lld: got %.9g want %.9g\n", static_cast<long long>(r),
                      static_cast<long long>(j), got, want);
        ++bad;
      }
    }
  std::printf("%s n_in %lld n_out %lld rows %lld ks %d acc %d: %s (%d bad)\n", quant::type_name(T),
              static_cast<long long>(n_in), static_cast<long long>(n_out), static_cast<long long>(rows), ks, acc,
              bad ? "FAIL" : "ok", bad);
  std::fflush(stdout);
  return bad;
}

int main(int argc, char** argv) {
  int fails = 0;
  auto all = [&](int64_t n_in, int64_t n_out, int64_t rows, int ks, bool acc, uint64_t seed) {
    fails += run_case<GgmlType::Q4_0>(n_in, n_out, rows, ks, acc, seed) != 0;
    fails += run_case<GgmlType::Q8_0>(n_in, n_out, rows, ks, acc, seed) != 0;
    if (n_in % 256 == 0) {
      fails += run_case<GgmlType::Q4_K>(n_in, n_out, rows, ks, acc, seed) != 0;
      fails += run_case<GgmlType::Q5_K>(n_in, n_out, rows, ks, acc, seed) != 0;
      fails += run_case<GgmlType::Q6_K>(n_in, n_out, rows, ks, acc, seed) != 0;
    }
  };
  const int quick = argc > 1;
  all(128, 64, 17, 1, false, 1);    // nb 4: cs 1, 28 empty chunks
  all(2048, 130, 70, 1, true, 2);   // nb 64: cs 2; partial tiles in both directions
  all(2048, 96, 16, 4, false, 3);   // cluster of 4
  if (!quick) {
    all(4096, 128, 33, 2, true, 4);   // nb 128, cs 4, cluster of 2
    all(1280, 140, 20, 1, false, 5);  // nb 40: cs 2, 12 empty chunks
    all(12288, 40, 9, 1, false, 6);   // nb 384: cs 12
    all(96, 30, 3, 1, true, 7);       // nb 3
  }
  std::printf("%s: %d failing cases\n", fails ? "FAILED" : "PASSED", fails);
  return fails != 0;
}
