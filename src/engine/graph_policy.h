// The CUDA engine's graph policy as plain C++ (no CUDA headers, built and tested on every
// machine): BucketPolicy pads a batch's shape to its bucket, GraphPolicy is the per-bucket state
// machine eager -> capture -> replay (-> evicted -> capture again) with an LRU bound, and a
// failed capture stays eager for good. engine/cuda/graph_cache.h applies its decisions to real
// CUDA graphs. Thread-safety: not thread-safe; owned and driven by the engine thread.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <vector>

namespace petal {

struct BucketPolicy {
  int token_small = 64;
  int token_large = 256;
  int threshold = 1024;
  int max_tokens = 0;  // capacity: buckets are clamped to it
  int max_seqs = 0;    // capacity in sequences, dummy padding sequence included
  int max_rows = 0;    // capacity in pooling spans (output rows of a span batch)

  // Token count padded to its bucket (never below `tokens`, never above max_tokens).
  int PadTokens(int tokens) const;
  // Sequence count padded to a power of two, clamped to max_seqs.
  int PadSeqs(int seqs) const;
  // Pooling-span count padded to a power of two (0 stays 0), clamped to max_rows.
  int PadSpans(int spans) const;
  // Longest sequence padded to a power of two (at least token_small), clamped to padded_tokens.
  int PadMaxLen(int max_len, int padded_tokens) const;
};

// The shape a graph is captured for: padded sequence count, padded token count, the padded
// bound on the longest sequence (attention backends may size their launch by it) and the padded
// pooling-span count.
// `spans`: the padded pooling-span count (0 = the batch pools whole sequences).
struct GraphKey {
  int seqs = 0, tokens = 0, max_len = 0, spans = 0;
  bool operator<(const GraphKey& o) const {
    return seqs != o.seqs         ? seqs < o.seqs
           : tokens != o.tokens   ? tokens < o.tokens
           : max_len != o.max_len ? max_len < o.max_len
                                  : spans < o.spans;
  }
  bool operator==(const GraphKey& o) const = default;
};

class GraphPolicy {
 public:
  enum class Action { kEager, kCapture, kReplay };

  // At most max(1, max_graphs) graphs are kept; !enabled runs everything eagerly.
  GraphPolicy(int max_graphs, bool enabled)
      : max_graphs_(max_graphs < 1 ? 1 : max_graphs), enabled_(enabled) {}

  // What to do with the next batch of `key`: the first batch of a key runs eagerly (warm-up:
  // GEMM plans, kernel attributes), the second is captured, later ones replay the graph. A key
  // whose capture failed, and everything when disabled, runs eagerly.
  Action Next(const GraphKey& key);
  // Reports how the capture that Next() asked for went. Success: the key has a graph now (replay
  // it for this batch); the keys returned lost theirs to the LRU bound (destroy them; their next
  // use captures again). Failure: the key runs eagerly from now on (run this batch eagerly).
  std::vector<GraphKey> Captured(const GraphKey& key, bool ok);

  bool HasGraph(const GraphKey& key) const;
  int64_t eager_runs() const { return eager_runs_; }
  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }
  int64_t evictions() const { return evictions_; }
  int64_t capture_failures() const { return capture_failures_; }
  int cached() const { return static_cast<int>(lru_.size()); }
  // graph_eager_runs, graph_captures, graph_replays, graph_evictions, graph_capture_failures,
  // graphs_cached.
  std::map<std::string, double> Stats() const;

 private:
  enum class State { kNew, kWarm, kCapturing, kCached, kFailed };
  struct Entry {
    State state = State::kNew;
    std::list<GraphKey>::iterator lru;  // valid in kCached
  };
  int max_graphs_;
  bool enabled_;
  std::map<GraphKey, Entry> entries_;
  std::list<GraphKey> lru_;  // front = most recently used; only keys in kCached
  int64_t eager_runs_ = 0, captures_ = 0, replays_ = 0, evictions_ = 0, capture_failures_ = 0;
};

}  // namespace petal
