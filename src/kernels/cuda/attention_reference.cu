// Reference ragged attention on the GPU: one thread block per (token, query head), fp32 math, two
// passes over the keys (max, then exp-sum and weighted V sum). Written to be obviously correct,
// not fast: the yardstick for the flash kernel on sequences too long for the CPU reference, and a
// fallback. Graph-safe: grid = max_tokens x num_heads; tokens past cu_seqlens[num_seqs] exit.
// Thread-safety: see attention.h.
#include <climits>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.cuh"

namespace petal::cuda {
namespace attn {
namespace {

constexpr int kRefThreads = 256;

__device__ float BlockReduce(float v, bool is_max, float* scratch) {
  for (int off = 16; off > 0; off /= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kRefThreads / 32; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
  return r;
}

__global__ void __launch_bounds__(kRefThreads)
    ReferenceAttentionKernel(AttentionParams p, int group) {
  const int token = blockIdx.x / p.num_heads;
  const int head = blockIdx.x % p.num_heads;
  const int n = p.num_seqs ? min(max(*p.num_seqs, 0), p.max_seqs) : p.max_seqs;
  if (n == 0 || token < p.cu_seqlens[0] || token >= p.cu_seqlens[n]) return;
  // Binary search for the sequence s with cu_seqlens[s] <= token < cu_seqlens[s + 1].
  int lo = 0, hi = n;  // invariant: cu[lo] <= token < cu[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (p.cu_seqlens[mid] <= token)
      lo = mid;
    else
      hi = mid;
  }
  const int begin = p.cu_seqlens[lo];
  int end = p.causal ? token + 1 : p.cu_seqlens[lo + 1];
  if (p.kv_lens != nullptr && !p.causal && p.kv_lens[lo] > 0) {
    end = min(end, begin + p.kv_lens[lo]);  // keys: the sequence's first kv_lens[lo] tokens
  }
  const int d = p.head_dim, kvh = head / group;

  __shared__ float q[128];
  __shared__ float prob[kRefThreads];
  __shared__ float scratch[kRefThreads / 32];
  for (int i = threadIdx.x; i < d; i += kRefThreads) {
    q[i] = __bfloat162float(p.q[static_cast<int64_t>(token) * p.q_stride + head * d + i]);
  }
  __syncthreads();
  auto score = [&](int j) {
    // 16-byte loads of 8 bf16 (rows are 16-byte aligned: ValidateAttentionLayout).
    const auto* kj =
        reinterpret_cast<const uint4*>(p.k + static_cast<int64_t>(j) * p.k_stride + kvh * d);
    float dot = 0.0f;
    for (int c = 0; c < d / 8; ++c) {
      const uint4 raw = kj[c];
      const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
      for (int e = 0; e < 4; ++e) {
        const float2 f = __bfloat1622float2(h[e]);
        dot += q[8 * c + 2 * e] * f.x;
        dot += q[8 * c + 2 * e + 1] * f.y;
      }
    }
    return dot * p.scale;
  };

  float mx = -INFINITY;
  for (int j = begin + threadIdx.x; j < end; j += kRefThreads) mx = fmaxf(mx, score(j));
  mx = BlockReduce(mx, true, scratch);

  float sum = 0.0f, acc = 0.0f;  // thread i < d accumulates output dimension i
  for (int j0 = begin; j0 < end; j0 += kRefThreads) {
    const int j = j0 + threadIdx.x;
    const float pj = j < end ? expf(score(j) - mx) : 0.0f;
    sum += pj;
    prob[threadIdx.x] = pj;
    __syncthreads();
    if (threadIdx.x < d) {
      const int cnt = min(kRefThreads, end - j0);
      for (int jj = 0; jj < cnt; ++jj) {
        const bf16* vj = p.v + static_cast<int64_t>(j0 + jj) * p.v_stride + kvh * d;
        acc += prob[jj] * __bfloat162float(vj[threadIdx.x]);
      }
    }
    __syncthreads();
  }
  sum = BlockReduce(sum, false, scratch);
  if (threadIdx.x < d) {
    p.out[(static_cast<int64_t>(token) * p.num_heads + head) * d + threadIdx.x] =
        __float2bfloat16(acc / sum);
  }
}

}  // namespace
}  // namespace attn

Status LaunchReferenceAttention(const AttentionParams& p, cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(ValidateAttentionLayout(p));
  const int64_t blocks = static_cast<int64_t>(p.max_tokens) * p.num_heads;
  if (blocks > INT_MAX) return InvalidArgument("attention: reference grid too large");
  if (blocks == 0) return Status::Ok();
  attn::ReferenceAttentionKernel<<<static_cast<unsigned>(blocks), attn::kRefThreads, 0, stream>>>(
      p, p.num_heads / p.num_kv_heads);
  PETAL_ATTN_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace petal::cuda
