#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

namespace petal {
namespace {

std::string Build(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string Floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

TEST(SafetensorsTest, ReadsValidFile) {
  auto bytes = Build(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},
    "__metadata__":{"format":"pt"}})",
                     Floats({1, 2, 3, 4}));
  auto f = SafetensorsFile::FromBytes(bytes, "t");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const TensorView* a = (*f)->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->numel(), 4);
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  files.push_back(std::move(f).value());
  auto store = WeightStore::FromFiles(std::move(files));
  auto v = store->ReadF32("a", {2, 2});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)[3], 4.0f);
  auto bad_shape = store->ReadF32("a", {4});
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_NE(bad_shape.status().message().find("'a' has shape [2, 2], expected [4]"),
            std::string::npos);
  EXPECT_FALSE(store->ReadF32("b", {1}).ok());
}

// ReadBf16 (the CUDA loader's path, no fp32 copy) gives exactly the bf16 rounding of ReadF32's
// values, for every stored dtype, whole and in slices.
TEST(SafetensorsTest, ReadBf16MatchesRoundedReadF32) {
  const int n = 37;
  std::vector<float> f(n);
  std::vector<uint16_t> h(n), b(n);
  uint32_t state = 12345;
  for (int i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    f[i] = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 7.3f;
    b[i] = FloatToBFloat16(f[i] * 1.37f);
    h[i] = 0x3c00 + static_cast<uint16_t>(state % 997);  // assorted finite halves
  }
  std::string data(reinterpret_cast<const char*>(f.data()), 4 * n);
  data.append(reinterpret_cast<const char*>(h.data()), 2 * n);
  data.append(reinterpret_cast<const char*>(b.data()), 2 * n);
  const std::string header =
      "{\"f\":{\"dtype\":\"F32\",\"shape\":[37],\"data_offsets\":[0,148]},"
      "\"h\":{\"dtype\":\"F16\",\"shape\":[37],\"data_offsets\":[148,222]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[37],\"data_offsets\":[222,296]}}";
  auto file = SafetensorsFile::FromBytes(Build(header, data), "t");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  files.push_back(std::move(file).value());
  auto store = WeightStore::FromFiles(std::move(files));
  for (const char* name : {"f", "h", "b"}) {
    auto ref = store->ReadF32(name, {n});
    ASSERT_TRUE(ref.ok());
    std::vector<uint16_t> whole(n, 0xffff);
    ASSERT_TRUE(store->ReadBf16(name, {n}, whole.data()).ok());
    for (int i = 0; i < n; ++i) EXPECT_EQ(whole[i], FloatToBFloat16((*ref)[i])) << name << i;
    std::vector<uint16_t> part(10, 0xffff);
    ASSERT_TRUE(store->ReadBf16(name, {n}, part.data(), 30, 10).ok());  // clamped to 7 values
    for (int i = 0; i < 7; ++i) EXPECT_EQ(part[i], whole[30 + i]) << name << i;
    EXPECT_EQ(part[7], 0xffff);
  }
  EXPECT_FALSE(store->ReadBf16("f", {36}, h.data()).ok());
  EXPECT_FALSE(store->ReadBf16("missing", {1}, h.data()).ok());
}

struct BadCase {
  const char* what;
  std::string bytes;
  const char* expect;  // substring of the error
};

// Regression (UBSan, asan preset): reading an empty tensor passed a null pointer to memcpy.
TEST(SafetensorsTest, EmptyTensorReadsAsEmpty) {
  auto f = SafetensorsFile::FromBytes(
      Build(R"({"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})", ""), "t");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  files.push_back(std::move(f).value());
  auto v = WeightStore::FromFiles(std::move(files))->ReadF32("e", {0, 4});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->empty());
}

TEST(SafetensorsTest, RejectsCorruptFiles) {
  const std::string d16 = Floats({1, 2, 3, 4});
  std::vector<BadCase> cases = {
      {"too short", std::string("\x01\x00", 2), "too short"},
      {"header past end", std::string("\x64\0\0\0\0\0\0\0{}", 10), "exceeds file size"},
      {"not json", Build("{nope", d16), "not valid JSON"},
      {"bad dtype", Build(R"({"a":{"dtype":"F8_E4M3","shape":[16],"data_offsets":[0,16]}})", d16),
       "unsupported dtype F8_E4M3"},
      {"int size mismatch",
       Build(R"({"a":{"dtype":"I64","shape":[3],"data_offsets":[0,16]}})", d16), "needs 24 bytes"},
      {"out of bounds", Build(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", d16),
       "out of bounds"},
      {"size mismatch", Build(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", d16),
       "needs 12 bytes"},
      {"overlap",
       Build(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           d16),
       "overlap"},
      {"negative dim", Build(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", d16),
       "bad dimension"},
      {"reversed offsets", Build(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", d16),
       "out of bounds"},
  };
  for (const auto& c : cases) {
    auto f = SafetensorsFile::FromBytes(c.bytes, "bad.safetensors");
    ASSERT_FALSE(f.ok()) << c.what;
    EXPECT_NE(f.status().message().find(c.expect), std::string::npos)
        << c.what << ": " << f.status().message();
  }
}

TEST(SafetensorsTest, SkipsIntegerBuffers) {
  // BERT checkpoints carry an int64 position_ids buffer next to the float weights.
  auto bytes = Build(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},
    "w":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})",
                     Floats({1, 2, 3, 4, 5}));
  auto f = SafetensorsFile::FromBytes(bytes, "t");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->Find("ids"), nullptr);
  ASSERT_NE((*f)->Find("w"), nullptr);
  auto overlap = Build(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},
    "w":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                       Floats({1, 2, 3, 4}));
  EXPECT_FALSE(SafetensorsFile::FromBytes(overlap, "t").ok());
}

TEST(SafetensorsTest, TruncatedFileOnDisk) {
  auto bytes =
      Build(R"({"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})", std::string(8, '\x3f'));
  for (size_t cut : {size_t{4}, size_t{20}, bytes.size() - 1}) {
    auto f = SafetensorsFile::FromBytes(bytes.substr(0, cut), "trunc");
    EXPECT_FALSE(f.ok()) << cut;
  }
}

TEST(SafetensorsTest, HalfConversions) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x0001), 5.9604644775390625e-8f);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(3.14159f)), 3.140625f);
}

}  // namespace
}  // namespace petal
