// The protobuf side of the wire: the one mapping between petal.proto's DType and the codec's
// OutputDType, building an EmbedRequest from token sequences, and checking and decoding an
// EmbedResponse. Used by the server (request validation, responses), the gRPC client and the
// gateway. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "petal.pb.h"
#include "wire/codec.h"

namespace petal::wire {

// DTYPE_UNSPECIFIED reads as float32; an unknown number is InvalidArgument naming
// "options.dtype".
StatusOr<OutputDType> DTypeFromProto(int v);
v1::DType DTypeToProto(OutputDType t);

// Builds a request from token-id sequences (packed little-endian int32 + lengths).
v1::EmbedRequest MakeEmbedRequest(const std::vector<std::vector<int32_t>>& seqs,
                                  const v1::EmbedOptions& options = {},
                                  const std::string& request_id = "");
// The same with token-type ids (one vector per sequence, each as long as its sequence; an empty
// `type_ids` sends none).
v1::EmbedRequest MakeEmbedRequest(const std::vector<std::vector<int32_t>>& seqs,
                                  const std::vector<std::vector<int32_t>>& type_ids,
                                  const v1::EmbedOptions& options = {},
                                  const std::string& request_id = "");

// Checks that `resp` is well formed (2-d shape, data size matching shape and dtype, one scale per
// row for int8; `rows` >= 0 also checks the row count) and returns the format of its rows.
StatusOr<OutputFormat> ResponseFormat(const v1::EmbedResponse& resp, int64_t rows = -1);

// Decodes any dtype to float rows (int8 dequantised with its scales; binary as +1/-1).
StatusOr<std::vector<std::vector<float>>> DecodeEmbeddings(const v1::EmbedResponse& resp);

}  // namespace petal::wire
