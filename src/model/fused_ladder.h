// The per-batch-size choice between a fused GEMM (kernels/cuda/gemm_fused.h) and the unfused pair
// it replaces (cuBLASLt GEMM + a separate elementwise kernel), shared by the CUDA forwards that
// fuse (qwen3_cuda_fused.cc, bert_cuda.cc). A ladder of rungs, one per batch size, decided once at
// load by timing or forced by an environment variable. CUDA builds only.
// Thread-safety: the functions are stateless; TuneFusedLadder runs kernels on the legacy stream
// and must not be called inside graph capture.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/fused_mode.h"  // the modes, FusedModeFromEnv

namespace petal::cuda {

// One size of the ladder: batches of up to max_tokens (and more than the previous rung's) take
// fused configuration `config`, or the unfused pair (-1).
struct FusedRung {
  int max_tokens = 0;
  int config = -1;
};

// The fused configuration for a batch of `tokens`, or -1 (also past the last rung).
int FusedConfigFor(const std::vector<FusedRung>& rungs, int tokens);
// "<=128 swiglu/P128x1, <=512 unfused, ..." ("unfused" for an empty ladder).
std::string DescribeRungs(const std::vector<FusedRung>& rungs,
                          const std::function<std::string(int)>& name);

// At each ladder size m (128, 512, 2048, 8192, 32768 below max_tokens, then max_tokens) from the
// mode's N on, times `fused(m, config)` for every config; the fastest is kept where `mode` > 0,
// and where `mode` < 0 only if it takes under 0.97 of `unfused(m)` (timed too; else -1). Sizes
// below N stay unfused, untimed. Appends a line per timed size to `table`
// ("m<=8192: 0.0123 vs 0.0150 ms"). `mode` must not be 0.
StatusOr<std::vector<FusedRung>> TuneFusedLadder(int max_tokens, int configs, int mode,
                                                 const std::function<Status(int)>& unfused,
                                                 const std::function<Status(int, int)>& fused,
                                                 std::string* table);

}  // namespace petal::cuda
