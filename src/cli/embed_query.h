// `petal embed --prompt-name query` on an inference-free SPLADE model (a sentence-transformers
// Router whose "query" route is a SparseStaticEmbedding, gateway/sparse_static.h): the inputs are
// encoded as queries, by the static module alone, with no engine; the same rule and the same
// vectors as the gateway's /embed_sparse with "prompt_name": "query" (sparse_routes.cc), which
// SparseEncoder.encode_query gives too. Texts get the model's "query" prompt if it has one, are
// tokenized without special tokens and cut at the model's input length, as `petal embed` cuts
// documents; --ids inputs are used as they are (at most that length). Every other model, and a
// Router without a static query route, takes the engine path unchanged: there `--prompt-name query`
// is the model's "query" prompt, as in the gateway. Output: one {"indices", "values"} line per
// input (embed_sparse_rows.h); a bad input prints an error naming it on stderr and `null` on
// stdout. Thread-safety: runs on the command's thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace petal::cli {

struct QueryEmbedOptions {
  std::string model_dir;
  std::string prompt_name;         // the query route only when "query"
  int dimensions = 0;              // must be 0 (sparse rows have no Matryoshka dimensions)
  int max_active_dims = 0;         // keep each input's N largest values (0 = all)
  bool ids = false;                // inputs are JSON arrays of token ids, used as they are
  std::vector<std::string> texts;  // TEXT arguments; none: JSON Lines from stdin
};

// Runs `petal embed` on the query route and returns its exit code (0; 1 if any input or the
// model failed), or nullopt when these options do not ask for the query route of a model that
// has one (the caller embeds with the engine).
std::optional<int> RunQueryRoute(const QueryEmbedOptions& o);

}  // namespace petal::cli
