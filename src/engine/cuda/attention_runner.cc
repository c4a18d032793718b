#include "engine/cuda/attention_runner.h"

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
  return flash_ ? RunRaggedAttention(p, workspace_.get(), stream) : LaunchReferenceAttention(p, stream);
}

}  // namespace petal::cuda
