// GraphCache: lazily captured whole-model CUDA graphs, one per batch-shape bucket.
//
// The design brief's policy: the first batch of a configuration runs eagerly (warm-up: GEMM
// plans, kernel attributes), the second is captured and replayed, every later one is replayed.
// Executable graphs are bounded in number (least recently used evicted). All graphs read the
// same fixed device buffers, so they must run on one stream, one at a time.
// Thread-safety: not thread-safe; owned and driven by the engine thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <string>
#include <utility>

#include "common/status.h"

namespace petal::cuda {

struct BucketPolicy {
  int token_small = 64;
  int token_large = 256;
  int threshold = 1024;
  int max_tokens = 0;  // capacity: buckets are clamped to it
  int max_seqs = 0;    // capacity in sequences, dummy padding sequence included

  // Token count padded to its bucket (never below `tokens`, never above max_tokens).
  int PadTokens(int tokens) const;
  // Sequence count padded to a power of two, clamped to max_seqs.
  int PadSeqs(int seqs) const;
  // Longest sequence padded to a power of two (at least token_small), clamped to padded_tokens.
  int PadMaxLen(int max_len, int padded_tokens) const;
};

// The shape a graph is captured for: padded sequence count, padded token count and the padded
// bound on the longest sequence (attention backends may size their launch by it).
struct GraphKey {
  int seqs = 0, tokens = 0, max_len = 0;
  bool operator<(const GraphKey& o) const {
    return seqs != o.seqs       ? seqs < o.seqs
           : tokens != o.tokens ? tokens < o.tokens
                                : max_len < o.max_len;
  }
};

class GraphCache {
 public:
  using Key = GraphKey;
  GraphCache(int max_graphs, bool enabled) : max_graphs_(max_graphs), enabled_(enabled) {}
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Runs `forward` for `key` on `stream`: eagerly, by capturing it, or by replaying the graph
  // captured earlier, per the policy above. `forward` must only enqueue work on `stream`.
  Status Run(Key key, cudaStream_t stream, const std::function<Status()>& forward);

  std::map<std::string, double> Stats() const;

 private:
  struct Entry {
    int uses = 0;
    cudaGraphExec_t exec = nullptr;
    std::list<Key>::iterator lru;
  };
  Status Capture(Entry& e, cudaStream_t stream, const std::function<Status()>& forward);
  void Touch(Key key, Entry& e);
  void EvictIfNeeded();

  int max_graphs_;
  bool enabled_;
  std::map<Key, Entry> entries_;
  std::list<Key> lru_;  // front = most recently used; holds only keys with an exec
  int64_t eager_runs_ = 0, captures_ = 0, replays_ = 0, evictions_ = 0, capture_failures_ = 0;
  double capture_ms_ = 0;
};

}  // namespace petal::cuda
