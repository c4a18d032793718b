// Renders a server's Stats RPC answer in the Prometheus text exposition format (version 0.0.4),
// so a gateway (or `petal client stats --prometheus`) can publish the server's metrics without
// re-deriving names and types (written with common/prometheus_text.h). Thread-safety: pure
// function.
#pragma once

#include <string>

#include "petal.pb.h"

namespace petal::wire {

// Metric families are named petal_server_*; `labels` (e.g. `server="10.0.0.5:50051"`, without
// braces; may be empty) is attached to every sample so several servers can share one page.
std::string StatsToPrometheus(const v1::StatsResponse& stats, const std::string& labels = "");

}  // namespace petal::wire
