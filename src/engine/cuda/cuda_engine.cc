#include "engine/cuda/cuda_engine_impl.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <string>

#include "common/recycler.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/score_ops.h"
#include "model/fp8_scales.h"
#include "model/multivector.h"
#include "model/router_folder.h"

namespace petal {
namespace cuda {

Status CheckCuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + cudaGetErrorString(err));
}

// The handle returned by Step(): owns a ring slot until the result has been copied out.
class PendingSlot final : public PendingEmbeddings {
 public:
  // One handle per Step: its block comes from a free list, not malloc (issue 29).
  static void* operator new(size_t n) {
    return n == sizeof(PendingSlot) ? RecyclingAllocator<PendingSlot>().allocate(1)
                                    : ::operator new(n);
  }
  static void operator delete(void* p, size_t n) noexcept {
    if (n == sizeof(PendingSlot)) {
      RecyclingAllocator<PendingSlot>().deallocate(static_cast<PendingSlot*>(p), 1);
    } else {
      ::operator delete(p);
    }
  }

  PendingSlot(RingSlot* slot, int rows, int dim, int max_rows, bool sparse)
      : slot_(slot), rows_(rows), dim_(dim), max_rows_(max_rows), sparse_(sparse) {}
  ~PendingSlot() override {
    if (slot_) Release();
  }
  bool Ready() override { return !slot_ || cudaEventQuery(slot_->done) != cudaErrorNotReady; }
  StatusOr<Embeddings> Wait() override {
    if (!slot_) return FailedPrecondition("result already taken");
    Status s = CheckCuda(cudaEventSynchronize(slot_->done), "waiting for the forward pass");
    if (!s.ok()) {
      Release();
      return s;
    }
    Embeddings e;
    e.rows = rows_;
    e.dim = dim_;
    if (sparse_) {  // row r's entries start at r * dim in host_sparse (after the counts) / host_out
      e.SetSparseRows(slot_->host_sparse, slot_->host_sparse + max_rows_, slot_->host_out, dim_);
    } else {
      e.data = TakeRowBuffer();
      e.data.assign(slot_->host_out, slot_->host_out + static_cast<size_t>(rows_) * dim_);
    }
    Release();
    return e;
  }

 private:
  void Release() {
    // The slot may be reused only once the GPU is done with it; synchronising here is cheap
    // because Wait() already did, and a dropped handle must not let the ring overwrite a copy
    // still in flight.
    cudaEventSynchronize(slot_->done);
    slot_->busy.store(false, std::memory_order_release);
    slot_ = nullptr;
  }
  RingSlot* slot_;
  int rows_, dim_, max_rows_;
  bool sparse_;
};

CudaEngine::~CudaEngine() {
  if (stream_) cudaStreamSynchronize(stream_);
  for (auto& s : slots_) {
    if (s.done) cudaEventDestroy(s.done);
    if (s.host_in) cudaFreeHost(s.host_in);
    if (s.host_out) cudaFreeHost(s.host_out);
    if (s.host_sparse) cudaFreeHost(s.host_sparse);
  }
  if (dev_inputs_) cudaFree(dev_inputs_);
  if (dev_pooled_) cudaFree(dev_pooled_);
  model_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

Status CudaEngine::Init(const std::string& model_dir, const CudaEngineOptions& opt) {
  options_ = opt;
  PETAL_RETURN_IF_ERROR(CheckCuda(cudaSetDevice(opt.device), "cudaSetDevice"));
  PETAL_ASSIGN_OR_RETURN(config_, LoadModelConfig(model_dir));
  multivector_ = config_.task == ModelTask::kMultiVector;
  sparse_ = config_.task == ModelTask::kSparse;
  // Key lengths only where expansion tokens must not be attended to: they keep cuDNN out.
  multivector_keys_ = multivector_ && !config_.multivector.attend_to_expansion_tokens &&
                      config_.multivector.mask_token_id >= 0;
  PETAL_ASSIGN_OR_RETURN(auto store, WeightStore::Open(TransformerDir(model_dir)));
  PETAL_RETURN_IF_ERROR(
      CheckCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream"));
  // Sequence capacity: the caller's sequences, the dummy sequence that owns bucket padding, and
  // the round-up of the sequence bucket to a power of two.
  int seq_cap = 1;
  while (seq_cap < opt.max_seqs + 1) seq_cap *= 2;
  int row_cap = 1;
  while (row_cap < std::max(1, opt.max_rows)) row_cap *= 2;
  buckets_ = BucketPolicy{opt.token_bucket_small,
                          opt.token_bucket_large,
                          opt.bucket_threshold,
                          opt.max_tokens,
                          seq_cap,
                          row_cap};
  // petal calibrate (an observer): the bf16 path, eagerly, so that every batch is reported.
  if (opt.observer != nullptr && opt.quantize != "none")
    return InvalidArgument("calibration runs the bf16 path: --quantize must be none");
  graphs_ = std::make_unique<GraphCache>(opt.max_graphs, opt.use_graphs && !opt.observer);
  Capacity cap{opt.max_tokens, seq_cap, AttentionMode::kAuto};
  cap.sparse_chunk_tokens = opt.sparse_chunk_tokens;
  if (opt.attention == "flash") {
    cap.attention = AttentionMode::kFlash;
  } else if (opt.attention == "cudnn") {
    cap.attention = AttentionMode::kCudnn;
  } else if (opt.attention != "auto") {
    return InvalidArgument("attention must be auto, flash or cudnn, not '" + opt.attention + "'");
  }
  if (opt.quantize == "fp8") {
    if (config_.architecture != Architecture::kQwen3)
      return InvalidArgument(std::string("--quantize fp8 is implemented for Qwen3 models, not ") +
                             ArchitectureName(config_.architecture));
    if (opt.fp8_min_tokens < 0) return InvalidArgument("--fp8-min-tokens must be >= 0");
    if (opt.fp8_layers != "all" && opt.fp8_layers != "mlp")
      return InvalidArgument("--fp8-layers must be all or mlp, not '" + opt.fp8_layers + "'");
    cap.fp8 = true;
    // cuBLASLt's fp8 GEMMs are only trusted from kFp8MinM rows up (gemm.h): smaller batches keep
    // the bf16 path whatever the option says.
    cap.fp8_min_tokens = std::max(opt.fp8_min_tokens, kFp8MinM);
    cap.fp8_mlp_only = opt.fp8_layers == "mlp";
    if (!opt.fp8_scales.empty()) {
      PETAL_ASSIGN_OR_RETURN(const Fp8Scales scales,
                             LoadFp8ScalesFor(opt.fp8_scales, config_, *store));
      cap.fp8_static_scales = scales.DequantScales();
      std::fprintf(stderr,
                   "[engine] fp8 static activation scales from %s/%s (%s over %lld tokens of "
                   "%lld texts, %s engine)\n",
                   opt.fp8_scales.c_str(), kFp8ScalesFile, scales.statistic.c_str(),
                   static_cast<long long>(scales.tokens), static_cast<long long>(scales.texts),
                   scales.backend.c_str());
    }
  } else if (opt.quantize != "none") {
    return InvalidArgument("quantize must be none or fp8, not '" + opt.quantize + "'");
  }
  if (!opt.fp8_scales.empty() && !cap.fp8)
    return InvalidArgument("--fp8-scales needs --quantize fp8");
  PETAL_ASSIGN_OR_RETURN(model_, CreateCudaModel(config_, *store, cap));
  if (opt.observer != nullptr) PETAL_RETURN_IF_ERROR(model_->EnableCalibration());
  if (cap.fp8 && opt.fp8_gate) {
    const int max_len =
        config_.max_seq_length > 0 ? config_.max_seq_length : config_.max_position_embeddings;
    PETAL_ASSIGN_OR_RETURN(fp8_gate_, RunFp8Gate(*model_, cap, max_len, stream_));
    std::fprintf(stderr,
                 "[engine] fp8 fidelity gate: worst cosine %.6f against the bf16 path over %d "
                 "sequences (%d tokens); threshold %.3f\n",
                 fp8_gate_.min_cosine, fp8_gate_.sequences, fp8_gate_.tokens, kFp8GateMinCosine);
    if (!(fp8_gate_.min_cosine >= kFp8GateMinCosine))
      return FailedPrecondition("--quantize fp8: fidelity gate failed: worst cosine " +
                                std::to_string(fp8_gate_.min_cosine) +
                                " against the bf16 path is below 0.999; serve with --quantize "
                                "none (or --no-fp8-gate to override)");
  }

  // Device inputs: token ids, token type ids, cu_seqlens, num_seqs, in one allocation.
  const size_t in_ints = InputInts();
  PETAL_RETURN_IF_ERROR(
      CheckCuda(cudaMalloc(&dev_inputs_, in_ints * sizeof(int32_t)), "cudaMalloc inputs"));
  PETAL_RETURN_IF_ERROR(CheckCuda(cudaMemset(dev_inputs_, 0, in_ints * sizeof(int32_t)), "memset"));
  // Rows of hidden_size floats (embedders) or of OutputDim() logits (a classifier may have more
  // labels than hidden dimensions).
  // Multi-vector models: one row per token. Sparse models: one vocabulary-sized row per sequence
  // (no spans), so not row_cap rows of it; only the real rows (max_seqs) leave the device, as
  // entries: each slot holds room for all of their values (host_out) and indices (host_sparse,
  // after max_seqs counts), the worst case of every entry non-zero, and nothing more on the device.
  const int out_rows =
      std::max({seq_cap, sparse_ ? 0 : row_cap, multivector_ ? opt.max_tokens : 0});
  const size_t out_floats =
      static_cast<size_t>(out_rows) * std::max(config_.hidden_size, config_.OutputDim());
  PETAL_RETURN_IF_ERROR(
      CheckCuda(cudaMalloc(&dev_pooled_, out_floats * sizeof(float)), "cudaMalloc pooled"));
  const size_t entries = static_cast<size_t>(opt.max_seqs) * config_.OutputDim();
  const size_t host_floats = sparse_ ? entries : out_floats;
  const unsigned host_flags = sparse_ ? cudaHostAllocMapped : cudaHostAllocDefault;
  slots_ = std::vector<RingSlot>(std::max(1, opt.ring_slots));
  for (auto& s : slots_) {
    PETAL_RETURN_IF_ERROR(CheckCuda(cudaHostAlloc(reinterpret_cast<void**>(&s.host_in),
                                                  in_ints * sizeof(int32_t), cudaHostAllocDefault),
                                    "cudaHostAlloc staging"));
    PETAL_RETURN_IF_ERROR(CheckCuda(cudaHostAlloc(reinterpret_cast<void**>(&s.host_out),
                                                  host_floats * sizeof(float), host_flags),
                                    "cudaHostAlloc output"));
    if (sparse_) {
      PETAL_RETURN_IF_ERROR(
          CheckCuda(cudaHostAlloc(reinterpret_cast<void**>(&s.host_sparse),
                                  (opt.max_seqs + entries) * sizeof(int32_t), cudaHostAllocMapped),
                    "cudaHostAlloc sparse indices"));
      PETAL_RETURN_IF_ERROR(CheckCuda(
          cudaHostGetDevicePointer(reinterpret_cast<void**>(&s.dev_values), s.host_out, 0),
          "cudaHostGetDevicePointer values"));
      PETAL_RETURN_IF_ERROR(CheckCuda(
          cudaHostGetDevicePointer(reinterpret_cast<void**>(&s.dev_sparse), s.host_sparse, 0),
          "cudaHostGetDevicePointer indices"));
    }
    PETAL_RETURN_IF_ERROR(
        CheckCuda(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming), "event"));
  }
  return CheckCuda(cudaStreamSynchronize(stream_), "initial upload");
}

size_t CudaEngine::InputInts() const {
  // token ids + token type ids + cu_seqlens + num_seqs + pooling spans + key lengths + top-k
  return 2 * static_cast<size_t>(options_.max_tokens) + buckets_.max_seqs + 1 + 1 +
         static_cast<size_t>(Batch::kSpanInts) * buckets_.max_rows + 2 * buckets_.max_seqs;
}

StatusOr<std::unique_ptr<PendingEmbeddings>> CudaEngine::Step(const Batch& batch) {
  PETAL_RETURN_IF_ERROR(batch.Validate(config_.vocab_size, config_.max_position_embeddings));
  if (batch.num_tokens() > options_.max_tokens || batch.num_seqs() > options_.max_seqs) {
    return InvalidArgument(
        "batch of " + std::to_string(batch.num_seqs()) + " sequences / " +
        std::to_string(batch.num_tokens()) + " tokens exceeds the engine capacity of " +
        std::to_string(options_.max_seqs) + " / " + std::to_string(options_.max_tokens));
  }
  if (!batch.pool_spans.empty()) {
    if (config_.HasHead())
      return InvalidArgument(
          "pool spans are for embedding models, not ranking models or classifiers");
    if (batch.num_spans() > buckets_.max_rows)
      return InvalidArgument("batch of " + std::to_string(batch.num_spans()) +
                             " pooling spans exceeds the engine capacity of " +
                             std::to_string(buckets_.max_rows));
  }
  RingSlot& slot = slots_[next_slot_];
  next_slot_ = (next_slot_ + 1) % slots_.size();
  // A slot still held by an un-waited handle: wait for its GPU work, then it is ours once the
  // holder copies out. Holding more handles than slots is a caller bug; fail clearly.
  if (slot.busy.load(std::memory_order_acquire)) {
    return ResourceExhausted("all " + std::to_string(slots_.size()) +
                             " result slots are held by handles that were not waited on");
  }
  slot.busy.store(true, std::memory_order_relaxed);

  // Pad to the (sequence, token) bucket: padding tokens form one dummy sequence whose output is
  // dropped, and the sequence count is padded with empty sequences.
  const int T = batch.num_tokens(), S = batch.num_seqs();
  const int T_pad = buckets_.PadTokens(T);
  const int S_pad = buckets_.PadSeqs(S + (T_pad > T ? 1 : 0));
  int longest = T_pad - T;  // the dummy padding sequence
  for (int i = 0; i < S; ++i) {
    longest = std::max(longest, batch.cu_seqlens[i + 1] - batch.cu_seqlens[i]);
  }
  const int L_pad = buckets_.PadMaxLen(longest, T_pad);
  const int P = batch.num_spans(), P_pad = buckets_.PadSpans(P);  // 0 without spans
  ++batches_;
  real_tokens_ += T;
  padded_tokens_ += T_pad;

  // Stage the inputs in page-locked memory so the copy to the device is truly asynchronous.
  int32_t* h = slot.host_in;
  std::memcpy(h, batch.token_ids.data(), T * sizeof(int32_t));
  std::memset(h + T, 0, (T_pad - T) * sizeof(int32_t));
  int32_t* h_types = h + options_.max_tokens;
  if (batch.token_type_ids.empty()) {
    std::memset(h_types, 0, T_pad * sizeof(int32_t));
  } else {
    std::memcpy(h_types, batch.token_type_ids.data(), T * sizeof(int32_t));
    std::memset(h_types + T, 0, (T_pad - T) * sizeof(int32_t));
  }
  int32_t* h_cu = h_types + options_.max_tokens;
  std::memcpy(h_cu, batch.cu_seqlens.data(), (S + 1) * sizeof(int32_t));
  for (int i = S + 1; i <= S_pad; ++i) h_cu[i] = T_pad;
  int32_t* h_num = h_cu + buckets_.max_seqs + 1;
  *h_num = S_pad;
  // Pooling spans, padded with empty spans (zero rows, dropped) up to their bucket.
  int32_t* h_spans = h_num + 1;
  const size_t span_ints = static_cast<size_t>(Batch::kSpanInts) * P_pad;
  if (P > 0) {
    std::memcpy(h_spans, batch.pool_spans.data(), batch.pool_spans.size() * sizeof(int32_t));
    std::memset(h_spans + batch.pool_spans.size(), 0,
                (span_ints - batch.pool_spans.size()) * sizeof(int32_t));
  }

  // Multi-vector models: key lengths per sequence (0 = every key; padding sequences 0), always
  // passed so that every captured graph reads them.
  int32_t* h_keys = h_spans + static_cast<size_t>(Batch::kSpanInts) * buckets_.max_rows;
  if (multivector_keys_) {
    const std::vector<int32_t> keys = MultiVectorKeyLengths(config_, batch);
    std::memset(h_keys, 0, S_pad * sizeof(int32_t));
    if (!keys.empty()) std::memcpy(h_keys, keys.data(), S * sizeof(int32_t));
  }

  int32_t* d = dev_inputs_;
  int32_t* d_types = d + options_.max_tokens;
  int32_t* d_cu = d_types + options_.max_tokens;
  int32_t* d_num = d_cu + buckets_.max_seqs + 1;
  int32_t* d_spans = d_num + 1;
  int32_t* d_keys = d_spans + static_cast<size_t>(Batch::kSpanInts) * buckets_.max_rows;
  int32_t* h_top_k = h_keys + buckets_.max_seqs;  // sparse models: Batch::sparse_top_k
  int32_t* d_top_k = d_keys + buckets_.max_seqs;
  const bool top_k = sparse_ && !batch.sparse_top_k.empty();
  if (top_k) std::memcpy(h_top_k, batch.sparse_top_k.data(), S * sizeof(int32_t));
  auto copy = [&](int32_t* dst, const int32_t* src, size_t n) {
    return CheckCuda(
        cudaMemcpyAsync(dst, src, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_), "H2D");
  };
  Status s = copy(d, h, T_pad);
  if (s.ok()) s = copy(d_types, h_types, T_pad);
  if (s.ok()) s = copy(d_cu, h_cu, S_pad + 1);
  if (s.ok()) s = copy(d_num, h_num, 1);
  if (s.ok() && P > 0) s = copy(d_spans, h_spans, span_ints);
  if (s.ok() && multivector_keys_) s = copy(d_keys, h_keys, S_pad);
  if (s.ok() && top_k) s = copy(d_top_k, h_top_k, S);
  DeviceBatch db{d, d_types, d_cu, d_num, T_pad, S_pad, L_pad, d_spans, P_pad};
  if (multivector_keys_) db.key_lengths = d_keys;
  if (s.ok()) {
    profile_.Before();
    s = graphs_->Run({S_pad, T_pad, L_pad, P_pad}, stream_,
                     [&] { return model_->Forward(db, dev_pooled_, stream_); });
    profile_.After();
  }
  // Embedders return [S, hidden] pooled rows (with spans: [P, hidden]); ranking models and
  // classifiers [S, score_outputs] logits.
  // Multi-vector models: [T, OutputDim()], one row per real token (padding tokens come last).
  // Sparse models: the real rows compacted straight into the slot's mapped host memory (outside
  // the graph: a captured graph would bake in one slot's addresses), no dense copy.
  const int rows = multivector_ ? T : batch.num_rows();
  const size_t out_n = static_cast<size_t>(rows) * config_.OutputDim();
  if (s.ok() && sparse_) {
    SparseCompactParams cp;
    cp.dense = dev_pooled_;
    cp.ld = cp.vocab = config_.OutputDim();
    cp.rows = rows;
    cp.top_k = top_k ? d_top_k : nullptr;
    cp.stride = cp.vocab;
    cp.counts = slot.dev_sparse;
    cp.indices = slot.dev_sparse + options_.max_seqs;
    cp.values = slot.dev_values;
    s = LaunchSparseCompact(cp, stream_);
  } else if (s.ok()) {
    s = CheckCuda(cudaMemcpyAsync(slot.host_out, dev_pooled_, out_n * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_),
                  "D2H");
  }
  if (s.ok()) s = CheckCuda(cudaEventRecord(slot.done, stream_), "event record");
  if (s.ok() && options_.observer != nullptr) {  // petal calibrate: real tokens only
    s = CheckCuda(cudaStreamSynchronize(stream_), "calibration sync");
    if (s.ok()) s = model_->ReportCalibration(T, options_.observer);
  }
  if (!s.ok()) {
    slot.busy.store(false, std::memory_order_release);
    return s;
  }
  return std::unique_ptr<PendingEmbeddings>(
      new PendingSlot(&slot, rows, config_.OutputDim(), options_.max_seqs, sparse_));
}

std::map<std::string, double> CudaEngine::Stats() const {
  auto st = graphs_->Stats();
  for (const auto& [k, v] : model_->Stats()) st[k] = v;
  st["batches"] = double(batches_);
  st["tokens"] = double(real_tokens_);
  st["padded_tokens"] = double(padded_tokens_);
  st["device_bytes"] = double(model_->DeviceBytes());
  if (model_->fp8_enabled()) {
    st["fp8_min_tokens"] = double(std::max(options_.fp8_min_tokens, kFp8MinM));
    if (options_.fp8_gate) st["fp8_gate_min_cosine"] = fp8_gate_.min_cosine;
    st["fp8_static_scales"] = options_.fp8_scales.empty() ? 0.0 : 1.0;
  }
  return st;
}

}  // namespace cuda

StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const std::string& model_dir,
                                                   const CudaEngineOptions& options) {
  if (!CudaAvailable()) return Unavailable("no CUDA device is visible");
  std::unique_ptr<cuda::CudaEngine> e(new cuda::CudaEngine());
  PETAL_RETURN_IF_ERROR(e->Init(model_dir, options));
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace petal
