#include "engine/cuda/device_weights.h"

#include "model/safetensors.h"

namespace petal::cuda {

StatusOr<DeviceBuffer<bf16>> UploadBf16(const std::vector<float>& host) {
  DeviceBuffer<bf16> buf;
  if (host.empty()) return buf;
  std::vector<uint16_t> bits(host.size());
  for (size_t i = 0; i < host.size(); ++i) bits[i] = FloatToBFloat16(host[i]);
  PETAL_RETURN_IF_ERROR(buf.Allocate(host.size()));
  PETAL_CUDA_CHECK(cudaMemcpy(buf.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  return buf;
}

}  // namespace petal::cuda
