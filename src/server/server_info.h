// The ModelInfo and Stats answers of an inference server, shared by the gRPC server (server.cc)
// and the in-process replica (local_replica.h) so both report the same fields. Thread-safety:
// pure functions over their arguments (the metrics are atomics).
#pragma once

#include "engine/engine.h"
#include "petal.pb.h"
#include "server/engine_loop.h"
#include "server/metrics.h"

namespace petal::server {

// Fills `resp` for `engine` served through a loop with `loop` options.
void FillModelInfo(const Engine& engine, const EngineLoopOptions& loop,
                   v1::ModelInfoResponse* resp);

// Fills `resp` from the counters, the time the server started and (once the model is loaded) its
// loop's gauges and engine statistics; `loop` may be null.
void FillStats(const ServerMetrics& m, Clock::time_point started, const EngineLoop* loop,
               v1::StatsResponse* resp);

}  // namespace petal::server
