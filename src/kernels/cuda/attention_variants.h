// The tile-configuration variants of the flash attention kernel per head dim, in order of
// preference (the default is the first that supports the GQA group). Internal header, shared by
// attention_flash.cu and the CPU emulation test. Thread-safety: types only.
#pragma once

#include <string>
#include <tuple>
#include <utility>

#include "kernels/cuda/attention_common.cuh"

namespace petal::cuda::attn {

// FlashConfig<head_dim, warps, block_n, min CTAs per SM, q heads per CTA, m-tiles per warp>.
// The default is the first variant that supports the GQA group and whose capacity grid has at
// least two CTAs per SM; when none has, the one with the most CTAs (the 32-row tiles listed last
// exist for these small, latency-bound batches, e.g. one 512-token sequence). The 128-key tiles
// of d = 32 / 64 (session 27) take a BERT-length sequence (<= 128 tokens) in one K/V step
// (no spills under ptxas -v; the d = 64 two-m-tile one spilled and is not listed).
template <int kHeadDim>
struct Variants;
template <>
struct Variants<32> {
  using List = std::tuple<FlashConfig<32, 4, 64, 4, 1, 1>, FlashConfig<32, 4, 64, 2, 1, 2>,
                          FlashConfig<32, 8, 64, 2, 2, 1>, FlashConfig<32, 4, 128, 3, 1, 1>,
                          FlashConfig<32, 4, 128, 2, 1, 2>>;
};
template <>
struct Variants<64> {
  using List = std::tuple<FlashConfig<64, 4, 64, 2, 2, 2>, FlashConfig<64, 4, 64, 2, 1, 2>,
                          FlashConfig<64, 4, 64, 3, 1, 1>, FlashConfig<64, 8, 64, 1, 2, 1>,
                          FlashConfig<64, 4, 64, 3, 2, 1>, FlashConfig<64, 4, 128, 2, 1, 1>>;
};
// d = 128: two m-tiles per warp (BN = 64) is the FlashAttention-2 tile shape; ptxas spills
// 40-56 bytes there (a few L1-resident loads per K/V tile), which the halved ldmatrix traffic
// should outweigh. The no-spill one-m-tile variants stay for comparison (bench).
template <>
struct Variants<128> {
  using List = std::tuple<FlashConfig<128, 4, 64, 2, 2, 2>, FlashConfig<128, 4, 64, 2, 1, 2>,
                          FlashConfig<128, 8, 64, 1, 2, 1>, FlashConfig<128, 4, 64, 2, 1, 1>,
                          FlashConfig<128, 8, 64, 1, 1, 1>, FlashConfig<128, 4, 32, 2, 2, 2>,
                          FlashConfig<128, 4, 32, 2, 1, 2>, FlashConfig<128, 4, 64, 2, 2, 1>,
                          FlashConfig<128, 8, 64, 1, 2, 2>>;
};

// Calls f(Config{}) for variant `index` of head dim D (compile-time walk of the list).
template <int D, size_t I = 0, class F>
Status WithVariant(int index, F&& f) {
  using List = typename Variants<D>::List;
  if constexpr (I == std::tuple_size_v<List>) {
    return InvalidArgument("attention: no flash variant " + std::to_string(index) +
                           " for head_dim " + std::to_string(D));
  } else {
    if (index == static_cast<int>(I)) return f(std::tuple_element_t<I, List>{});
    return WithVariant<D, I + 1>(index, std::forward<F>(f));
  }
}

// Launches variant `variant` (an index into Variants<D>::List) of the flash kernel for head dim
// D over a planned workspace; params already validated. Defined in attention_flash_launch.cuh,
// instantiated in attention_flash_d<D>.cu.
template <int D>
Status RunFlashHeadDim(const AttentionParams& p, int variant, const void* workspace,
                       cudaStream_t stream);

}  // namespace petal::cuda::attn
