// The architecture registry: one entry per model architecture Petal runs, and the only place
// that lists them. Each entry points into that architecture's folder (src/model/<arch>/): how
// to recognise its config.json, how to read its config extras, its parameter count, its
// and its parameter count: what config parsing needs, so this table lives in petal_model_io and
// the gateway can read configs without linking any forward pass. Its checkpoint tensor table and
// how to build its CPU and CUDA forward passes are the architecture's line in factory.h's table
// (petal_model). Adding an architecture is its folder plus one line in registry.cc and one in
// factory.cc (docs/architecture.md).
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
};

// Every registered architecture.
const std::vector<ArchitectureEntry>& Architectures();
// The entry of `a` (every Architecture value has one).
const ArchitectureEntry& FindArchitecture(Architecture a);
// The entry whose detect() accepts `config_json`; otherwise an error naming the file, the key
// (model_type, else architectures) and its value.
StatusOr<const ArchitectureEntry*> DetectArchitecture(const ConfigFields& config_json);

}  // namespace petal
