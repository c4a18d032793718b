#include "model/safetensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include <unistd.h>

#include "common/file_util.h"

namespace petal {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("petal_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(SafetensorsWriterTest, RoundTripsDataAndFill) {
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -1e-3f};
  const std::vector<uint16_t> b = {FloatToBFloat16(1.0f), FloatToBFloat16(-0.5f),
                                   FloatToBFloat16(3.0f)};
  std::vector<TensorToWrite> t(4);
  t[0] = {"layer.a", DType::kF32, {2, 3}, a.data(), nullptr};
  t[1] = {"b \"quoted\"", DType::kBF16, {3}, b.data(), nullptr};
  t[2] = {"filled", DType::kF16, {2}, nullptr, [](uint8_t* dst) {
            const uint16_t h[2] = {0x3c00, 0xc000};  // 1.0, -2.0
            std::memcpy(dst, h, 4);
          }};
  t[3] = {"empty", DType::kF32, {0, 4}, nullptr, [](uint8_t*) {}};
  const std::string path = TempPath("rt.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, t, {{"format", "pt"}}).ok());

  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  ASSERT_EQ((*f)->tensors().size(), 4u);
  const TensorView* va = (*f)->Find("layer.a");
  ASSERT_NE(va, nullptr);
  EXPECT_EQ(va->ShapeString(), "[2, 3]");
  // The data section starts 8-byte aligned, so fp32 views are aligned.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(va->data) % 8, 0u);
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  files.push_back(std::move(f).value());
  auto store = WeightStore::FromFiles(std::move(files));
  auto ra = store->ReadF32("layer.a", {2, 3});
  ASSERT_TRUE(ra.ok());
  EXPECT_EQ(*ra, a);
  auto rb = store->ReadF32("b \"quoted\"", {3});
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(*rb, (std::vector<float>{1.0f, -0.5f, 3.0f}));
  auto rc = store->ReadF32("filled", {2});
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_TRUE(store->ReadF32("empty", {0, 4}).ok());
  std::filesystem::remove(path);
}

TEST(SafetensorsWriterTest, RejectsDuplicatesAndAmbiguousSources) {
  const float v[1] = {1};
  const std::string path = TempPath("bad.safetensors");
  std::vector<TensorToWrite> dup = {{"x", DType::kF32, {1}, v, nullptr},
                                    {"x", DType::kF32, {1}, v, nullptr}};
  EXPECT_NE(WriteSafetensors(path, dup).message().find("'x' appears twice"), std::string::npos);
  std::vector<TensorToWrite> neither = {{"y", DType::kF32, {1}, nullptr, nullptr}};
  EXPECT_FALSE(WriteSafetensors(path, neither).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace petal
