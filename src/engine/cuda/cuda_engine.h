// CudaEngine: the GPU engine. Step() stages a batch in page-locked memory, copies it to fixed
// device buffers, enqueues the model's forward pass and an async copy of the pooled embeddings
// into a page-locked output slot, records an event, and returns at once with a handle to that
// work (the LazyTensor idea of the design brief): waiting on the handle is the only
// synchronisation. Slots form a ring so the CPU fills batch N+1 while the GPU runs batch N.
// Thread-safety: Step() from one thread at a time; handles may be waited on from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "model/activation_observer.h"

namespace petal {

struct CudaEngineOptions {
  int device = 0;
  int max_tokens = 16384;  // per batch
  int max_seqs = 512;      // per batch
  // Pooling spans per batch (late chunking; Batch::pool_spans): sizes the span buffer and the
  // result rows. Span counts are padded to a power of two like sequence counts (graph key).
  int max_rows = 2048;
  int ring_slots = 4;  // batches in flight: un-waited handles; see ResultSlotsFor
  // Whole-model CUDA graphs, keyed by (sequence bucket, token bucket, longest-sequence bucket:
  // a power of two, at least token_bucket_small, which attention backends may size their launch
  // by). Token counts are padded
  // up to a multiple of token_bucket_small, or of token_bucket_large above bucket_threshold;
  // sequence counts up to a power of two. A configuration runs eagerly on first use, is captured
  // on its second, and replayed after that; at most max_graphs are kept (least recently used
  // evicted). use_graphs=false runs every batch eagerly (still padded to its bucket).
  bool use_graphs = true;
  int token_bucket_small = 64;
  int token_bucket_large = 256;
  int bucket_threshold = 1024;
  int max_graphs = 256;
  // Ragged attention backend: "auto" times Petal's flash kernel and cuDNN's fused attention at
  // first use per (sequences, longest-sequence) bucket and keeps the faster; "flash" or
  // "cudnn" force one ("cudnn" falls back to flash where cuDNN refuses a shape).
  std::string attention = "auto";
  // "none" (bf16) or "fp8": e4m3 dense layers on batches of >= fp8_min_tokens tokens (Qwen3 models
  // only; see cuda_model.h's Capacity), checked at start-up against the bf16 path (fp8_gate.h)
  // unless fp8_gate is false.
  std::string quantize = "none";
  int fp8_min_tokens = 2048;       // raised to kFp8MinM (gemm.h) if lower
  std::string fp8_layers = "all";  // "all" (QKV, O, gate/up, down) or "mlp" (gate/up, down)
  bool fp8_gate = true;
  // --fp8-scales DIR (with quantize "fp8"): static per-tensor activation scales from
  // DIR/fp8_scales.json (petal calibrate; model/fp8_scales.h) instead of per-token ones; a file
  // calibrated on another model is refused. "" = dynamic scales.
  std::string fp8_scales;
  // petal calibrate: each Step() runs the bf16 path eagerly (no graphs, no fp8) and reports every
  // fp8 GEMM input's per-token maxima (padding excluded) to the observer before returning. Not
  // owned. Set through EngineOptions::observer.
  ActivationObserver* observer = nullptr;
  // Sparse (SPLADE) models: tokens per chunk of the MLM logits (Capacity::sparse_chunk_tokens;
  // 0 = ~128 MiB of bf16 logits per chunk). Tests set it low to cross chunk edges.
  int sparse_chunk_tokens = 0;
};

// Result slots (ring_slots) an engine needs for a caller that holds up to `max_inflight`
// un-waited handles at once (the server's --max-inflight-batches): one per handle, at least the
// default 4. With fewer, Step() fails with RESOURCE_EXHAUSTED once they are all held.
inline int ResultSlotsFor(int max_inflight) { return max_inflight > 4 ? max_inflight : 4; }

// Creates the CUDA engine for a model folder; Unavailable if no device or not compiled with CUDA.
StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const std::string& model_dir,
                                                   const CudaEngineOptions& options);
// True if this binary has the CUDA backend and a device is visible.
bool CudaAvailable();
// Devices visible to this process (CUDA_VISIBLE_DEVICES applies); 0 without CUDA.
int CudaDeviceCount();
// The device's name (e.g. "NVIDIA H200"), or "none".
std::string CudaDeviceName(int device);
// Free and total memory of `device` (cudaMemGetInfo); Unavailable without CUDA or a device.
Status CudaMemoryInfo(int device, uint64_t* free_bytes, uint64_t* total_bytes);
// Resets this process's context on `device` (cudaDeviceReset), clearing a sticky CUDA error:
// every allocation, stream and graph of the process on that device is gone, so only its sole user
// may call this, after destroying its engine. Unavailable without CUDA.
Status ResetCudaDevice(int device);

}  // namespace petal
