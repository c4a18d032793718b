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

// The ladder mode an environment variable asks for: unset -> `fallback`; "auto" -> kFusedAuto
// (timed per size); N >= 0 -> fused at >= N tokens (0 = off), the configuration timed.
constexpr int kFusedAuto = -1;
int FusedModeFromEnv(const char* name, int fallback);

// Times `unfused(m)` and `fused(m, config)` for every config at each ladder size m (128, 512,
// 2048, 8192, 32768 below max_tokens, then max_tokens) and keeps per size the fastest fused
// config if it takes under 0.97 of the unfused pair (else -1). `forced` > 0: fused (its fastest
// config) at every size >= forced, unfused below, the unfused pair untimed. Appends a line per
// size to `table` ("m<=128: 0.0123 vs 0.0150 ms").
StatusOr<std::vector<FusedRung>> TuneFusedLadder(int max_tokens, int configs, int forced,
                                                 const std::function<Status(int)>& unfused,
                                                 const std::function<Status(int, int)>& fused,
                                                 std::string* table);

}  // namespace petal::cuda
