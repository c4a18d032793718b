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

Status UploadFp8Rows(const std::vector<float>& host, int rows, int dim, DeviceBuffer<fp8>* q,
                     DeviceBuffer<float>* scale) {
  *q = DeviceBuffer<fp8>();
  *scale = DeviceBuffer<float>();
  if (host.empty()) return Status::Ok();
  if (static_cast<int64_t>(rows) * dim != static_cast<int64_t>(host.size()))
    return InvalidArgument("UploadFp8Rows: " + std::to_string(host.size()) + " values are not " +
                           std::to_string(rows) + " x " + std::to_string(dim));
  DeviceBuffer<float> f32;
  PETAL_RETURN_IF_ERROR(f32.Allocate(host.size()));
  PETAL_RETURN_IF_ERROR(f32.CopyFromHost(host.data(), host.size()));
  PETAL_RETURN_IF_ERROR(q->Allocate(host.size()));
  PETAL_RETURN_IF_ERROR(scale->Allocate(rows));
  QuantizeRowsFp8Params p;
  p.in_f32 = f32.get();
  p.out = q->get();
  p.scale = scale->get();
  p.rows = rows;
  p.dim = dim;
  PETAL_RETURN_IF_ERROR(LaunchQuantizeRowsFp8(p, nullptr));
  PETAL_CUDA_CHECK(cudaDeviceSynchronize());
  return Status::Ok();
}

}  // namespace petal::cuda
