// Splitting a request's sequences into chunks for the inference servers, and running the chunks
// on a ReplicaSet in parallel with the answers put back in request order. Chunks are bounded by
// sequences and by tokens so that one large batch request spreads over replicas and does not
// monopolise one server's queue. Thread-safety: SplitChunks is a pure function (its list may be a
// recycled buffer); EmbedChunks may be called from any thread and calls `done` once, on a gRPC
// thread (or the caller's, if nothing was sent).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/unique_function.h"
#include "gateway/replica_set.h"
#include "trace/trace.h"

namespace petal::gateway {

struct ChunkLimits {
  int max_seqs = 64;
  int64_t max_tokens = 16384;
};

// [begin, end) ranges of consecutive sequences; each holds at most max_seqs sequences and at
// most max_tokens tokens, except that a single sequence longer than max_tokens gets its own chunk.
std::vector<std::pair<size_t, size_t>> SplitChunks(std::span<const std::vector<int32_t>> seqs,
                                                   const ChunkLimits& limits);

// The responses of every chunk, in order, and the chunks' sequence ranges. Destroying it gives
// the responses back for reuse by local replicas (wire/recycled.h).
struct ChunkedResult {
  ChunkedResult() = default;
  ChunkedResult(ChunkedResult&&) = default;
  ChunkedResult& operator=(ChunkedResult&&) = default;
  ~ChunkedResult();
  std::vector<std::pair<size_t, size_t>> ranges;
  std::vector<v1::EmbedResponse> responses;
};

// Embeds `seqs` with `options`: one EmbedRequest per chunk (ranges from SplitChunks, computed
// once per request by the caller), queued at once in the ReplicaSet, which sends them as replicas
// have room. `done` gets every response or the first error (the other chunks' answers are then
// discarded); RESOURCE_EXHAUSTED at once when the request does not fit in the gateway's bound.
// With a valid `trace` (the request's span), each chunk's call is a client span, child of it,
// whose context travels to the server as the call's `traceparent`.
// `type_ids`, when non-null, holds each sequence's token-type ids (ranking pairs), sent with it.
// `spans`, when non-null, holds each sequence's pooling spans ([start, end) pairs, at least one
// per sequence), sent with `span_pooling`: each response then has one row per span.
struct SpanInput {
  const std::vector<std::vector<uint32_t>>* spans = nullptr;
  v1::SpanPooling pooling = v1::SPAN_POOLING_MEAN;
};
using ChunksDone = UniqueFunction<void(StatusOr<ChunkedResult>)>;  // move-only
void EmbedChunks(ReplicaSet* replicas, const std::vector<std::vector<int32_t>>& seqs,
                 std::vector<std::pair<size_t, size_t>> chunks, const v1::EmbedOptions& options,
                 const std::string& request_id, ChunksDone done,
                 const trace::SpanContext& trace = {},
                 const std::vector<std::vector<int32_t>>* type_ids = nullptr, SpanInput spans = {});

}  // namespace petal::gateway
