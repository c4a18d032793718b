#include "engine/cuda/attention_runner.h"

#include "kernels/cuda/gemm.h"

namespace petal::cuda {

Status AttentionRunner::Init(int max_tokens, int max_seqs, int head_dim) {
  flash_ = head_dim == 32 || head_dim == 64 || head_dim == 128;
  if (!flash_) return Status::Ok();
  return workspace_.Allocate(AttentionWorkspaceBytes(max_tokens, max_seqs));
}

Status AttentionRunner::Plan(const AttentionParams& p, cudaStream_t stream) {
  return flash_ ? PlanRaggedAttention(p, workspace_.get(), stream) : Status::Ok();
}

Status AttentionRunner::Run(const AttentionParams& p, cudaStream_t stream) {
  return flash_ ? RunRaggedAttention(p, workspace_.get(), stream)
                : LaunchReferenceAttention(p, stream);
}

std::map<std::string, double> KernelStats(const Gemm& gemm, const AttentionRunner& attention) {
  const GemmStats g = gemm.Stats();
  return {{"gemm_plans", double(g.plans)},
          {"gemm_tuned", double(g.tuned)},
          {"gemm_untuned", double(g.untuned)},
          {"gemm_too_large_to_tune", double(g.too_large)},
          {"gemm_small_m_rejected", double(g.small_m_rejected)},
          {"gemm_tune_ms", g.tune_ms},
          {"attention_flash", attention.backend()[0] == 'p' ? 1.0 : 0.0}};
}

std::string DescribeKernels(const Gemm& gemm, const AttentionRunner& attention) {
  return std::string("attention backend: ") + attention.backend() + "\n" + gemm.Stats().ToString();
}

}  // namespace petal::cuda
