// EngineLoop's request record, shared by its translation units (engine_loop.cc,
// engine_loop_batch.cc); not part of the loop's interface.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "server/engine_loop.h"

namespace petal::server {

struct LoopRequest {
  LoopRequest() = default;
  LoopRequest(const LoopRequest&) = delete;
  LoopRequest& operator=(const LoopRequest&) = delete;
  ~LoopRequest();  // gives the job's ids and the result's rows buffer back (wire/recycled.h)

  EmbedJob job;
  EmbedCallback done;
  int64_t tokens = 0;
  Clock::time_point admitted;
  std::atomic<bool> finished{false};
  std::atomic<int64_t> queue_us{-1};  // set when the first sequence is submitted
  int unresolved = 0;                 // sequences neither run nor dropped; guarded by mu_
  EmbedResult result;                 // rows written by the completion thread
};

inline int64_t MicrosSince(Clock::time_point t, Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::microseconds>(now - t).count();
}

}  // namespace petal::server
