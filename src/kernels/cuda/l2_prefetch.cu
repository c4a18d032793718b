// L2 prefetch kernel and the side-stream orchestration (see l2_prefetch.h).
#include "kernels/cuda/l2_prefetch.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/cuda_check.h"

namespace petal::cuda {
namespace {

constexpr size_t kPiece = 32 * 1024;  // bytes per bulk prefetch (multiple of 16)

// One thread per piece; sm_90 issues one TMA bulk prefetch per piece, older GPUs walk its lines.
__global__ void L2PrefetchKernel(const char* base, size_t bytes) {
  const size_t pieces = (bytes + kPiece - 1) / kPiece;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < pieces;
       i += size_t(gridDim.x) * blockDim.x) {
    const char* p = base + i * kPiece;
    const size_t left = bytes - i * kPiece;
    const uint32_t n = static_cast<uint32_t>(left < kPiece ? left : kPiece) & ~15u;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (n > 0)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(n) : "memory");
#else
    for (uint32_t o = 0; o < n; o += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
#endif
  }
}

int EnvInt(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == 0) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != 0 || x < lo || x > hi) return fallback;
  return static_cast<int>(x);
}

}  // namespace

int L2PrefetchAhead() {
  static const int v = EnvInt("PETAL_L2_PREFETCH", 0, 0, 4);
  return v;
}

int L2PrefetchMaxTokens() {
  static const int v = EnvInt("PETAL_L2_PREFETCH_MAX_TOKENS", 1024, 0, 1 << 30);
  return v;
}

Status LaunchL2Prefetch(const void* ptr, size_t bytes, cudaStream_t stream) {
  if (ptr == nullptr || bytes < 16) return Status::Ok();
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return InvalidArgument("L2 prefetch: unaligned");
  const size_t pieces = (bytes + kPiece - 1) / kPiece;
  const int threads = 64;
  const int blocks = static_cast<int>((pieces + threads - 1) / threads);
  L2PrefetchKernel<<<blocks, threads, 0, stream>>>(static_cast<const char*>(ptr), bytes);
  PETAL_CUDA_CHECK_LAUNCH("L2PrefetchKernel");
  return Status::Ok();
}

L2Prefetcher::~L2Prefetcher() {
  if (join_) cudaEventDestroy(join_);
  if (fork_) cudaEventDestroy(fork_);
  if (side_) cudaStreamDestroy(side_);
}

Status L2Prefetcher::Init(int ahead) {
  ahead_ = ahead < 0 ? 0 : ahead;
  if (ahead_ == 0 || side_ != nullptr) return Status::Ok();
  int dev = 0, l2 = 0;
  PETAL_CUDA_CHECK(cudaGetDevice(&dev));
  PETAL_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  piece_cap_ = static_cast<size_t>(l2) / 4;
  PETAL_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  PETAL_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  PETAL_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  return Status::Ok();
}

void L2Prefetcher::Begin(bool enabled) {
  active_ = enabled && ahead_ > 0 && !spans_.empty();
  forked_ = false;
}

Status L2Prefetcher::Fork(cudaStream_t main) {
  PETAL_CUDA_CHECK(cudaEventRecord(fork_, main));
  PETAL_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
  forked_ = true;
  return Status::Ok();
}

Status L2Prefetcher::BeforeGemm(size_t j, cudaStream_t main) {
  if (!active_) return Status::Ok();
  const size_t first = j == 0 ? 0 : j + ahead_, last = j + ahead_;
  if (first >= spans_.size()) return Status::Ok();
  PETAL_RETURN_IF_ERROR(Fork(main));
  for (size_t i = first; i <= last && i < spans_.size(); ++i)
    PETAL_RETURN_IF_ERROR(
        LaunchL2Prefetch(spans_[i].ptr, std::min(spans_[i].bytes, piece_cap_), side_));
  return Status::Ok();
}

Status L2Prefetcher::End(cudaStream_t main) {
  if (!active_ || !forked_) return Status::Ok();
  PETAL_CUDA_CHECK(cudaEventRecord(join_, side_));
  PETAL_CUDA_CHECK(cudaStreamWaitEvent(main, join_, 0));
  forked_ = false;
  return Status::Ok();
}

}  // namespace petal::cuda
