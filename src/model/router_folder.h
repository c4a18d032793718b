// sentence-transformers Router folders (a SparseEncoder saved with
// Router.for_query_document): modules.json holds one Router module whose router_config.json maps
// each route ("query", "document") to module folders, e.g. an inference-free SPLADE model:
// "query": ["query_0_SparseStaticEmbedding"], "document": ["document_0_MLMTransformer",
// "document_1_SpladePooling"]. This reads which folder serves what; LoadModelConfig,
// the CPU / CUDA engines and the gateway find the document route's transformer through
// TransformerDir, and the gateway's static query encoder (gateway/sparse_static.h) through
// query_static. Thread-safety: pure functions over files, safe from any thread.
#pragma once

#include <string>

#include "common/status.h"

namespace petal {

struct RouterFolder {
  bool present = false;         // modules.json has a Router module
  std::string query_static;     // the query route's SparseStaticEmbedding folder (relative), or ""
  std::string doc_transformer;  // the document route's (MLM)Transformer folder (relative), or ""
  std::string doc_splade;       // the document route's SpladePooling folder (relative), or ""
};

// The Router of dir/modules.json; present = false (and OK) when there is none. Paths that leave
// the folder ("..") are refused.
StatusOr<RouterFolder> ReadRouterFolder(const std::string& dir);

// Where the transformer's config.json, weights and tokenizer live: `dir` itself, or, when
// dir/config.json is absent and dir is a Router folder with a document transformer, that
// transformer's subfolder.
std::string TransformerDir(const std::string& dir);

}  // namespace petal
