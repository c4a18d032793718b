// Writer for the safetensors format (the reader is safetensors.h). Tensors are streamed: the
// header is written first from names, dtypes and shapes, then each tensor's bytes are produced
// and written one at a time, so a multi-GB checkpoint never sits in memory twice.
// Thread-safety: WriteSafetensors is reentrant; it calls each tensor's `fill` from the calling
// thread, in order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/safetensors.h"

namespace petal {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  // Either `data` (numel * DTypeSize(dtype) bytes, little-endian) or `fill`, which writes exactly
  // that many bytes into the buffer it is given.
  const void* data = nullptr;
  std::function<void(uint8_t* dst)> fill;
};

// Writes `tensors` to `path` in the given order, with `metadata` as __metadata__ (Hugging Face
// loaders want {"format": "pt"}). Names must be unique; the header is padded to 8 bytes.
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Escapes `s` as a JSON string literal, quotes included.
std::string JsonQuote(const std::string& s);

}  // namespace petal
