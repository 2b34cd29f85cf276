// The process-wide programmatic-dependent-launch switch (launch.cuh).
#include "backend/cuda/kernels.h"

namespace memra::cuda {
bool pdl_enabled();
namespace {
bool g_pdl_enabled = false;  // MEMRA_CUDA_PDL sets it
}
bool pdl_enabled() { return g_pdl_enabled; }
void set_pdl_enabled(bool on) { g_pdl_enabled = on; }
}  // namespace memra::cuda
