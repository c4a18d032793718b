// The late-interaction (ColBERT / PyLate) half of a model folder's sentence-transformers files:
// the Dense projection modules, PyLate's keys in config_sentence_transformers.json and the token
// ids they name (prefixes, mask token, skiplist), read into ModelConfig::multivector. Which keys
// and what each decides: docs/models.md "Multi-vector models". Part of petal_model_io (no
// forward pass). Thread-safety: pure functions over files.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "model/config.h"

namespace petal::internal {

// Marks `c` a multi-vector model (task kMultiVector) from the Dense modules at `dense_paths`
// (modules.json order, relative to `dir`): each one's config.json (identity activation, token
// embeddings in and out, no residual; anything else refused naming file, key and value), then
// config_sentence_transformers.json's PyLate keys with PyLate's defaults, and the ids of the
// prefixes, the mask token and the skiplist words from dir/tokenizer.json. BERT / XLM-R only.
Status ReadMultiVector(const std::string& dir, const std::vector<std::string>& dense_paths,
                       ModelConfig& c);

}  // namespace petal::internal
