// Thin wrappers over the PTX instructions the flash attention kernel uses: cp.async (16-byte
// global->shared copies with zero fill), ldmatrix (8x8 b16 matrices from shared memory into MMA
// fragments) and mma.sync m16n8k16 bf16 with fp32 accumulators. Internal header (sm_80+).
// Thread-safety: device functions without shared state.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

// tests/ops/attention_emulation_test.cc compiles the kernels on the host with its own emulation
// of these instructions (defined before including the kernel headers).
#ifndef PETAL_ATTN_EMULATE

namespace petal::cuda::attn {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes global->shared asynchronously; when !valid, writes 16 zero bytes instead and
// reads nothing (src must still be a valid address expression, it is not dereferenced).
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Four 8x8 b16 matrices; lanes 8*i..8*i+7 give the row addresses of matrix i, and r[i] receives
// matrix i in the MMA fragment layout (lane holds row lane/4, columns 2*(lane%4) and +1).
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// As LdMatrixX4 but transposed: lane holds column lane/4, rows 2*(lane%4) and +1 of matrix i.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// c[16x8] += a[16x16] (row-major fragment) * b[16x8] (column-major fragment), fp32 accumulate.
__device__ __forceinline__ void MmaBf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats -> one register of two bf16 (round to nearest even); `lo` in the low half, which is
// the lower column index in an MMA fragment.
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 2^x on the special-function unit, flushing denormal results to zero (they are below bf16's
// relevance after normalisation); exp2(-inf) = 0. Skips exp2f's denormal fix-up instructions.
__device__ __forceinline__ float FastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace petal::cuda::attn

#endif  // PETAL_ATTN_EMULATE
