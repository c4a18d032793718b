// The AVX-512 work item of the fp32 blocked attention (cpu_attention.cc), in its own translation
// unit compiled by function attribute: BlockedAttention calls it instead of its AVX2 tiles when
// DetectCpuFeatures() has AVX-512 (so PETAL_CPU_ISA caps it) and the head size is a multiple of
// 16. Thread-safety: a pure function over caller buffers.
#pragma once

namespace petal::cpu::internal {

// Queries [q0, q0 + nq) (nq <= 32) of one head against one (sequence, kv head)'s keys packed in
// panels of 16 (k[j][t] at kt[(j / 16) * 16 * d + t * 16 + j % 16], zero past len, rounded up to
// 16) and its values as rows (v[j][t] at v[j * v_stride + t]); online softmax over blocks of 128
// keys. sbuf: 32 x 128 floats, acc: 32 x d floats of scratch. Writes out rows q0.. (stride
// out_stride). d % 16 == 0.
void RunItemAvx512(const float* q, int q_stride, const float* kt, const float* v, int v_stride,
                   float* out, int out_stride, int q0, int nq, int len, int d, bool causal,
                   float scale, float* sbuf, float* acc);

}  // namespace petal::cpu::internal
