// Turns the servers' packed embedding rows into the HTTP answers: JSON number arrays (floats via
// the shortest round-trip formatter, integers for the quantised types) or base64 of the raw
// little-endian bytes. Thread-safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "gateway/chunker.h"
#include "gateway/json_writer.h"
#include "gateway/request_parse.h"
#include "petal.pb.h"

namespace petal::gateway {

// The wire dtype the server is asked for to produce `t` (uint8 is int8 shifted by 128).
v1::DType WireDType(OutputType t);

// Checks that every chunk's response holds the rows asked of it in the expected layout.
Status CheckChunks(const ChunkedResult& r);

// Calls fn(row_bytes, scale, response) for every row in request order.
template <typename Fn>
void ForEachRow(const ChunkedResult& r, Fn&& fn) {
  for (size_t c = 0; c < r.ranges.size(); ++c) {
    const v1::EmbedResponse& resp = r.responses[c];
    const size_t rows = r.ranges[c].second - r.ranges[c].first;
    const size_t bytes = rows ? resp.data().size() / rows : 0;
    for (size_t i = 0; i < rows; ++i) {
      const float scale = resp.scales_size() > static_cast<int>(i) ? resp.scales(i) : 0.0f;
      fn(std::string_view(resp.data()).substr(i * bytes, bytes), scale, resp);
    }
  }
}

// Appends one row as a JSON array (or a base64 string when `base64`) in the output type `t`.
void WriteRow(JsonOut* out, std::string_view row, OutputType t, bool base64);

// Decodes every row to floats (int8 dequantised, binary as +-1) for scoring.
StatusOr<std::vector<std::vector<float>>> DecodeRows(const ChunkedResult& r);

// The /v1/score answer for (document index, score) pairs: sorted by score (stable) and cut to
// top_k when top_k > 0, else in input order; shared by the cosine and MaxSim modes.
std::string ScoreListJson(std::vector<std::pair<size_t, double>> scores, size_t top_k,
                          const std::string& model, int64_t tokens);

}  // namespace petal::gateway
