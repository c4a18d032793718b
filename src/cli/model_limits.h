// The limits of `petal serve` / `petal gateway` that each model may have of its own (issue 31:
// "each model has its own replicas, tokenizer, limits and flow-control bound"): --max-inputs,
// --chunk-max-sequences, --chunk-max-tokens and --max-queued-tokens. Like --model-name, each is
// given not at all (the default), once (every model's: GatewayOptions' own field) or exactly
// once per --model, in the same order (each ModelOptions' own); any other count is an error that
// names the flag and both counts. Thread-safety: called during start-up only.
#pragma once

#include "cli/gateway_flags.h"
#include "common/status.h"
#include "gateway/gateway.h"

namespace petal::cli {

// Puts the flags' values where they apply. o->models must already hold one ModelOptions per
// --model, in order; InvalidArgument (the options partly set) on a count that fits neither rule.
Status ApplyModelLimits(const ModelFlags& flags, gateway::GatewayOptions* o);

}  // namespace petal::cli
