// Uploading weights to the GPU as bf16 (from host fp32 vectors, or straight from the checkpoint
// in parallel) or fp8. Thread-safety: call from the thread that owns the model being built;
// UploadTensorsBf16 runs its own worker threads and joins them before returning.
#pragma once

#include <cuda_bf16.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fp8_ops.h"
#include "model/safetensors.h"

namespace petal::cuda {

using bf16 = __nv_bfloat16;

// Rounds `host` to bf16 (nearest even) and copies it to a new device buffer. An empty vector
// gives an empty buffer (get() == nullptr), which launchers read as "absent".
StatusOr<DeviceBuffer<bf16>> UploadBf16(const std::vector<float>& host);

// Quantises host fp32 weights [rows, dim] to e4m3 with one scale per row (per output channel;
// fp8_ops.h's formula, computed on the device from the fp32 values, not from bf16) into new
// device buffers. Synchronises (load time only). An empty vector gives empty buffers.
Status UploadFp8Rows(const std::vector<float>& host, int rows, int dim, DeviceBuffer<fp8>* q,
                     DeviceBuffer<float>* scale);

// One checkpoint tensor and where its bf16 values go on the device.
struct UploadJob {
  std::string name;  // full checkpoint name (prefix included)
  std::vector<int64_t> shape;
  bf16* dst = nullptr;  // numel(shape) values
};

// Converts each job's tensor from the checkpoint's dtype straight to bf16 (no fp32 host copy)
// and copies it to the device, on up to `threads` host threads in parallel (each with its own
// stream, on the caller's current device). Returns the first error. Load time only.
Status UploadTensorsBf16(const WeightStore& store, const std::vector<UploadJob>& jobs, int threads);

// Bytes held by a list of buffers, for stats.
template <typename... B>
size_t TotalBytes(const B&... b) {
  return (b.bytes() + ... + 0);
}

}  // namespace petal::cuda
