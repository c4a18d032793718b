// In-process replicas for `petal serve --replica-transport local`: the engine and engine loop that
// `petal server` would run, built from the same flags, served through server::LocalReplica
// (implemented in cmd_server.cc, beside the flags it parses). Thread-safety: call from the
// controlling thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/local_replica.h"

namespace petal::cli {

// Parses `server_flags` as `petal server`'s flags (e.g. {"--model", dir, "--backend", "cuda"};
// --listen and the shutdown grace are accepted and unused) and loads the engine. After an engine
// fault the replica rebuilds it from the same flags; `owns_device`: no other replica of this
// process uses its GPU, so a CUDA device reset is allowed when the rebuild needs one.
StatusOr<std::shared_ptr<server::LocalReplica>> StartLocalReplica(
    const std::vector<std::string>& server_flags, bool owns_device);

}  // namespace petal::cli
