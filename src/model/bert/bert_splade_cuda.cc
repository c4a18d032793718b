// SpladeHead (bert_splade_cuda.h): uploads, chunk sizing and the per-chunk decoder + pooling.
// Thread-safety: see the header.
#include "model/bert/bert_splade_cuda.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/cuda/device_weights.h"
#include "kernels/cuda/score_ops.h"

namespace petal::cuda {

Status SpladeHead::Init(const BertWeights& w, const ModelConfig& config, const Capacity& cap) {
  hidden_ = config.hidden_size;
  vocab_ = config.vocab_size;
  eps_ = config.norm_eps;
  padded_vocab_ = (vocab_ + 7) / 8 * 8;
  const size_t H = static_cast<size_t>(hidden_);
  const std::vector<float>& decoder = w.mlm_decoder.empty() ? w.word_embeddings : w.mlm_decoder;
  if (decoder.size() != static_cast<size_t>(vocab_) * H || w.mlm_bias.size() != size_t(vocab_)) {
    return InvalidArgument("SPLADE head: the decoder or its bias does not match vocab_size " +
                           std::to_string(vocab_) + " x hidden_size " + std::to_string(hidden_));
  }
  std::vector<float> dec(static_cast<size_t>(padded_vocab_) * H, 0.0f);
  std::copy(decoder.begin(), decoder.end(), dec.begin());
  std::vector<float> bias(padded_vocab_, 0.0f);
  std::copy(w.mlm_bias.begin(), w.mlm_bias.end(), bias.begin());
  PETAL_ASSIGN_OR_RETURN(dense_w_, UploadBf16(w.mlm_dense_weight));
  PETAL_ASSIGN_OR_RETURN(dense_b_, UploadBf16(w.mlm_dense_bias));
  PETAL_ASSIGN_OR_RETURN(norm_g_, UploadBf16(w.mlm_norm_gamma));
  PETAL_ASSIGN_OR_RETURN(norm_b_, UploadBf16(w.mlm_norm_beta));
  PETAL_ASSIGN_OR_RETURN(decoder_, UploadBf16(dec));
  PETAL_ASSIGN_OR_RETURN(decoder_b_, UploadBf16(bias));
  const size_t row_bytes = static_cast<size_t>(padded_vocab_) * sizeof(bf16);
  int chunk = cap.sparse_chunk_tokens;
  if (chunk <= 0)
    chunk = std::max<int>(64, static_cast<int>(kSpladeLogitBytes / row_bytes) / 64 * 64);
  chunk_ = std::max(1, std::min(chunk, cap.max_tokens));
  return logits_.Allocate(static_cast<size_t>(chunk_) * padded_vocab_);
}

size_t SpladeHead::bytes() const {
  return TotalBytes(dense_w_, dense_b_, norm_g_, norm_b_, decoder_, decoder_b_, logits_);
}

Status SpladeHead::Run(const DeviceBatch& b, const bf16* hidden, bf16* scratch, Gemm* gemm,
                       float* out, cudaStream_t stream) const {
  const int T = b.num_tokens, H = hidden_;
  PETAL_CUDA_CHECK(cudaMemsetAsync(
      out, 0, sizeof(float) * static_cast<size_t>(b.num_seqs_host) * vocab_, stream));
  if (T == 0) return Status::Ok();
  // cls.predictions.transform on every token: dense + bias, exact GELU, LayerNorm (bert.cc's
  // order), in place in `scratch`.
  PETAL_RETURN_IF_ERROR(gemm->Run({.a = hidden,
                                   .w = dense_w_.get(),
                                   .bias = dense_b_.get(),
                                   .out = scratch,
                                   .m = T,
                                   .n = H,
                                   .k = H},
                                  stream));
  PETAL_RETURN_IF_ERROR(LaunchGelu({scratch, scratch, static_cast<int64_t>(T) * H}, stream));
  PETAL_RETURN_IF_ERROR(LaunchAddLayerNorm(
      {scratch, nullptr, norm_g_.get(), norm_b_.get(), eps_, scratch, T, H}, stream));
  // The decoder and SpladePooling, one chunk of tokens at a time.
  for (int row0 = 0; row0 < T; row0 += chunk_) {
    const int rows = std::min(chunk_, T - row0);
    PETAL_RETURN_IF_ERROR(gemm->Run({.a = scratch + static_cast<int64_t>(row0) * H,
                                     .w = decoder_.get(),
                                     .bias = decoder_b_.get(),
                                     .out = logits_.get(),
                                     .m = rows,
                                     .n = padded_vocab_,
                                     .k = H},
                                    stream));
    PETAL_RETURN_IF_ERROR(LaunchSparseMaxPool({.logits = logits_.get(),
                                               .ld = padded_vocab_,
                                               .row0 = row0,
                                               .rows = rows,
                                               .vocab = vocab_,
                                               .cu_seqlens = b.cu_seqlens,
                                               .num_seqs = b.num_seqs_host,
                                               .out = out},
                                              stream));
  }
  return Status::Ok();
}

}  // namespace petal::cuda
