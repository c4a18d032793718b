// The model half of the architecture registry (registry.h holds the config half): per
// architecture, its checkpoint tensor table and how to build its CPU and CUDA forward passes.
// Lives in petal_model (it links the forward passes, hence BLAS and, with CUDA, the kernels);
// one line per architecture in factory.cc. Thread-safety: the table is immutable.
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "model/registry.h"

namespace petal {

struct ArchitectureFactory {
  Architecture id;
  // Every tensor the forward passes read, in checkpoint order.
  std::vector<CheckpointTensor> (*checkpoint_tensors)(const ModelConfig& c);
  StatusOr<std::unique_ptr<CpuModel>> (*create_cpu)(const ModelConfig& c,
                                                    const WeightStore& weights);
  // nullptr in a build without CUDA.
  StatusOr<std::unique_ptr<cuda::CudaModel>> (*create_cuda)(const ModelConfig& c,
                                                            const WeightStore& weights,
                                                            cuda::Capacity cap);
};

// The factory of `a` (every Architecture value has one).
const ArchitectureFactory& FindFactory(Architecture a);

}  // namespace petal
