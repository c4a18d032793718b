// Internal to the GEMM tuner: evicts the L2 by reading `bytes` of a 16-byte aligned device buffer
// on `stream` (sink: one device word, written only in an impossible case). Stateless.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace petal::cuda {

Status LaunchL2Flush(const void* buf, size_t bytes, uint32_t* sink, cudaStream_t stream);

}  // namespace petal::cuda
