// The start-up memory check of `petal serve` when several models share a GPU (issue 31): each
// model's weights as the CUDA engine holds them (floating tensors in bf16), read from its
// safetensors headers, plus a fixed reserve per engine for activations, cuBLAS workspaces and
// CUDA graphs, against the device's free memory. An estimate, made before any engine starts,
// so that a deployment that cannot fit says so by model instead of failing in cudaMalloc.
// Thread-safety: pure functions (EstimateWeightBytes reads files).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace petal::cli {

// Device bytes of one engine beyond its weights, as estimated: activation buffers at the default
// token budget, cuBLASLt / attention workspaces, result slots and captured graphs (the 0.6b
// shape's engine holds ~0.6 GiB beyond its weights on the H200).
inline constexpr uint64_t kEngineReserveBytes = 1ull << 30;

// The bytes of `model_dir`'s *.safetensors tensors once loaded: 2 per element of a floating
// tensor (the CUDA engine's bf16), whatever the file's dtype.
StatusOr<uint64_t> EstimateWeightBytes(const std::string& model_dir);

struct EngineFootprint {
  std::string model;      // the model's name, for the message
  uint64_t weight_bytes;  // EstimateWeightBytes
};

// OK when every engine's weights plus kEngineReserveBytes fit in `free_bytes` of device `device`;
// else FailedPrecondition naming each model's estimate, the sum and the free memory.
Status CheckEnginesFit(const std::vector<EngineFootprint>& engines, uint64_t free_bytes,
                       int device);

}  // namespace petal::cli
