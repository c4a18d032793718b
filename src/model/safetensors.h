// Reader for the safetensors format (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header mapping tensor names to dtype/shape/offsets, then
// the raw data. The file is mmap'ed read-only; TensorViews point into the mapping and stay valid
// while the SafetensorsFile lives. Validation is strict: offsets in bounds, no overlaps, known
// dtypes, sizes matching shapes. Thread-safety: immutable after Open(); safe to share.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace petal {

enum class DType { kF32, kF16, kBF16 };
const char* DTypeName(DType d);
size_t DTypeSize(DType d);

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
  std::string ShapeString() const;  // "[384, 1536]"
};

class SafetensorsFile {
 public:
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Maps and validates `path`.
  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Validates an in-memory image (copied); for tests and fuzzing.
  static StatusOr<std::unique_ptr<SafetensorsFile>> FromBytes(std::string bytes,
                                                              const std::string& label);

  const std::string& path() const { return path_; }
  // Null if absent.
  const TensorView* Find(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status Parse(const uint8_t* base, size_t size);

  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::string owned_;  // FromBytes storage
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Several safetensors files seen as one (a sharded checkpoint with model.safetensors.index.json,
// or a single model.safetensors). Thread-safety: immutable after Open().
class WeightStore {
 public:
  // Opens `dir`/model.safetensors, or every shard named by `dir`/model.safetensors.index.json.
  static StatusOr<std::unique_ptr<WeightStore>> Open(const std::string& dir);
  static std::unique_ptr<WeightStore> FromFiles(std::vector<std::unique_ptr<SafetensorsFile>> f);

  const TensorView* Find(const std::string& name) const;
  // Copies a tensor into fp32, checking its shape; the error names the tensor and both shapes.
  // Writes values [begin, begin + count) (row-major, clamped to numel) of tensor `name` (of
  // `expected_shape`) as bf16 bits into `dst`: stored bf16 is copied, f32 rounded to nearest
  // even, f16 widened then rounded (the same values as rounding ReadF32's result). No fp32 copy
  // is made; safe to call from several threads.
  Status ReadBf16(const std::string& name, const std::vector<int64_t>& expected_shape,
                  uint16_t* dst, size_t begin = 0, size_t count = SIZE_MAX) const;
  StatusOr<std::vector<float>> ReadF32(const std::string& name,
                                       const std::vector<int64_t>& expected_shape) const;
  // Copies only rows `rows` of a 2-d tensor into fp32 ([rows.size(), shape[1]]), checking its
  // shape and each row index (e.g. the LM head's "yes" / "no" rows, never the whole vocabulary).
  StatusOr<std::vector<float>> ReadRowsF32(const std::string& name,
                                           const std::vector<int64_t>& expected_shape,
                                           const std::vector<int64_t>& rows) const;
  std::vector<std::string> Names() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
};

// Converts one element; exposed for the CUDA uploader and tests.
float HalfToFloat(uint16_t h);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);  // round to nearest even

}  // namespace petal
