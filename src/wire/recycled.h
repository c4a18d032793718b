// The serving path's per-request messages and buffers, recycled process-wide (common/recycler.h):
// a chunk's EmbedRequest (gateway -> replica), a replica's EmbedResponse (replica -> gateway),
// the int buffers of a server's job and the byte buffer its rows are written into. Taking one
// reuses the heap buffers of one given back before, so in steady state a request through a
// local replica allocates none of these. Nothing here is required for correctness: an object
// that is not given back is simply freed, and Take() makes a new one when none is kept.
//
// Each list keeps at most 256 objects of at most 4 MiB each and 64 MiB in all (the rest are
// freed: a burst of large requests does not pin its buffers).
//
// Thread-safety: every function may be called from any thread at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "petal.pb.h"

namespace petal::wire {

// An empty request held by no one else. Its fields keep the buffers of an earlier request: set
// them with set_/mutable_ and add_ as usual (mutable_options() is kept allocated). When its last
// holder lets go, on any thread, it goes back to the list.
std::shared_ptr<v1::EmbedRequest> TakeEmbedRequest();

// An empty response (Clear()ed: protobuf keeps its strings' and repeated fields' buffers).
v1::EmbedResponse TakeEmbedResponse();
void RecycleEmbedResponse(v1::EmbedResponse&& response);

// An empty byte buffer (for rows) and an empty int buffer (token ids, offsets), with capacity.
std::string TakeByteBuffer();
void RecycleByteBuffer(std::string&& buffer);
std::vector<int32_t> TakeIntBuffer();
void RecycleIntBuffer(std::vector<int32_t>&& buffer);

}  // namespace petal::wire
