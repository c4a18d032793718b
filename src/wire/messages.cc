#include "wire/messages.h"

#include <cstring>

namespace petal::wire {

StatusOr<OutputDType> DTypeFromProto(int v) {
  switch (v) {
    case v1::DTYPE_UNSPECIFIED:
    case v1::DTYPE_FLOAT32:
      return OutputDType::kFloat32;
    case v1::DTYPE_FLOAT16:
      return OutputDType::kFloat16;
    case v1::DTYPE_INT8:
      return OutputDType::kInt8;
    case v1::DTYPE_BINARY:
      return OutputDType::kBinary;
    case v1::DTYPE_UBINARY:
      return OutputDType::kUbinary;
    case v1::DTYPE_INT8_TANH:
      return OutputDType::kInt8Tanh;
  }
  return InvalidArgument("options.dtype: unknown value " + std::to_string(v) +
                         " (expected FLOAT32, FLOAT16, INT8, BINARY, UBINARY or INT8_TANH)");
}

v1::DType DTypeToProto(OutputDType t) {
  switch (t) {
    case OutputDType::kFloat32:
      return v1::DTYPE_FLOAT32;
    case OutputDType::kFloat16:
      return v1::DTYPE_FLOAT16;
    case OutputDType::kInt8:
      return v1::DTYPE_INT8;
    case OutputDType::kBinary:
      return v1::DTYPE_BINARY;
    case OutputDType::kUbinary:
      return v1::DTYPE_UBINARY;
    case OutputDType::kInt8Tanh:
      return v1::DTYPE_INT8_TANH;
  }
  return v1::DTYPE_UNSPECIFIED;
}

v1::EmbedRequest MakeEmbedRequest(const std::vector<std::vector<int32_t>>& seqs,
                                  const v1::EmbedOptions& options, const std::string& request_id) {
  v1::EmbedRequest req;
  req.set_protocol_version(1);
  req.set_request_id(request_id);
  size_t total = 0;
  for (const auto& s : seqs) total += s.size();
  std::string* bytes = req.mutable_token_ids();
  bytes->resize(total * 4);
  size_t off = 0;
  for (const auto& s : seqs) {
    std::memcpy(bytes->data() + off, s.data(), s.size() * 4);  // little-endian host
    off += s.size() * 4;
    req.add_lengths(static_cast<uint32_t>(s.size()));
  }
  *req.mutable_options() = options;
  return req;
}

v1::EmbedRequest MakeEmbedRequest(const std::vector<std::vector<int32_t>>& seqs,
                                  const std::vector<std::vector<int32_t>>& type_ids,
                                  const v1::EmbedOptions& options, const std::string& request_id) {
  v1::EmbedRequest req = MakeEmbedRequest(seqs, options, request_id);
  if (type_ids.empty()) return req;
  std::string* bytes = req.mutable_token_type_ids();
  bytes->resize(req.token_ids().size());
  size_t off = 0;
  for (const auto& t : type_ids) {
    std::memcpy(bytes->data() + off, t.data(), t.size() * 4);  // little-endian host
    off += t.size() * 4;
  }
  bytes->resize(off);
  return req;
}

StatusOr<OutputFormat> ResponseFormat(const v1::EmbedResponse& resp, int64_t rows) {
  if (resp.shape_size() != 2)
    return DataLoss("shape: expected 2 entries, got " + std::to_string(resp.shape_size()));
  if (rows >= 0 && resp.shape(0) != static_cast<uint64_t>(rows)) {
    return DataLoss("shape: " + std::to_string(resp.shape(0)) + " rows for a request of " +
                    std::to_string(rows));
  }
  auto dtype = DTypeFromProto(resp.dtype());
  if (!dtype.ok()) return DataLoss("dtype: unknown value " + std::to_string(resp.dtype()));
  OutputFormat f;
  f.dtype = *dtype;
  f.dims = static_cast<int>(resp.dimensions());
  const size_t n = resp.shape(0);
  if (resp.shape(1) != static_cast<uint32_t>(ElementsPerRow(f)) ||
      resp.data().size() != n * BytesPerRow(f)) {
    return DataLoss("data: size does not match shape and dtype");
  }
  if (f.dtype == OutputDType::kInt8 && static_cast<size_t>(resp.scales_size()) != n) {
    return DataLoss("scales: expected one per row");
  }
  return f;
}

StatusOr<std::vector<std::vector<float>>> DecodeEmbeddings(const v1::EmbedResponse& resp) {
  PETAL_ASSIGN_OR_RETURN(const OutputFormat f, ResponseFormat(resp));
  const size_t rows = resp.shape(0);
  std::vector<std::vector<float>> out(rows, std::vector<float>(f.dims));
  const auto* data = reinterpret_cast<const uint8_t*>(resp.data().data());
  for (size_t r = 0; r < rows; ++r) {
    const float scale = f.dtype == OutputDType::kInt8 ? resp.scales(static_cast<int>(r)) : 0.0f;
    DecodeRow(data + r * BytesPerRow(f), f, scale, out[r].data());
  }
  return out;
}

}  // namespace petal::wire
