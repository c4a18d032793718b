// The architecture registry: one entry per model architecture Petal runs, and the only place
// that lists them. Each entry points into that architecture's folder (src/model/<arch>/): how
// to recognise its config.json, how to read its config extras, its parameter count, its
// checkpoint tensor table, and how to build its CPU and CUDA forward passes. Adding an
// architecture is its folder plus one line in registry.cc (docs/architecture.md).
// Thread-safety: the table is immutable; every function is reentrant.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/config.h"

namespace petal {

class ConfigFields;
class CpuModel;
class WeightStore;
namespace cuda {
class CudaModel;
struct Capacity;
}  // namespace cuda

// One tensor of a checkpoint in its published layout, named as the architecture's bare model
// class stores it (no "model." / "bert." prefix).
struct CheckpointTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool is_norm = false;  // a norm's scale (initialised near 1 by make-model and test fixtures)
};

struct ArchitectureEntry {
  Architecture id;
  const char* name;  // "bert", "qwen3": ArchitectureName()
  // Whether config.json (its model_type, else its architectures[0]) names this architecture.
  bool (*detect)(const ConfigFields& config_json);
  // Reads the architecture's own keys into `c` (the common shape keys are already read) and
  // refuses every value that would change the maths and is not implemented, naming the key.
  Status (*parse_extras)(const ConfigFields& config_json, ModelConfig* c);
  // Parameters implied by the shapes, embeddings included (double: cannot overflow).
  double (*parameter_count)(const ModelConfig& c);
  // Every tensor the forward passes read, in checkpoint order.
  std::vector<CheckpointTensor> (*checkpoint_tensors)(const ModelConfig& c);
  StatusOr<std::unique_ptr<CpuModel>> (*create_cpu)(const ModelConfig& c,
                                                    const WeightStore& weights);
  // nullptr in a build without CUDA.
  StatusOr<std::unique_ptr<cuda::CudaModel>> (*create_cuda)(const ModelConfig& c,
                                                            const WeightStore& weights,
                                                            cuda::Capacity cap);
};

// Every registered architecture.
const std::vector<ArchitectureEntry>& Architectures();
// The entry of `a` (every Architecture value has one).
const ArchitectureEntry& FindArchitecture(Architecture a);
// The entry whose detect() accepts `config_json`; otherwise an error naming the file, the key
// (model_type, else architectures) and its value.
StatusOr<const ArchitectureEntry*> DetectArchitecture(const ConfigFields& config_json);

}  // namespace petal
