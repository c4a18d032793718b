// Device side of bench/persistent_probe.cu, part 2: the PTX wrappers (shared-memory addresses,
// acquire / release, globaltimer, mbarrier, cp.async.bulk and 2-D tensor-map copies, proxy fences,
// cp.async, ldmatrix, mma.sync) and the grid barriers (ours and the barrier-latency kernel).
#pragma once
#include <cstdint>

#include "persistent_probe_gemm.cuh"

namespace probe {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// ---- PTX helpers ----
__device__ __forceinline__ uint32_t Smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ unsigned LdAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void RedRelease(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// A spin that never ends means a decomposition or barrier bug: trap (the launch then fails
// with an error) instead of hanging the GPU step. ~2^35 cycles is 10-20 s.
__device__ __forceinline__ void SpinGuard(long long t0) {
  if (clock64() - t0 > (1ll << 35)) __trap();
}
__device__ __forceinline__ void MbarInit(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, unsigned parity) {
  const long long t0 = clock64();
  for (;;) {
    uint32_t done;
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, "
        "p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    if (done) return;
    SpinGuard(t0);
  }
}
__device__ __forceinline__ void BulkG2S(uint32_t dst, const void* src, unsigned bytes,
                                        uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
// 2-D tensor-map load of the box at (k = x, row = y) into dst; completes tx bytes on bar.
__device__ __forceinline__ void TmaG2S2d(uint32_t dst, const CUtensorMap* map, int x, int y,
                                         uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void PrefetchTensorMap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
// Generic-proxy global writes (other CTAs' outputs, ordered by the grid barrier) before this
// thread's async-proxy (TMA) reads of them.
__device__ __forceinline__ void FenceProxyAsyncGlobal() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void CpCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void CpWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// wait_group takes an immediate: n (0..6, --stages - 2) through a switch.
__device__ __forceinline__ void CpWaitN(int n) {
  switch (n) {
    case 0:
      CpWait<0>();
      break;
    case 1:
      CpWait<1>();
      break;
    case 2:
      CpWait<2>();
      break;
    case 3:
      CpWait<3>();
      break;
    case 4:
      CpWait<4>();
      break;
    case 5:
      CpWait<5>();
      break;
    default:
      CpWait<6>();
      break;
  }
}
__device__ __forceinline__ void Ldsm4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void Ldsm2(uint32_t addr, uint32_t& r0, uint32_t& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r0), "=r"(r1)
               : "r"(addr));
}
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- grid barriers ----
// Ours: a monotonic arrival counter (zeroed before the launch). Barrier number b (0-based) of
// this launch completes when the counter reaches (b + 1) * gridDim.x. One release add per CTA,
// an acquire spin by thread 0, __syncthreads on both sides.
__device__ __forceinline__ void GridBarrier(unsigned* bar, unsigned b) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned target = (b + 1) * gridDim.x;
    RedRelease(bar, 1);
    const long long t0 = clock64();
    while (static_cast<int>(LdAcquire(bar) - target) < 0) SpinGuard(t0);
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads, 1)
    BarrierBenchKernel(unsigned* bar, int iters, int use_cg) {
  if (use_cg) {
    cg::grid_group g = cg::this_grid();
    for (int i = 0; i < iters; ++i) g.sync();
  } else {
    for (int i = 0; i < iters; ++i) GridBarrier(bar, static_cast<unsigned>(i));
  }
}
#endif  // sm_90+

}  // namespace probe
