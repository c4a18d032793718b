#include "engine/graph_policy.h"

#include <algorithm>

namespace petal {

int BucketPolicy::PadTokens(int tokens) const {
  const int step = tokens <= threshold ? token_small : token_large;
  const int padded = (tokens + step - 1) / step * step;
  return std::min(std::max(padded, step > 0 ? std::min(step, max_tokens) : 1), max_tokens);
}

int BucketPolicy::PadSeqs(int seqs) const {
  int p = 1;
  while (p < seqs) p *= 2;
  return std::min(p, max_seqs);
}

int BucketPolicy::PadSpans(int spans) const {
  if (spans <= 0) return 0;
  int p = 1;
  while (p < spans) p *= 2;
  return std::min(p, max_rows);
}

int BucketPolicy::PadMaxLen(int max_len, int padded_tokens) const {
  int p = std::max(1, token_small);
  while (p < max_len) p *= 2;
  return std::min(p, padded_tokens);
}

GraphPolicy::Action GraphPolicy::Next(const GraphKey& key) {
  if (!enabled_) {
    ++eager_runs_;
    return Action::kEager;
  }
  Entry& e = entries_[key];
  switch (e.state) {
    case State::kCached:
      lru_.splice(lru_.begin(), lru_, e.lru);
      ++replays_;
      return Action::kReplay;
    case State::kNew:
      e.state = State::kWarm;
      ++eager_runs_;
      return Action::kEager;
    case State::kWarm:
    case State::kCapturing:  // a capture never reported: try again
      e.state = State::kCapturing;
      return Action::kCapture;
    case State::kFailed:
      break;
  }
  ++eager_runs_;
  return Action::kEager;
}

std::vector<GraphKey> GraphPolicy::Captured(const GraphKey& key, bool ok) {
  std::vector<GraphKey> evicted;
  Entry& e = entries_[key];
  if (!ok) {
    e.state = State::kFailed;  // never captured again: it runs eagerly from now on
    ++capture_failures_;
    ++eager_runs_;
    return evicted;
  }
  e.state = State::kCached;
  lru_.push_front(key);
  e.lru = lru_.begin();
  ++captures_;
  ++replays_;  // the batch that was captured runs by launching its graph
  while (static_cast<int>(lru_.size()) > max_graphs_) {
    const GraphKey victim = lru_.back();  // never `key`: it is at the front and max_graphs_ >= 1
    lru_.pop_back();
    entries_[victim].state = State::kWarm;  // its next use captures again
    ++evictions_;
    evicted.push_back(victim);
  }
  return evicted;
}

bool GraphPolicy::HasGraph(const GraphKey& key) const {
  auto it = entries_.find(key);
  return it != entries_.end() && it->second.state == State::kCached;
}

std::map<std::string, double> GraphPolicy::Stats() const {
  return {{"graph_eager_runs", double(eager_runs_)},
          {"graph_captures", double(captures_)},
          {"graph_replays", double(replays_)},
          {"graph_evictions", double(evictions_)},
          {"graph_capture_failures", double(capture_failures_)},
          {"graphs_cached", double(lru_.size())}};
}

}  // namespace petal
