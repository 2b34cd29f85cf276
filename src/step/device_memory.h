// Memory that step state lives in: a backend's device memory, seen from the step core. The
// caches allocate, copy and clear through it; Backend (backend/backend.h) implements it.
#pragma once

#include <cstddef>

namespace memra {

class DeviceMemory {
 public:
  // Persistent allocation (weights, caches). Zero-filled.
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  // Device-to-device copy and clear, ordered with the backend's ops.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void zero(void* dst, size_t bytes) = 0;

 protected:
  ~DeviceMemory() = default;
};

}  // namespace memra
