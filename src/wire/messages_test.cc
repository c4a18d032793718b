// Tests for the proto side of the wire: dtype mapping, request packing, response checks/decoding.
#include "wire/messages.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace petal::wire {
namespace {

constexpr OutputDType kAll[] = {OutputDType::kFloat32, OutputDType::kFloat16,
                                OutputDType::kInt8,    OutputDType::kBinary,
                                OutputDType::kUbinary, OutputDType::kInt8Tanh};

TEST(Messages, DTypeMappingRoundTrips) {
  for (OutputDType t : kAll) {
    auto back = DTypeFromProto(DTypeToProto(t));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, t) << OutputDTypeName(t);
  }
  EXPECT_EQ(*DTypeFromProto(v1::DTYPE_UNSPECIFIED), OutputDType::kFloat32);
  auto bad = DTypeFromProto(99);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("options.dtype", 0), 0u);
}

TEST(Messages, RequestPacksLittleEndianIdsAndLengths) {
  v1::EmbedOptions o;
  o.set_dimensions(7);
  const auto req = MakeEmbedRequest({{1, 2, 3}, {70000}}, o, "id-1");
  EXPECT_EQ(req.request_id(), "id-1");
  EXPECT_EQ(req.options().dimensions(), 7u);
  ASSERT_EQ(req.lengths_size(), 2);
  EXPECT_EQ(req.lengths(0), 3u);
  EXPECT_EQ(req.lengths(1), 1u);
  ASSERT_EQ(req.token_ids().size(), 16u);
  int32_t last;
  std::memcpy(&last, req.token_ids().data() + 12, 4);
  EXPECT_EQ(last, 70000);
}

// A response of `rows` random rows in `t`, as the server builds it.
v1::EmbedResponse Response(OutputDType t, int rows, int dims, std::vector<std::vector<float>>* in) {
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.f, 0.3f);
  OutputFormat f{dims, false, t};
  v1::EmbedResponse resp;
  resp.set_dtype(DTypeToProto(t));
  resp.add_shape(rows);
  resp.add_shape(ElementsPerRow(f));
  resp.set_dimensions(dims);
  std::string data(rows * BytesPerRow(f), '\0');
  for (int r = 0; r < rows; ++r) {
    auto& row = in->emplace_back(dims);
    for (float& x : row) x = d(rng);
    float scale;
    EncodeRow(row.data(), f, reinterpret_cast<uint8_t*>(data.data()) + r * BytesPerRow(f), &scale);
    if (t == OutputDType::kInt8) resp.add_scales(scale);
  }
  resp.set_data(data);
  return resp;
}

TEST(Messages, DecodeMatchesDecodeRowForEveryDType) {
  for (OutputDType t : kAll) {
    std::vector<std::vector<float>> in;
    const auto resp = Response(t, 3, 20, &in);
    auto f = ResponseFormat(resp, 3);
    ASSERT_TRUE(f.ok()) << OutputDTypeName(t) << ": " << f.status().ToString();
    auto rows = DecodeEmbeddings(resp);
    ASSERT_TRUE(rows.ok()) << OutputDTypeName(t);
    ASSERT_EQ(rows->size(), 3u);
    for (int r = 0; r < 3; ++r) {
      // Every dtype keeps the direction: cosine against the input, by the dtype's precision.
      const double cos = CosineSimilarity((*rows)[r].data(), in[r].data(), 20);
      const bool bits = t == OutputDType::kBinary || t == OutputDType::kUbinary;
      EXPECT_GT(cos, bits ? 0.6 : 0.999) << OutputDTypeName(t) << " row " << r;
    }
  }
}

TEST(Messages, MalformedResponsesAreRejected) {
  std::vector<std::vector<float>> in;
  auto resp = Response(OutputDType::kInt8, 2, 8, &in);
  EXPECT_FALSE(ResponseFormat(resp, 3).ok());  // row count
  auto short_data = resp;
  short_data.mutable_data()->pop_back();
  EXPECT_FALSE(ResponseFormat(short_data).ok());
  auto no_scales = resp;
  no_scales.clear_scales();
  EXPECT_FALSE(ResponseFormat(no_scales).ok());
  auto bad_dtype = resp;
  bad_dtype.set_dtype(static_cast<v1::DType>(99));
  EXPECT_FALSE(DecodeEmbeddings(bad_dtype).ok());
  auto flat = resp;
  flat.clear_shape();
  EXPECT_FALSE(DecodeEmbeddings(flat).ok());
}

}  // namespace
}  // namespace petal::wire
