// libFuzzer target: a whole safetensors image (8-byte header length, JSON header, data) through
// SafetensorsFile::FromBytes, the same validation Open() applies to a mapped file. Every tensor
// it accepts must lie inside the image with nbytes == numel * dtype size; its first and last
// bytes are read so ASan reports a view that points outside, and it is converted to fp32 the way
// the model loaders read it (WeightStore::ReadF32).
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petal;
  auto file =
      SafetensorsFile::FromBytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!file.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const auto& [name, t] : (*file)->tensors()) {
    PETAL_FUZZ_CHECK(t.numel() >= 0);
    PETAL_FUZZ_CHECK(t.nbytes == static_cast<size_t>(t.numel()) * DTypeSize(t.dtype));
    PETAL_FUZZ_CHECK(t.nbytes <= size);
    if (t.nbytes > 0) sink = sink + t.data[0] + t.data[t.nbytes - 1];
  }
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  files.push_back(std::move(file).value());
  auto store = WeightStore::FromFiles(std::move(files));
  for (const std::string& name : store->Names()) {
    const TensorView* t = store->Find(name);
    auto values = store->ReadF32(name, t->shape);
    PETAL_FUZZ_CHECK(values.ok() && values->size() == static_cast<size_t>(t->numel()));
  }
  return 0;
}
