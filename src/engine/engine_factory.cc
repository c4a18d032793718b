#include "engine/engine_factory.h"

#include "engine/cpu_engine.h"

namespace petal {

StatusOr<std::unique_ptr<Engine>> CreateEngine(const std::string& model_dir,
                                               const EngineOptions& options) {
  std::string backend = options.backend;
  if (backend == "auto") backend = CudaAvailable() ? "cuda" : "cpu";
  if (backend == "cuda") return CreateCudaEngine(model_dir, options.cuda);
  if (backend == "cpu") {
    if (options.cuda.quantize != "none")
      return InvalidArgument("--quantize " + options.cuda.quantize +
                             " needs the CUDA engine (--backend cuda); for the CPU engine see "
                             "--cpu-precision");
    PETAL_ASSIGN_OR_RETURN(auto e, CpuEngine::Load(model_dir, options.cpu));
    return std::unique_ptr<Engine>(std::move(e));
  }
  return InvalidArgument("unknown backend '" + options.backend + "' (expected auto, cpu or cuda)");
}

}  // namespace petal
