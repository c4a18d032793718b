// Uploading host fp32 weights to the GPU as bf16, and the scratch arena of a CUDA model.
// Thread-safety: plain owning values; use from the engine thread.
#pragma once

#include <cuda_bf16.h>

#include <vector>

#include "common/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fp8_ops.h"

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

// Bytes held by a list of buffers, for stats.
template <typename... B>
size_t TotalBytes(const B&... b) {
  return (b.bytes() + ... + 0);
}

}  // namespace petal::cuda
