// cudasim: the runtime API subset memra calls. Device memory is host memory; every stream runs
// its work at once and in order; a stream under capture records launches, copies and sets into
// its graph instead, and launching the graph replays them.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <unistd.h>

#include "cuda_runtime.h"

struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};
struct CUstream_st {
  CUgraph_st* capture = nullptr;  // non-null while capturing
};
struct CUevent_st {
  std::chrono::steady_clock::time_point at;
};
struct CUmemPool_st {};

namespace cudasim {
void run_cluster(const std::vector<uint3>& block_idx, dim3 block_dim, dim3 grid_dim, const std::vector<void*>& smems,
                 const std::function<void()>& body);

namespace {
constexpr int kSms = 4;                         // small: persistent kernels loop more
constexpr size_t kDefaultSmem = 48 * 1024;      // without cudaFuncSetAttribute
constexpr size_t kMaxOptinSmem = 227 * 1024;    // sm_90
cudaError_t g_last_error = cudaSuccess;
std::map<const void*, size_t> g_smem_limit;
CUmemPool_st g_pool;

cudaError_t fail(cudaError_t e, const char* what) {
  std::fprintf(stderr, "cudasim: %s\n", what);
  g_last_error = e;
  return e;
}

// Runs `work` now, or records it when `s` is being captured.
cudaError_t enqueue(cudaStream_t s, std::function<void()> work) {
  if (s && s->capture) s->capture->work.push_back(std::move(work));
  else work();
  return cudaSuccess;
}
}  // namespace

cudaError_t set_max_dynamic_smem(const void* kernel, int bytes) {
  if (bytes < 0 || static_cast<size_t>(bytes) > kMaxOptinSmem) return fail(cudaErrorInvalidValue, "shared memory limit over 227 KiB");
  g_smem_limit[kernel] = static_cast<size_t>(bytes);
  return cudaSuccess;
}

cudaError_t launch(const void* kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   std::function<void()> body, dim3 cluster) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535)
    return fail(cudaErrorInvalidConfiguration, "launch with an invalid grid or block shape");
  const auto it = g_smem_limit.find(kernel);
  if (smem > (it == g_smem_limit.end() ? kDefaultSmem : it->second))
    return fail(cudaErrorInvalidValue, "launch asks for more dynamic shared memory than the kernel's limit");
  const uint64_t per_cluster = uint64_t{cluster.x} * cluster.y * cluster.z;
  if (per_cluster == 0 || per_cluster > 8 || grid.x % cluster.x || grid.y % cluster.y || grid.z % cluster.z)
    return fail(cudaErrorInvalidConfiguration, "cluster shape does not divide the grid (or is over 8 blocks)");
  return enqueue(stream, [grid, block, smem, cluster, per_cluster, body = std::move(body)]() {
    // Fresh dynamic shared memory per block of a cluster, filled with a pattern: kernels must not
    // rely on its contents. 16-byte aligned like the real thing.
    const size_t floats = (smem + 15) / 4 + 4;
    std::vector<std::unique_ptr<float[]>> mem;
    std::vector<void*> smems;
    for (uint64_t i = 0; i < per_cluster; ++i) {
      mem.emplace_back(new float[floats]);
      std::memset(mem.back().get(), 0xA5, floats * 4);
      smems.push_back(mem.back().get());
    }
    std::vector<uint3> idx;
    for (unsigned z = 0; z < grid.z; z += cluster.z)
      for (unsigned y = 0; y < grid.y; y += cluster.y)
        for (unsigned x = 0; x < grid.x; x += cluster.x) {
          idx.clear();
          for (unsigned cz = 0; cz < cluster.z; ++cz)
            for (unsigned cy = 0; cy < cluster.y; ++cy)
              for (unsigned cx = 0; cx < cluster.x; ++cx) idx.push_back(uint3{x + cx, y + cy, z + cz});
          run_cluster(idx, block, grid, smems, body);
        }
  });
}
}  // namespace cudasim

using cudasim::enqueue;

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error (cudasim)";
    case cudaErrorInvalidValue: return "invalid argument (cudasim)";
    case cudaErrorMemoryAllocation: return "out of memory (cudasim)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (cudasim)";
    default: return "unspecified launch failure (cudasim)";
  }
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = cudasim::g_last_error;
  cudasim::g_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d != 0) return cudaErrorInvalidValue;
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof(p->name), "cudasim (CPU emulation of sm_90)");
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = cudasim::kSms;
  p->totalGlobalMem = size_t{8} << 30;
  p->sharedMemPerBlockOptin = cudasim::kMaxOptinSmem;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  if (a != cudaDevAttrMultiProcessorCount) return cudaErrorInvalidValue;
  *v = cudasim::kSms;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* p, int) {
  *p = &cudasim::g_pool;
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) { return cudaSuccess; }

cudaError_t cudaMalloc(void** p, size_t bytes) {
  // Uninitialised like device memory: small buffers get a pattern rather than zeros. Large ones
  // (the backend's scratch arena is gigabytes) stay untouched, so only pages in use are mapped.
  *p = std::malloc(bytes ? bytes : 1);
  if (!*p) return cudaErrorMemoryAllocation;
  if (bytes <= (size_t{16} << 20)) std::memset(*p, 0xCD, bytes);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t s) {
  if (s && s->capture) return cudasim::fail(cudaErrorInvalidValue, "cudaMallocAsync under capture is not emulated");
  return cudaMalloc(p, bytes);
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  // Device memory is host memory: the machine's physical and available pages.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  *total_bytes = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * page;
  *free_bytes = static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * page;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  if (s && s->capture) return cudasim::fail(cudaErrorInvalidValue, "cudaFreeAsync under capture is not emulated");
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t s) {
  return enqueue(s, [=]() {
    if (bytes) std::memmove(dst, src, bytes);
  });
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t s) {
  return enqueue(s, [=]() { std::memset(dst, value, bytes); });
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (s && s->capture) return cudasim::fail(cudaErrorInvalidValue, "stream synchronize during capture");
  return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  if (!s || s->capture) return cudasim::fail(cudaErrorInvalidValue, "capture on the null stream or twice");
  s->capture = new CUgraph_st;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
  if (!s || !s->capture) return cudasim::fail(cudaErrorInvalidValue, "end of a capture that was not begun");
  *g = s->capture;
  s->capture = nullptr;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long) {
  *e = new CUgraphExec_st{g->work};
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
  for (const auto& w : e->work) enqueue(s, w);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete g;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  return enqueue(s, [e]() { e->at = std::chrono::steady_clock::now(); });
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return cudaSuccess;
}
