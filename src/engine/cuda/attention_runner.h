// AttentionRunner: the per-model choice of ragged attention backend and its workspace. Petal's
// flash kernel serves head dims 32, 64 and 128; any other head dim (e.g. tiny test models) runs
// the plain reference kernel, which is slow but exact. Thread-safety: one engine thread.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"

namespace petal::cuda {

class AttentionRunner {
 public:
  // Allocates the plan workspace for the engine's capacity.
  Status Init(int max_tokens, int max_seqs, int head_dim);
  // Enqueues the per-batch plan (once per forward pass; all layers share it).
  Status Plan(const AttentionParams& p, cudaStream_t stream);
  // Enqueues one layer's attention.
  Status Run(const AttentionParams& p, cudaStream_t stream);
  const char* backend() const { return flash_ ? "petal-flash" : "reference"; }
  size_t bytes() const { return workspace_.bytes(); }

 private:
  bool flash_ = true;
  DeviceBuffer<uint8_t> workspace_;
};

class Gemm;
// Stats and report shared by the CUDA models: GEMM plans (tuned or not, tuning time) and the
// attention backend in use.
std::map<std::string, double> KernelStats(const Gemm& gemm, const AttentionRunner& attention);
std::string DescribeKernels(const Gemm& gemm, const AttentionRunner& attention);

}  // namespace petal::cuda
