// The architectures' model factories (see factory.h). One line per architecture.
#include "model/factory.h"

#include "model/bert/bert_arch.h"
#include "model/qwen3/qwen3_arch.h"

#if PETAL_WITH_CUDA
#define PETAL_CUDA_FACTORY(f) (&f)
#else
#define PETAL_CUDA_FACTORY(f) nullptr
#endif

namespace petal {

const ArchitectureFactory& FindFactory(Architecture a) {
  static const std::vector<ArchitectureFactory> table = {
      {Architecture::kBert, &BertCheckpointTensors, &LoadBertCpuModel,
       PETAL_CUDA_FACTORY(cuda::CreateBertCudaModel)},
      {Architecture::kQwen3, &Qwen3ConfigTensors, &LoadQwen3CpuModel,
       PETAL_CUDA_FACTORY(cuda::CreateQwen3CudaModel)},
  };
  for (const ArchitectureFactory& f : table) {
    if (f.id == a) return f;
  }
  return table.front();  // unreachable: every enum value has a line above
}

}  // namespace petal
