// Instantiates the flash attention kernels and their launch for head_dim 32 (all tile
// variants, causal and bidirectional). Thread-safety: see attention.h.
#include "kernels/cuda/attention_flash_launch.cuh"

namespace petal::cuda::attn {

template Status RunFlashHeadDim<32>(const AttentionParams& p, int variant, const void* workspace,
                                    cudaStream_t stream);

}  // namespace petal::cuda::attn
