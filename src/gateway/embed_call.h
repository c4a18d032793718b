// EmbedCall: the embed route's per-request state (parsed params, token ids, Server-Timing) from
// the parse until the answer is formatted. Recycled whole, not only its block, so that its lists
// keep their capacity: the next request's token ids are encoded into the same buffers and its
// texts listed in the same vector (issue 29: no allocation per request).
// Thread-safety: TakeEmbedCall may be called from any thread; a call is used by one request.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gateway/request_parse.h"
#include "gateway/server_timing.h"

namespace petal::gateway {

struct EmbedCall {
  EmbedParams params;
  std::vector<std::vector<int32_t>> seqs;  // kept at their size, each cleared, between requests
  ServerTiming timing;
};

// An empty call from the list (or a new one), shared by the route's stages; when the last holder
// lets go, on any thread, it is reset (its parsed body goes back to its own list) and kept, unless
// it holds more than 1 MiB of buffers.
std::shared_ptr<EmbedCall> TakeEmbedCall();

}  // namespace petal::gateway
