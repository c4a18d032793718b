// Inference-free query encoding for SPLADE Router models (sentence-transformers SparseEncoder
// with a "query" route of SparseStaticEmbedding, e.g. the OpenSearch inference-free models):
// a query's vector is token presence times a learned per-vocabulary weight, computed in the
// gateway with no engine. The weights (the static module's model.safetensors "weight", one per
// vocabulary id) are loaded once with the model. Texts are tokenized without special tokens, as
// the module does; sparse_routes.cc sends "query" texts here and documents to the engine.
// Thread-safety: immutable after Load; Encode is const and safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "wire/sparse_rows.h"

namespace petal::gateway {

class SparseStaticQuery {
 public:
  // The query route's static weights of the Router folder `dir`, or null (and OK) when the model
  // has no such route. `vocab_size`: the document side's vocabulary; the weights must match it.
  static StatusOr<std::shared_ptr<const SparseStaticQuery>> Load(const std::string& dir,
                                                                 int64_t vocab_size);

  // The non-zero entries of the vector of `ids` (each present id's weight, once), in ascending
  // index order; with max_active_dims > 0 only the that many largest values are kept.
  wire::SparseRow Encode(const std::vector<int32_t>& ids, int64_t max_active_dims) const;

  size_t size() const { return weight_.size(); }
  const std::string& path() const { return path_; }

 private:
  std::vector<float> weight_;
  std::string path_;
};

}  // namespace petal::gateway
