// AttentionRunner: the per-model choice of ragged attention backend, made from measurements.
//
// Backends: Petal's flash kernel (head dims 32, 64, 128), cuDNN's fused flash attention
// (kernels/cuda/attention_cudnn.h, when built in and the device is sm_90+), and the plain
// reference kernel for any other head dim. In AttentionMode::kAuto, the first Run() of a shape
// (sequence bucket, longest-sequence bucket, heads, head dim, causal) times flash and
// cuDNN on that very batch (layer 0 of an eager warm-up pass: GraphCache never captures a shape
// before running it eagerly) and keeps the faster for every later batch of the shape, captured
// graphs included. Shapes cuDNN refuses use flash; the reason is kept for Describe(). The same
// timing picks the flash kernel's tile variant (kernels/cuda/attention_internal.h) among those
// that support the GQA group when PETAL_ATTN_VARIANTS=1. Off by default: on the H200 it measured
// no gain (the default variant was the fastest or within 2% at every 0.6b shape,
// docs/attention.md).
//
// q/k norm + rotary (AttentionParams::qk_norm): the flash kernel applies it to the tiles it loads
// (head_dim 128); when the choice is another backend, Run() launches LaunchQkNormRope in place
// first. The choice itself is timed on plain attention either way.
//
// Thread-safety: one engine thread. Timing synchronises the stream, so the first batch of a shape
// is slower; never called during stream capture for an unseen shape (falls back to flash then).
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "engine/cuda/cuda_model.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/cuda_check.h"

namespace petal::cuda {

class AttentionRunner {
 public:
  enum class Backend { kFlash, kCudnn, kReference };

  AttentionRunner();
  ~AttentionRunner();
  // Allocates the plan workspaces for the capacity and, unless mode is kFlash, creates cuDNN.
  Status Init(const Capacity& cap, int head_dim);
  // Enqueues the per-batch plan of the backend(s) this shape may use (once per forward pass).
  Status Plan(const AttentionParams& p, cudaStream_t stream);
  // Enqueues one layer's attention with the backend chosen for p's shape (choosing it first if
  // the shape is new; see the file comment).
  Status Run(const AttentionParams& p, cudaStream_t stream);

  // Summary, e.g. "auto: petal-flash x3, cudnn x2 (cudnn 9.14.0)".
  std::string backend() const;
  // One line per shape: the choice and the times measured.
  std::string DescribeChoices() const;
  std::map<std::string, double> Stats() const;
  size_t bytes() const;

 private:
  // The token bucket is left out on purpose: cuDNN's plan and both kernels' relative speed
  // depend on the sequence count and the longest sequence, so a new token bucket (common under
  // mixed traffic) reuses the choice instead of paying for another timing.
  using ShapeKey = std::tuple<int, int, int, int, int, bool>;  // seqs, max_len, heads,
                                                               // kv heads, d, causal
  struct Choice {
    Backend backend = Backend::kFlash;
    int variant = -1;                     // flash tile variant; -1: DefaultFlashVariant
    double flash_ms = -1, cudnn_ms = -1;  // -1: not measured (flash_ms: the chosen variant's)
    double default_flash_ms = -1;         // the default variant's time, when others were timed
    std::string note;                     // why cuDNN was not used, if it was not
    int timed_tokens = 0;                 // token bucket of the batch it was timed on
  };
  static ShapeKey KeyOf(const AttentionParams& p);
  // The backend (and flash variant) for p's shape, choosing it first if the shape is new.
  Status Pick(const AttentionParams& p, cudaStream_t stream, Backend* b, int* variant);
  StatusOr<Choice> Choose(const AttentionParams& p, cudaStream_t stream);
  Status RunWith(Backend b, const AttentionParams& p, cudaStream_t stream, int variant = -1);
  // Times the flash variants on this batch (each planned first) and leaves the fastest planned;
  // its time in *ms. Variant -1 (the default) only, unless variant tuning is on.
  StatusOr<int> ChooseFlashVariant(const AttentionParams& p, cudaStream_t stream, double* ms,
                                   double* default_ms);
  // Mean time of `reps` runs of f after one warm-up run, in ms.
  template <class F>
  StatusOr<double> TimeRuns(F&& f, cudaStream_t stream);
  Status EnsureCudnnWorkspace();

  AttentionMode mode_ = AttentionMode::kAuto;
  bool flash_ = true;  // head dim supported by the flash kernel
  DeviceBuffer<uint8_t> workspace_;
  std::unique_ptr<CudnnAttention> cudnn_;
  std::string cudnn_unavailable_;  // why cudnn_ is null
  DeviceBuffer<uint8_t> cudnn_meta_storage_, cudnn_workspace_;
  CudnnAttentionMeta cudnn_meta_;
  std::map<ShapeKey, Choice> choices_;
  bool tune_variants_ = false;  // PETAL_ATTN_VARIANTS=1
  double tune_ms_ = 0;
  // Calls with qk_norm that the flash kernel folded / that ran LaunchQkNormRope first.
  int64_t qk_norm_folded_ = 0, qk_norm_separate_ = 0;
};

class Gemm;
// Stats and report shared by the CUDA models: GEMM plans (tuned or not, tuning time) and the
// attention backends in use.
std::map<std::string, double> KernelStats(const Gemm& gemm, const AttentionRunner& attention);
std::string DescribeKernels(const Gemm& gemm, const AttentionRunner& attention);

}  // namespace petal::cuda
