// Multi-vector (ColBERT / PyLate) inputs and scores, as plain functions the routes use
// (multivector_routes.cc): how a query or document becomes the model's token sequence (the
// prefix token after the first token, mask-token query expansion), which of a document's token
// vectors are kept (PyLate's skiplist), and MaxSim. docs/models.md "Multi-vector models".
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace petal::gateway {

// How a text of one kind (query or document) is shaped for a multi-vector model.
struct TokenInputRule {
  int max_text_tokens = 0;  // the tokenizer's truncation length (special tokens included)
  int prefix_id = -1;       // inserted after the first token; -1 = none
  int pad_to = 0;           // queries with expansion: padded with mask_id up to this; 0 = none
  int mask_id = -1;
};
TokenInputRule TokenInputFor(const ModelConfig& config, bool is_query);

// Applies `rule` to ids the tokenizer produced (special tokens added, truncated at
// rule.max_text_tokens): [first, prefix, rest..., mask...].
void ShapeTokenInput(const TokenInputRule& rule, std::vector<int32_t>* ids);

// Whether token `id` of a document keeps its vector (not in the model's skiplist); a query
// keeps every token, expansion tokens included.
bool KeepToken(const MultiVectorConfig& mv, bool is_query, int32_t id);

// MaxSim (ColBERT's late interaction): the sum over the query's nq vectors of the largest dot
// product with any of the document's nd vectors; rows of `dim` floats. 0 when nd is 0.
double MaxSim(const float* q, size_t nq, const float* d, size_t nd, size_t dim);

}  // namespace petal::gateway
