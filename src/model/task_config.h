// Which task a model folder serves (embedding or ranking) where config.json does not say it,
// and what a ranking model needs beyond config.json (its LM reranker's "yes"/"no" token ids);
// the rule is docs/models.md "Ranking models". Internal to petal_model_io (config.cc).
// Thread-safety: pure functions over the folder's files.
#pragma once

#include <string>

#include "common/status.h"
#include "model/config.h"

namespace petal::internal {

// Completes `c` (parsed from dir/config.json and petal_config.json; `c.task_source` set when
// petal_config.json named the task) with its task, score head and their inputs, or refuses an
// ambiguous or contradictory folder naming the files.
Status ResolveTask(const std::string& dir, bool has_pooling_module, ModelConfig& c);

}  // namespace petal::internal
