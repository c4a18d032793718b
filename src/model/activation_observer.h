// ActivationObserver: a hook through which a forward pass reports, per layer, the per-token
// absolute maxima of the inputs of its four dense GEMMs (the tensors `--quantize fp8` quantises):
// what `petal calibrate` (src/cli/cmd_calibrate.cc) records to compute static fp8 activation
// scales (fp8_scales.h). The CPU fp32 forward (qwen3.cc) and the CUDA bf16 forward
// (qwen3_cuda.cc, through the engine) both report through it. Thread-safety: an observer is
// called from the thread running the forward pass; implementations need no locking unless they
// are shared between engines.
#pragma once

#include <cstdint>

namespace petal {

// The four fp8 GEMM inputs of a decoder layer, in forward order.
enum class Fp8Input : int {
  kQkv = 0,     // post-input-norm activations (QKV projection input)
  kO = 1,       // attention output (O projection input)
  kGateUp = 2,  // post-attention-norm activations (gate/up projection input)
  kDown = 3,    // silu(gate) * up (down projection input)
};
inline constexpr int kFp8Inputs = 4;
// "qkv_in", "o_in", "gate_up_in", "down_in": the names in fp8_scales.json.
const char* Fp8InputName(Fp8Input which);

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // row_amax[r] = max_i |v[r, i]| of `which` input of `layer`, for the batch's `rows` real tokens
  // (padding excluded), in token order.
  virtual void ObserveRowAmax(int layer, Fp8Input which, const float* row_amax, int rows) = 0;
};

// Computes each row's absolute maximum of the fp32 rows `v` ([rows, dim]) and reports it: the
// CPU forward's side of the hook. No-op when `observer` is null.
void ObserveRows(ActivationObserver* observer, int layer, Fp8Input which, const float* v, int rows,
                 int dim);

}  // namespace petal
