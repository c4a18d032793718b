#include "engine/engine.h"

namespace petal {

StatusOr<Embeddings> Engine::Embed(const Batch& batch) {
  PETAL_ASSIGN_OR_RETURN(auto pending, Step(batch));
  return pending->Wait();
}

}  // namespace petal
