// Error checking and device memory ownership for the CUDA backend.
//
// PETAL_CUDA_CHECK / PETAL_CUBLAS_CHECK turn a failing CUDA runtime or cuBLAS(Lt) call into a
// petal::Status (kInternal, "file:line: call: error string") and return it from the enclosing
// function, which must return Status (or StatusOr). DeviceBuffer<T> owns one cudaMalloc'ed
// array: allocate at plan time, never on the hot path (cudaMalloc breaks graph capture and
// synchronises). Thread-safety: the macros are stateless; a DeviceBuffer is a plain owning value
// (move-only), safe to use from one thread at a time like any container.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "common/status.h"

namespace petal::cuda {

inline Status CudaError(cudaError_t err, const char* expr, const char* file, int line) {
  return Internal(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " +
                  cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

inline Status CublasError(cublasStatus_t st, const char* expr, const char* file, int line) {
  return Internal(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " +
                  cublasLtGetStatusName(st) + " (" + cublasLtGetStatusString(st) + ")");
}

// Returns the launch error of the kernel just launched (invalid configuration, missing image for
// this GPU, ...). Does not synchronise, so asynchronous faults surface at the next sync.
inline Status LastLaunchError(const char* kernel, const char* file, int line) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status::Ok();
  return CudaError(err, kernel, file, line);
}

inline bool IsAligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace petal::cuda

#define PETAL_CUDA_CHECK(expr)                                                     \
  do {                                                                             \
    const cudaError_t petal_cuda_err_ = (expr);                                    \
    if (petal_cuda_err_ != cudaSuccess)                                            \
      return ::petal::cuda::CudaError(petal_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define PETAL_CUBLAS_CHECK(expr)                                                      \
  do {                                                                                \
    const cublasStatus_t petal_cublas_st_ = (expr);                                   \
    if (petal_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                    \
      return ::petal::cuda::CublasError(petal_cublas_st_, #expr, __FILE__, __LINE__); \
  } while (0)

// Use right after a <<<...>>> launch.
#define PETAL_CUDA_CHECK_LAUNCH(name) \
  PETAL_RETURN_IF_ERROR(::petal::cuda::LastLaunchError(name, __FILE__, __LINE__))

namespace petal::cuda {

// Owns `size` elements of T in device memory (uninitialised). Move-only.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  // Frees any previous allocation, then allocates `count` elements (none for count == 0).
  Status Allocate(size_t count) {
    Reset();
    if (count == 0) return Status::Ok();
    void* p = nullptr;
    PETAL_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
    ptr_ = static_cast<T*>(p);
    size_ = count;
    return Status::Ok();
  }
  // Synchronous uploads/downloads of the first `count` elements; for set-up and tests only.
  Status CopyFromHost(const T* src, size_t count) {
    if (count > size_) return OutOfRange("DeviceBuffer::CopyFromHost: count exceeds size");
    PETAL_CUDA_CHECK(cudaMemcpy(ptr_, src, count * sizeof(T), cudaMemcpyHostToDevice));
    return Status::Ok();
  }
  Status CopyToHost(T* dst, size_t count) const {
    if (count > size_) return OutOfRange("DeviceBuffer::CopyToHost: count exceeds size");
    PETAL_CUDA_CHECK(cudaMemcpy(dst, ptr_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return Status::Ok();
  }
  void Reset() {
    if (ptr_)
      cudaFree(ptr_);  // Error ignored: destructors cannot report, and the context may be gone.
    ptr_ = nullptr;
    size_ = 0;
  }

  T* get() const { return ptr_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace petal::cuda
