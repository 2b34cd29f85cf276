// The CUDA backend's entry points, usable from plain C++ (no CUDA headers here).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace memra {

// True when a CUDA device of compute capability >= 9.0 can be used.
bool cuda_device_available();
// True in a build against the CPU emulation (tests/cudasim): `--device auto` then keeps the CPU.
bool cuda_backend_emulated();
std::string cuda_unavailable_reason();
std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options = {});

}  // namespace memra
