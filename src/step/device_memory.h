// Memory that step state lives in: a backend's device memory, seen from the step core. The
// caches allocate, copy, upload and clear through it; Backend (backend/backend.h) implements it.
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
  // Host-to-device copy, ordered with the backend's ops; `src` may be reused once it returns
  // (the caches upload their KV block tables this way).
  virtual void to_device(void* dst, const void* src, size_t bytes) = 0;

 protected:
  ~DeviceMemory() = default;
};

}  // namespace memra
