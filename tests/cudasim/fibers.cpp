// cudasim: one thread block at a time (one cluster of blocks, for a launch with clusters), its
// threads as fibers on the calling host thread. A fiber runs until it reaches a barrier or a warp
// collective, then the next ready one runs; a barrier opens when every live thread of the block
// (of the cluster, for a cluster barrier; every lane of the mask, for a collective) is there. Misuse that hangs or is undefined on the GPU stops the process with a message: a
// collective whose lanes are not all present, a lane that exits while its warp waits for it,
// threads that can never meet again (deadlock).
//
// A switch saves the callee-saved registers on the fiber's own stack and swaps stack pointers
// (x86-64 System V; 6 pushes and pops). ucontext's swapcontext also saves the signal mask with
// a system call per switch.
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define CUDASIM_ASAN 1
#else
#define CUDASIM_ASAN 0
#endif

uint3 cudasim_thread_idx, cudasim_block_idx;
dim3 cudasim_block_dim, cudasim_grid_dim;

#if !defined(__x86_64__)
#error "cudasim's context switch is written for x86-64"
#endif

// cudasim_switch(save, to): pushes rbp, rbx, r12-r15, stores rsp in *save, loads `to` as rsp,
// pops the same registers of the other context and returns into it.
extern "C" void cudasim_switch(void** save, void* to);
asm(R"(
  .text
  .globl cudasim_switch
  .type cudasim_switch, @function
cudasim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cudasim_switch, .-cudasim_switch
)");

namespace cudasim {
namespace {

// Kernel frames are small, but sanitizer builds enlarge them a lot.
constexpr size_t kStackBytes = size_t{512} << 10;

enum class State { Ready, BlockBarrier, ClusterBarrier, WarpWait, MbarrierWait, Done };
enum class WarpOp { Exchange, Sum };

struct Fiber {
  void* sp = nullptr;  // saved stack pointer while switched away
  void* stack = nullptr;
  void* fake_stack = nullptr;  // the sanitizer's, while switched away
  uint3 tid;
  int index = 0;  // thread index within its block
  int block = 0;  // block index within the cluster
  State state = State::Done;
  WarpOp op = WarpOp::Exchange;
  unsigned mask = 0;
  int src = 0;
  const uint64_t* mbar = nullptr;  // MbarrierWait: the barrier
  uint64_t value = 0, result = 0;
};

struct Warp {
  unsigned waiting = 0;  // lanes inside a collective
  unsigned exited = 0;   // lanes whose thread has returned
  unsigned present = 0;  // lanes that exist (a block's last warp may be partial)
};

// One block of the running cluster.
struct BlockState {
  int n_done = 0, n_at_barrier = 0;
  uint3 block_idx;
  void* smem = nullptr;
};

// The blocks that run together: one, or a cluster. Fibers and warps are indexed across them
// (block b's thread i is fiber b * n_threads + i).
struct Block {
  std::vector<Fiber> fibers;  // grows to the largest cluster seen; stacks are kept
  std::vector<Warp> warps;
  std::vector<BlockState> blocks;
  void* scheduler_sp = nullptr;
  void* scheduler_fake_stack = nullptr;
  const void* scheduler_stack_bottom = nullptr;
  size_t scheduler_stack_size = 0;
  int n_threads = 0;  // per block
  int n_at_cluster_barrier = 0;
  dim3 block_dim, grid_dim;
  const std::function<void()>* body = nullptr;
  Fiber* current = nullptr;
  int total() const { return n_threads * static_cast<int>(blocks.size()); }
  int n_done() const {
    int n = 0;
    for (const BlockState& b : blocks) n += b.n_done;
    return n;
  }
};

Block g_block;

[[noreturn]] void die(const char* what) {
  const uint3 bi = g_block.current ? g_block.blocks[g_block.current->block].block_idx : uint3{};
  std::fprintf(stderr, "cudasim: %s (block %u,%u,%u, thread %d)\n", what, bi.x, bi.y, bi.z,
               g_block.current ? g_block.current->index : -1);
  std::abort();
}

Fiber& current() {
  if (!g_block.current) die("a device function ran outside a kernel");
  return *g_block.current;
}

void to_scheduler(Fiber& f, bool exiting) {
#if CUDASIM_ASAN
  __sanitizer_start_switch_fiber(exiting ? nullptr : &f.fake_stack, g_block.scheduler_stack_bottom,
                                 g_block.scheduler_stack_size);
#endif
  cudasim_switch(&f.sp, g_block.scheduler_sp);
  if (exiting) die("an exited fiber was resumed");
#if CUDASIM_ASAN
  __sanitizer_finish_switch_fiber(f.fake_stack, nullptr, nullptr);
#endif
}

void run_fiber(Fiber& f) {
  g_block.current = &f;
  cudasim_thread_idx = f.tid;
  cudasim_block_idx = g_block.blocks[f.block].block_idx;
#if CUDASIM_ASAN
  __sanitizer_start_switch_fiber(&g_block.scheduler_fake_stack, f.stack, kStackBytes);
#endif
  cudasim_switch(&g_block.scheduler_sp, f.sp);
#if CUDASIM_ASAN
  __sanitizer_finish_switch_fiber(g_block.scheduler_fake_stack, nullptr, nullptr);
#endif
  g_block.current = nullptr;
}

void open_block_barrier_if_complete(int blk) {
  Block& b = g_block;
  BlockState& bs = b.blocks[blk];
  if (bs.n_at_barrier == 0 || bs.n_at_barrier + bs.n_done != b.n_threads) return;
  for (int i = blk * b.n_threads; i < (blk + 1) * b.n_threads; ++i)
    if (b.fibers[i].state == State::BlockBarrier) b.fibers[i].state = State::Ready;
  bs.n_at_barrier = 0;
}

void open_cluster_barrier_if_complete() {
  Block& b = g_block;
  if (b.n_at_cluster_barrier == 0 || b.n_at_cluster_barrier + b.n_done() != b.total()) return;
  for (int i = 0; i < b.total(); ++i)
    if (b.fibers[i].state == State::ClusterBarrier) b.fibers[i].state = State::Ready;
  b.n_at_cluster_barrier = 0;
}

// Releases the warp collective that `mask` names in warp `warp` once all its lanes wait in it.
void open_warp_op_if_complete(int warp, unsigned mask) {
  Block& b = g_block;
  Warp& w = b.warps[warp];
  const unsigned need = mask & w.present;
  if (need & w.exited) die("a warp collective names a lane that has exited");
  if ((w.waiting & need) != need) return;
  const int wpb = (b.n_threads + 31) / 32;
  const int base = (warp / wpb) * b.n_threads + (warp % wpb) * 32;
  uint64_t sum = 0;
  for (int l = 0; l < 32; ++l) {
    if (!((need >> l) & 1)) continue;
    const Fiber& o = b.fibers[base + l];
    if (o.mask != mask) die("lanes of one warp collective pass different masks");
    sum += o.value;
  }
  w.waiting &= ~need;
  for (int l = 0; l < 32; ++l) {
    if (!((need >> l) & 1)) continue;
    Fiber& o = b.fibers[base + l];
    if (o.op == WarpOp::Sum) {
      o.result = sum;
    } else {
      const int s = o.src;
      const bool valid = s >= 0 && s < 32 && ((mask >> s) & 1) && (warp % wpb) * 32 + s < b.n_threads;
      o.result = valid ? b.fibers[base + s].value : o.value;
    }
  }
  for (int l = 0; l < 32; ++l)
    if ((need >> l) & 1) b.fibers[base + l].state = State::Ready;
}

int global_of(const Fiber& f) { return f.block * g_block.n_threads + f.index; }
int warp_of(const Fiber& f) { return f.block * ((g_block.n_threads + 31) / 32) + f.index / 32; }

uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int src) {
  Fiber& f = current();
  const int lane = f.index % 32;
  if (!((mask >> lane) & 1)) die("a lane joined a warp collective whose mask leaves it out");
  f.state = State::WarpWait;
  f.op = op;
  f.mask = mask;
  f.value = value;
  f.src = src;
  g_block.warps[warp_of(f)].waiting |= 1u << lane;
  open_warp_op_if_complete(warp_of(f), mask);
  if (f.state != State::Ready) to_scheduler(f, false);
  return f.result;
}

// Entered by the first switch to a fiber (as the return address on its fresh stack).
[[noreturn]] void fiber_main() {
  Fiber& f = *g_block.current;
#if CUDASIM_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g_block.scheduler_stack_bottom, &g_block.scheduler_stack_size);
#endif
  (*g_block.body)();
  f.state = State::Done;
  ++g_block.blocks[f.block].n_done;
  Warp& w = g_block.warps[warp_of(f)];
  w.exited |= 1u << (f.index % 32);
  // A lane of this warp may wait in a collective that names this one.
  const int base = global_of(f) - f.index % 32;
  for (int l = 0; l < 32; ++l) {
    if (!((w.waiting >> l) & 1)) continue;
    if ((g_block.fibers[base + l].mask >> (f.index % 32)) & 1)
      die("a lane exited while lanes of its warp wait for it in a collective");
  }
  open_block_barrier_if_complete(f.block);
  open_cluster_barrier_if_complete();
  to_scheduler(f, true);
  std::abort();
}

void* new_stack() {
  void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) die("cannot map a fiber stack");
  return p;
}

}  // namespace

void* dynamic_smem() { return g_block.blocks[current().block].smem; }
int cluster_rank() { return current().block; }
void* cluster_map(void* p, int rank) {
  Block& b = g_block;
  if (rank < 0 || rank >= static_cast<int>(b.blocks.size())) die("a cluster rank outside the cluster");
  const char* mine = static_cast<const char*>(b.blocks[current().block].smem);
  return static_cast<char*>(b.blocks[rank].smem) + (static_cast<const char*>(p) - mine);
}
void sync_cluster() {
  Fiber& f = current();
  f.state = State::ClusterBarrier;
  ++g_block.n_at_cluster_barrier;
  open_cluster_barrier_if_complete();
  if (f.state != State::Ready) to_scheduler(f, false);
}
int lane_id() { return current().index % 32; }

void sync_block() {
  Fiber& f = current();
  f.state = State::BlockBarrier;
  ++g_block.blocks[f.block].n_at_barrier;
  open_block_barrier_if_complete(f.block);
  if (f.state != State::Ready) to_scheduler(f, false);
}

// An mbarrier's word: bits 0-19 the arrival count of a phase, 20-39 the arrivals still due in the
// current phase, 40-62 the announced bytes not yet copied (a signed 23-bit count: a copy may land
// before its announcement), 63 the current phase's parity.
namespace {
constexpr uint64_t kMbarCountMask = (uint64_t{1} << 20) - 1;
struct Mbar {
  uint32_t count, pending;
  int32_t tx;
  uint32_t parity;
};
Mbar mbar_load(const uint64_t* bar) {
  const uint64_t w = *bar;
  Mbar m;
  m.count = static_cast<uint32_t>(w & kMbarCountMask);
  m.pending = static_cast<uint32_t>((w >> 20) & kMbarCountMask);
  const uint32_t tx23 = static_cast<uint32_t>((w >> 40) & ((uint64_t{1} << 23) - 1));
  m.tx = static_cast<int32_t>(tx23 << 9) >> 9;  // sign-extend 23 bits
  m.parity = static_cast<uint32_t>(w >> 63);
  return m;
}
void mbar_store(uint64_t* bar, const Mbar& m) {
  if (m.count > kMbarCountMask || m.pending > kMbarCountMask) die("an mbarrier count out of range");
  if (m.tx >= (1 << 22) || m.tx < -(1 << 22)) die("an mbarrier transaction count out of range");
  *bar = uint64_t{m.count} | (uint64_t{m.pending} << 20) |
         ((static_cast<uint64_t>(static_cast<uint32_t>(m.tx)) & ((uint64_t{1} << 23) - 1)) << 40) |
         (uint64_t{m.parity} << 63);
}
// Completes the phase when nothing is due; the threads waiting on this barrier look again.
void mbar_settle(uint64_t* bar, Mbar m) {
  if (m.pending == 0 && m.tx == 0) {
    m.pending = m.count;
    m.parity ^= 1u;
    Block& b = g_block;
    for (int i = 0; i < b.total(); ++i)
      if (b.fibers[i].state == State::MbarrierWait && b.fibers[i].mbar == bar) b.fibers[i].state = State::Ready;
  }
  mbar_store(bar, m);
}
}  // namespace

void mbarrier_init(uint64_t* bar, uint32_t count) {
  if (count == 0 || count > kMbarCountMask) die("an mbarrier initialized with a count of 0 or too large");
  mbar_store(bar, Mbar{count, count, 0, 0});
}
void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  Mbar m = mbar_load(bar);
  if (m.count == 0) die("an arrival on an mbarrier that was not initialized");
  --m.pending;
  m.tx += static_cast<int32_t>(bytes);
  mbar_settle(bar, m);
}
void mbarrier_complete_tx(uint64_t* bar, uint32_t bytes) {
  Mbar m = mbar_load(bar);
  if (m.count == 0) die("a bulk copy completing on an mbarrier that was not initialized");
  m.tx -= static_cast<int32_t>(bytes);
  mbar_settle(bar, m);
}
void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  Fiber& f = current();
  // The phase of parity `parity` has completed once the current phase's parity differs.
  while (mbar_load(bar).parity == (parity & 1u)) {
    f.state = State::MbarrierWait;
    f.mbar = bar;
    to_scheduler(f, false);
  }
  f.mbar = nullptr;
}

uint64_t warp_exchange(unsigned mask, uint64_t value, int src_lane) {
  return warp_op(WarpOp::Exchange, mask, value, src_lane);
}
uint64_t warp_sum(unsigned mask, uint64_t value) { return warp_op(WarpOp::Sum, mask, value, 0); }

// Runs the blocks of one cluster of the current launch (one block without clusters) together,
// to completion. smems[i]: block i's dynamic shared memory.
void run_cluster(const std::vector<uint3>& block_idx, dim3 block_dim, dim3 grid_dim, const std::vector<void*>& smems,
                 const std::function<void()>& body) {
  Block& b = g_block;
  if (b.current) die("a kernel launched from device code");
  const int n = static_cast<int>(block_dim.x * block_dim.y * block_dim.z);
  const int nb = static_cast<int>(block_idx.size()), wpb = (n + 31) / 32;
  if (static_cast<int>(b.fibers.size()) < n * nb) b.fibers.resize(static_cast<size_t>(n) * nb);
  b.n_threads = n;
  b.blocks.assign(static_cast<size_t>(nb), BlockState{});
  b.warps.assign(static_cast<size_t>(wpb) * nb, Warp{});
  for (int k = 0; k < nb; ++k) {
    b.blocks[k].block_idx = block_idx[k];
    b.blocks[k].smem = smems[k];
    for (int i = 0; i < n; ++i) b.warps[k * wpb + i / 32].present |= 1u << (i % 32);
  }
  b.n_at_cluster_barrier = 0;
  b.block_dim = block_dim;
  b.grid_dim = grid_dim;
  b.body = &body;
  cudasim_block_dim = block_dim;
  cudasim_grid_dim = grid_dim;
  for (int gi = 0; gi < n * nb; ++gi) {
    Fiber& f = b.fibers[gi];
    if (!f.stack) f.stack = new_stack();
    const int i = gi % n;
    f.index = i;
    f.block = gi / n;
    f.tid = uint3{i % block_dim.x, i / block_dim.x % block_dim.y, i / (block_dim.x * block_dim.y)};
    f.state = State::Ready;
    f.fake_stack = nullptr;
    // A fresh stack as cudasim_switch leaves one: six saved registers, then the return address
    // (fiber_main) on a 16-byte boundary, so fiber_main starts aligned as if called.
    auto* top = reinterpret_cast<void**>(static_cast<char*>(f.stack) + kStackBytes - 16);
    top[0] = reinterpret_cast<void*>(&fiber_main);
    for (int r = 1; r <= 6; ++r) top[-r] = nullptr;
    f.sp = top - 6;
  }
  while (b.n_done() < n * nb) {
    bool ran = false;
    for (int i = 0; i < n * nb; ++i) {
      if (b.fibers[i].state != State::Ready) continue;
      run_fiber(b.fibers[i]);
      ran = true;
    }
    if (!ran) {
      int at_barrier = 0, in_warp_op = 0, at_mbarrier = 0;
      for (int i = 0; i < n * nb; ++i) {
        at_barrier += b.fibers[i].state == State::BlockBarrier || b.fibers[i].state == State::ClusterBarrier;
        in_warp_op += b.fibers[i].state == State::WarpWait;
        at_mbarrier += b.fibers[i].state == State::MbarrierWait;
      }
      std::fprintf(stderr,
                   "cudasim: deadlock: %d threads at barriers, %d in warp collectives, %d waiting on mbarrier phases "
                   "that cannot complete, %d exited\n",
                   at_barrier, in_warp_op, at_mbarrier, b.n_done());
      die("threads of a block can never meet again");
    }
  }
  b.body = nullptr;
}

}  // namespace cudasim
