// CudaModel: one architecture's forward pass on the GPU (bf16 weights and activations, fp32
// accumulation), enqueued on a stream from inputs already in device memory. Implementations
// (src/model/<arch>/<arch>_cuda.cc, listed in src/model/registry.cc) allocate every buffer they
// need at construction for the engine's capacity, so Forward() never allocates or synchronises and
// can be captured in a CUDA graph. Thread-safety: driven by one thread (the engine's) at a time.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <vector>

#include "common/status.h"
#include "model/activation_observer.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace petal::cuda {

// Which ragged attention backend runs: chosen by timing at first use per batch shape (kAuto), or
// forced. See attention_runner.h.
enum class AttentionMode { kAuto, kFlash, kCudnn };

// Capacity of one engine: the most tokens and sequences a batch may hold, and how attention is
// chosen.
struct Capacity {
  int max_tokens = 0;
  int max_seqs = 0;
  AttentionMode attention = AttentionMode::kAuto;
  // --quantize fp8: dense layers with e4m3 weights (per output channel) and activations (per
  // token) on batches of at least fp8_min_tokens tokens; smaller batches keep the bf16 weights
  // (cuBLASLt's fp8 kernels are slower than bf16 at small M: bench/results/*fp8-probe*). Only
  // architectures that implement it accept it (Qwen3); others fail at creation.
  bool fp8 = false;
  int fp8_min_tokens = 2048;  // >= kFp8MinM (gemm.h): the engine raises it
  bool fp8_mlp_only = false;  // QKV and O stay bf16 (less quantisation noise, less speed-up)
  // --fp8-scales: static per-tensor dequantisation scales, [num_layers * kFp8Inputs] in
  // Fp8Input order (model/fp8_scales.h, DequantScales), used by the fp8 quantisers instead of
  // per-token ones (fp8_ops.h, static_scale). Empty = dynamic.
  std::vector<float> fp8_static_scales = {};
  // Sparse (SPLADE) models: tokens per chunk of the vocabulary-sized logits (0: sized so one
  // chunk's bf16 logits take ~128 MiB; model/bert/bert_splade_cuda.h).
  int sparse_chunk_tokens = 0;
};

// Per-batch inputs, all in device memory at fixed addresses for the engine's lifetime.
struct DeviceBatch {
  const int32_t* token_ids = nullptr;       // [max_tokens]
  const int32_t* token_type_ids = nullptr;  // [max_tokens] (BERT); zeros when unused
  const int32_t* cu_seqlens = nullptr;      // [max_seqs + 1]
  const int32_t* num_seqs = nullptr;        // [1]
  // Host-side sizes of the launch: kernels that are sized by token count use num_tokens (the
  // engine pads it up to a bucket later); nothing reads per-sequence values on the host.
  int num_tokens = 0;
  int num_seqs_host = 0;
  // Upper bound on every sequence's length in this batch (the engine rounds it up to a bucket).
  int max_seq_len = 0;
  // Pooling spans (Batch::pool_spans, absolute offsets): [max_rows * 3] at a fixed address;
  // num_spans_host is the span-count bucket (padding spans are empty), 0 = no spans (one row per
  // sequence). With spans, Forward writes [num_spans_host, hidden] rows (LaunchPoolSpans).
  const int32_t* pool_spans = nullptr;
  int num_spans_host = 0;
  // Multi-vector models only: [max_seqs] key lengths (Batch::key_lengths; 0 = every key), at a
  // fixed address; Forward then writes [num_tokens, OutputDim()] rows, one per token.
  const int32_t* key_lengths = nullptr;
};

class CudaModel {
 public:
  virtual ~CudaModel() = default;
  virtual const ModelConfig& config() const = 0;
  // Enqueues the forward pass and pooling; writes [num_seqs_host, hidden] fp32 pooled (and, per
  // config, L2-normalised) embeddings to `pooled` (with pooling spans: [num_spans_host, hidden],
  // each span pooled and normalised per its flags; embedding models only), or, for a ranking model,
  // its score head's [num_seqs_host, score_outputs] fp32 logits (config().OutputDim() per row),
  // or, for a sparse (SPLADE) model, [num_seqs_host, vocab_size] pooled fp32 values.
  virtual Status Forward(const DeviceBatch& batch, float* pooled, cudaStream_t stream) = 0;
  // Bytes of device memory held (weights + scratch), for stats.
  virtual size_t DeviceBytes() const = 0;
  // Counters of the kernels' runtime choices (GEMM plans tuned, attention backend), for stats.
  virtual std::map<std::string, double> Stats() const = 0;
  // Human-readable report of those choices: one line per GEMM plan and the attention backend.
  virtual std::string Describe() const = 0;
  // Whether batches of at least Capacity::fp8_min_tokens tokens take the fp8 path (models built
  // with Capacity::fp8 only); switched off by the start-up fidelity gate to run the bf16 path on
  // the same batch. Not to be changed while a graph is being captured.
  virtual bool fp8_enabled() const { return false; }
  virtual void set_fp8_enabled(bool) {}
  // petal calibrate: from now on the bf16 forward also records every fp8 GEMM input's per-token
  // maxima (ActivationObserver) in device memory; ReportCalibration reads them back after the
  // stream has been synchronised. Architectures without it return Unimplemented.
  virtual Status EnableCalibration() {
    return Unimplemented(std::string("fp8 calibration is implemented for Qwen3 models, not ") +
                         ArchitectureName(config().architecture));
  }
  // Hands the last forward's maxima of its first `rows` tokens to `observer` (synchronous copy).
  virtual Status ReportCalibration(int /*rows*/, ActivationObserver* /*observer*/) {
    return Unimplemented("calibration is not enabled");
  }
};

// Loads weights from `store`, uploads them in bf16, and allocates scratch for `cap`: the
// architecture's registry entry's create_cuda.
StatusOr<std::unique_ptr<CudaModel>> CreateCudaModel(const ModelConfig& config,
                                                     const WeightStore& store, Capacity cap);

}  // namespace petal::cuda
