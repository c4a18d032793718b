// Multi-vector input shaping, skiplist and MaxSim (see multivector.h).
#include "gateway/multivector.h"

#include <algorithm>
#include <limits>

namespace petal::gateway {

TokenInputRule TokenInputFor(const ModelConfig& config, bool is_query) {
  const MultiVectorConfig& mv = config.multivector;
  TokenInputRule r;
  r.prefix_id = is_query ? mv.query_prefix_id : mv.document_prefix_id;
  const int length = is_query ? mv.query_length : mv.document_length;
  // PyLate tokenizes to length - 1 when it inserts a prefix, so the result is at most `length`.
  r.max_text_tokens = r.prefix_id >= 0 ? length - 1 : length;
  if (is_query && mv.do_query_expansion) r.pad_to = length;
  r.mask_id = mv.mask_token_id;
  return r;
}

void ShapeTokenInput(const TokenInputRule& rule, std::vector<int32_t>* ids) {
  if (rule.prefix_id >= 0) {
    ids->insert(ids->empty() ? ids->end() : ids->begin() + 1, rule.prefix_id);
  }
  if (rule.pad_to > 0 && static_cast<int>(ids->size()) < rule.pad_to) {
    ids->resize(rule.pad_to, rule.mask_id);
  }
}

bool KeepToken(const MultiVectorConfig& mv, bool is_query, int32_t id) {
  return is_query || !std::binary_search(mv.skiplist_ids.begin(), mv.skiplist_ids.end(), id);
}

double MaxSim(const float* q, size_t nq, const float* d, size_t nd, size_t dim) {
  if (nd == 0) return 0.0;
  double total = 0;
  for (size_t i = 0; i < nq; ++i) {
    const float* qi = q + i * dim;
    double best = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < nd; ++j) {
      const float* dj = d + j * dim;
      double dot = 0;
      for (size_t k = 0; k < dim; ++k) dot += static_cast<double>(qi[k]) * dj[k];
      best = std::max(best, dot);
    }
    total += best;
  }
  return total;
}

}  // namespace petal::gateway
