#include "engine/engine_factory.h"

#include "engine/cpu_engine.h"

namespace petal {

StatusOr<std::unique_ptr<Engine>> CreateEngine(const std::string& model_dir,
                                               const EngineOptions& options) {
  std::string backend = options.backend;
  if (backend == "auto") backend = CudaAvailable() ? "cuda" : "cpu";
  if (!options.cuda.fp8_scales.empty() && options.cuda.quantize != "fp8")
    return InvalidArgument("--fp8-scales " + options.cuda.fp8_scales +
                           " needs --quantize fp8 (static scales are for the fp8 path)");
  if (backend == "cuda") {
    if (options.observer == nullptr) return CreateCudaEngine(model_dir, options.cuda);
    CudaEngineOptions cuda = options.cuda;
    cuda.observer = options.observer;
    return CreateCudaEngine(model_dir, cuda);
  }
  if (backend == "cpu") {
    if (options.cuda.quantize != "none")
      return InvalidArgument("--quantize " + options.cuda.quantize +
                             " needs the CUDA engine (--backend cuda); for the CPU engine see "
                             "--cpu-precision");
    PETAL_ASSIGN_OR_RETURN(auto e, CpuEngine::Load(model_dir, options.cpu, options.observer));
    return std::unique_ptr<Engine>(std::move(e));
  }
  return InvalidArgument("unknown backend '" + options.backend + "' (expected auto, cpu or cuda)");
}

}  // namespace petal
