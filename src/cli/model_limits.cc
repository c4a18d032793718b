// Per-model limits from the gateway flags (see model_limits.h).
#include "cli/model_limits.h"

#include <optional>
#include <string>
#include <vector>

namespace petal::cli {
namespace {

// Spreads `values` of `flag`: one value goes to `every` (the gateway's field), one per model to
// each model's `own` field.
template <typename T>
Status Spread(const char* flag, const std::vector<T>& values, T* every,
              std::vector<gateway::ModelOptions>* models,
              std::optional<T> gateway::ModelOptions::*own) {
  if (values.empty()) return Status::Ok();
  if (values.size() == 1) {
    *every = values[0];
    return Status::Ok();
  }
  if (values.size() != models->size()) {
    return InvalidArgument(std::string(flag) + " is given " + std::to_string(values.size()) +
                           " times for " + std::to_string(models->size()) +
                           " --model: give it once (for every model) or once per --model, in "
                           "the same order");
  }
  for (size_t i = 0; i < values.size(); ++i) (*models)[i].*own = values[i];
  return Status::Ok();
}

}  // namespace

Status ApplyModelLimits(const ModelFlags& flags, gateway::GatewayOptions* o) {
  PETAL_RETURN_IF_ERROR(Spread("--max-inputs", flags.max_inputs, &o->max_inputs, &o->models,
                               &gateway::ModelOptions::max_inputs));
  PETAL_RETURN_IF_ERROR(Spread("--chunk-max-sequences", flags.chunk_max_seqs, &o->chunk.max_seqs,
                               &o->models, &gateway::ModelOptions::chunk_max_seqs));
  PETAL_RETURN_IF_ERROR(Spread("--chunk-max-tokens", flags.chunk_max_tokens, &o->chunk.max_tokens,
                               &o->models, &gateway::ModelOptions::chunk_max_tokens));
  PETAL_RETURN_IF_ERROR(Spread("--max-queued-tokens", flags.max_queued_tokens,
                               &o->flow.max_held_tokens, &o->models,
                               &gateway::ModelOptions::max_held_tokens));
  return Status::Ok();
}

}  // namespace petal::cli
