// GraphCache: lazily captured whole-model CUDA graphs, one per batch-shape bucket. The policy
// (first batch of a shape eager, second captured, later ones replayed; at most max_graphs kept,
// least recently used evicted; a shape whose capture failed stays eager) is GraphPolicy
// (engine/graph_policy.h, plain C++ tested in CI); this class only applies its decisions to CUDA
// graphs. All graphs read the same fixed device buffers, so they must run on one stream, one at
// a time. Thread-safety: not thread-safe; owned and driven by the engine thread.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>

#include "common/function_ref.h"
#include "common/status.h"
#include "engine/graph_policy.h"

namespace petal::cuda {

using petal::BucketPolicy;
using petal::GraphKey;

class GraphCache {
 public:
  using Key = GraphKey;
  GraphCache(int max_graphs, bool enabled) : policy_(max_graphs, enabled) {}
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Runs `forward` for `key` on `stream`: eagerly, by capturing it, or by replaying the graph
  // captured earlier, as the policy decides. `forward` must only enqueue work on `stream`.
  Status Run(Key key, cudaStream_t stream, FunctionRef<Status()> forward);

  std::map<std::string, double> Stats() const;

 private:
  // Captures `forward` into *exec; on failure *exec stays null.
  Status Capture(cudaGraphExec_t* exec, cudaStream_t stream, FunctionRef<Status()> forward);

  GraphPolicy policy_;
  std::map<Key, cudaGraphExec_t> execs_;  // exactly the keys the policy holds a graph for
  double capture_ms_ = 0;
};

}  // namespace petal::cuda
