// Conversions between the wire protocol (petal.proto) and the engine loop's jobs and results,
// including all request validation. Every INVALID_ARGUMENT message starts with the offending
// field's name (e.g. "lengths[3]: ...") so gateways can report it. Thread-safety: pure functions.
#pragma once

#include <memory>
#include <string_view>

#include "common/status.h"
#include "model/config.h"
#include "petal.pb.h"
#include "server/engine_loop.h"
#include "trace/trace.h"

namespace petal::server {

// Protocol versions this server speaks; a request's 0 means 1.
inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr uint32_t kMinProtocolVersion = 1;

// Most pooling spans one sequence may carry (EmbedRequest.span_counts).
inline constexpr int kMaxSpansPerSequence = 1024;

// Longest sequence the server accepts for `config`: the model's maximum positions.
int MaxSequenceTokens(const ModelConfig& config);

// Validates `req` against the model and builds the job (deadline left unset).
StatusOr<EmbedJob> JobFromRequest(const v1::EmbedRequest& req, const ModelConfig& config);

// The server span of one Embed call, or null while tracing is off: a child of `traceparent` (W3C
// trace context; empty or malformed: a new trace), with the job's sequence and token counts;
// `job->trace` is set to it so the engine loop records its spans beneath.
std::shared_ptr<trace::Span> StartEmbedSpan(std::string_view traceparent, EmbedJob* job);

// Fills `resp` (empty, or with recycled buffers) from a finished job's result: the rows are
// swapped out of `result`, which gets `resp`'s old data buffer.
void FillResponse(const std::string& request_id, EmbedResult* result, v1::EmbedResponse* resp);

// Maps a Petal Status code to the gRPC status of the same number.
int GrpcCode(StatusCode code);

}  // namespace petal::server
