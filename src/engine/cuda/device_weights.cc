#include "engine/cuda/device_weights.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

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

namespace petal::cuda {

Status UploadTensorsBf16(const WeightStore& store, const std::vector<UploadJob>& jobs,
                         int threads) {
  // Tensors are cut into chunks of at most kChunk values (16 MB of bf16), the unit of work.
  constexpr size_t kChunk = size_t{8} << 20;
  struct Chunk {
    size_t job, begin, count;
  };
  std::vector<Chunk> chunks;
  for (size_t j = 0; j < jobs.size(); ++j) {
    size_t n = 1;
    for (int64_t d : jobs[j].shape) n *= static_cast<size_t>(d);
    for (size_t b = 0; b < n; b += kChunk) chunks.push_back({j, b, std::min(kChunk, n - b)});
  }
  if (chunks.empty()) return Status::Ok();
  int device = 0;
  PETAL_CUDA_CHECK(cudaGetDevice(&device));
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first = Status::Ok();
  auto worker = [&] {
    auto fail = [&](Status s) {
      std::lock_guard<std::mutex> lock(mu);
      if (first.ok()) first = std::move(s);
    };
    if (cudaSetDevice(device) != cudaSuccess) return fail(Internal("cudaSetDevice failed"));
    cudaStream_t stream = nullptr;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
      return fail(Internal("cudaStreamCreate failed"));
    // Two pinned staging halves, alternated so one converts while the other copies.
    uint16_t* staging = nullptr;
    if (cudaMallocHost(&staging, 2 * kChunk * sizeof(uint16_t)) != cudaSuccess) {
      cudaStreamDestroy(stream);
      return fail(Internal("cudaMallocHost of the upload staging buffer failed"));
    }
    cudaEvent_t done[2] = {nullptr, nullptr};
    cudaEventCreateWithFlags(&done[0], cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done[1], cudaEventDisableTiming);
    for (size_t i = next++, half = 0; i < chunks.size(); i = next++, half ^= 1) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!first.ok()) break;
      }
      const Chunk& c = chunks[i];
      const UploadJob& job = jobs[c.job];
      uint16_t* buf = staging + half * kChunk;
      // This half's previous copy must be done before it is overwritten.
      if (cudaEventSynchronize(done[half]) != cudaSuccess) {
        fail(Internal("upload stream failed"));
        break;
      }
      if (Status s = store.ReadBf16(job.name, job.shape, buf, c.begin, c.count); !s.ok()) {
        fail(std::move(s));
        break;
      }
      cudaError_t e = cudaMemcpyAsync(job.dst + c.begin, buf, c.count * sizeof(uint16_t),
                                      cudaMemcpyHostToDevice, stream);
      if (e == cudaSuccess) e = cudaEventRecord(done[half], stream);
      if (e != cudaSuccess) {
        fail(CudaError(e, "cudaMemcpyAsync", __FILE__, __LINE__));
        break;
      }
    }
    if (cudaStreamSynchronize(stream) != cudaSuccess) fail(Internal("upload stream failed"));
    cudaEventDestroy(done[0]);
    cudaEventDestroy(done[1]);
    cudaStreamDestroy(stream);
    cudaFreeHost(staging);
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(chunks.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return first;
}

}  // namespace petal::cuda
