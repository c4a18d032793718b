// SPLADE's head on the GPU (sparse models, ScoreHead::kBertMlmSplade; BertCpuModel::SparsePool
// is the CPU path): BertForMaskedLM's cls.predictions on every token (dense + exact GELU +
// LayerNorm, then the decoder GEMM to the vocabulary with its bias; the decoder is the word
// embeddings where the checkpoint ties them), then SpladePooling: per sequence, the max over its
// tokens of log(1 + relu(logit)). bf16 GEMMs with fp32 accumulation (cuBLASLt), bf16 logits,
// fp32 pooled rows. The decoder runs over token chunks of chunk_tokens() rows so that the
// [tokens, vocab] logits never exist at once: one [chunk, vocab] bf16 buffer (~128 MiB by
// default) is reused, each chunk max-pooled into the output (LaunchSparseMaxPool) before the
// next. The decoder's rows are padded with zeros to a multiple of 8 (cuBLASLt's 16-byte rows);
// padded columns are never pooled. Thread-safety: driven by the model's thread, like CudaModel.
#pragma once

#include <cuda_runtime.h>

#include "engine/cuda/cuda_model.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/ops.h"
#include "model/bert/bert.h"

namespace petal::cuda {

// Logit bytes one chunk may take when Capacity::sparse_chunk_tokens is 0.
inline constexpr size_t kSpladeLogitBytes = size_t{128} << 20;

class SpladeHead {
 public:
  // Uploads the head's weights (bf16) and allocates the logits buffer for cap.
  Status Init(const BertWeights& w, const ModelConfig& config, const Capacity& cap);
  // `hidden`: the encoder's final states [b.num_tokens, H]; `scratch`: [b.num_tokens, H] bf16 the
  // head may overwrite; writes [b.num_seqs_host, vocab] fp32 rows to `out`.
  Status Run(const DeviceBatch& b, const bf16* hidden, bf16* scratch, Gemm* gemm, float* out,
             cudaStream_t stream) const;
  int chunk_tokens() const { return chunk_; }
  size_t bytes() const;

 private:
  int hidden_ = 0, vocab_ = 0, padded_vocab_ = 0, chunk_ = 0;
  float eps_ = 1e-12f;
  DeviceBuffer<bf16> dense_w_, dense_b_, norm_g_, norm_b_, decoder_, decoder_b_, logits_;
};

}  // namespace petal::cuda
