#include "gateway/embed_format.h"

#include <algorithm>
#include <cstring>

#include "wire/codec.h"
#include "wire/messages.h"

namespace petal::gateway {

v1::DType WireDType(OutputType t) {
  // uint8 is int8 shifted by 128 here, at formatting time; the server sends int8.
  switch (t) {
    case OutputType::kFloat32:
      return wire::DTypeToProto(wire::OutputDType::kFloat32);
    case OutputType::kFloat16:
      return wire::DTypeToProto(wire::OutputDType::kFloat16);
    case OutputType::kInt8:
    case OutputType::kUint8:
      return wire::DTypeToProto(wire::OutputDType::kInt8);
    case OutputType::kBinary:
      return wire::DTypeToProto(wire::OutputDType::kBinary);
    case OutputType::kUbinary:
      return wire::DTypeToProto(wire::OutputDType::kUbinary);
  }
  return wire::DTypeToProto(wire::OutputDType::kFloat32);
}

Status CheckChunks(const ChunkedResult& r) {
  for (size_t c = 0; c < r.ranges.size(); ++c) {
    const auto rows = static_cast<int64_t>(r.ranges[c].second - r.ranges[c].first);
    auto f = wire::ResponseFormat(r.responses[c], rows);
    if (!f.ok()) return Internal("server answer: " + f.status().message());
  }
  return Status::Ok();
}

void WriteRow(JsonOut* out, std::string_view row, OutputType t, bool base64) {
  const auto* p = reinterpret_cast<const uint8_t*>(row.data());
  if (base64) {
    if (t == OutputType::kUint8) {
      std::string shifted(row);
      for (char& c : shifted) c = static_cast<char>(static_cast<uint8_t>(c) ^ 0x80);
      out->Base64(shifted);
    } else {
      out->Base64(row);
    }
    return;
  }
  std::string& s = out->str();
  switch (t) {
    case OutputType::kFloat32: {
      // Copy out rather than cast: protobuf bytes carry no alignment guarantee.
      thread_local std::vector<float> buf;
      buf.resize(row.size() / 4);
      std::memcpy(buf.data(), row.data(), buf.size() * 4);
      out->FloatArray(buf);
      return;
    }
    case OutputType::kFloat16: {
      s.push_back('[');
      for (size_t i = 0; i + 1 < row.size(); i += 2) {
        if (i) s.push_back(',');
        out->Float(wire::HalfToFloat(static_cast<uint16_t>(p[i] | (p[i + 1] << 8))));
      }
      s.push_back(']');
      return;
    }
    case OutputType::kInt8:
    case OutputType::kBinary:
    case OutputType::kUint8:
    case OutputType::kUbinary: {
      const bool is_signed = t == OutputType::kInt8 || t == OutputType::kBinary;
      s.push_back('[');
      for (size_t i = 0; i < row.size(); ++i) {
        if (i) s.push_back(',');
        int v = is_signed ? static_cast<int8_t>(p[i]) : p[i];
        if (t == OutputType::kUint8) v = static_cast<int8_t>(p[i]) + 128;
        out->Int(v);
      }
      s.push_back(']');
      return;
    }
  }
}

StatusOr<std::vector<std::vector<float>>> DecodeRows(const ChunkedResult& r) {
  std::vector<std::vector<float>> rows;
  for (const auto& resp : r.responses) {
    PETAL_ASSIGN_OR_RETURN(auto part, wire::DecodeEmbeddings(resp));
    for (auto& row : part) rows.push_back(std::move(row));
  }
  return rows;
}

std::string ScoreListJson(std::vector<std::pair<size_t, double>> scores, size_t top_k,
                          const std::string& model, int64_t tokens) {
  if (top_k > 0) {
    std::stable_sort(scores.begin(), scores.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (scores.size() > top_k) scores.resize(top_k);
  }
  JsonOut o;
  o.Raw("{\"object\":\"list\",\"data\":[");
  for (size_t i = 0; i < scores.size(); ++i) {
    if (i) o.Raw(",");
    o.Raw("{\"object\":\"score\",\"index\":").Int(static_cast<int64_t>(scores[i].first));
    o.Raw(",\"score\":").Double(scores[i].second).Raw("}");
  }
  o.Raw("],\"model\":").Str(model);
  o.Raw(",\"usage\":{\"prompt_tokens\":").Int(tokens);
  o.Raw(",\"total_tokens\":").Int(tokens).Raw("}}");
  return o.Take();
}

}  // namespace petal::gateway
