#include "engine/cpu_engine.h"

#include <dnnl.h>

#include <cstdio>

#include "engine/cpu_precision_gate.h"
#include "kernels/cpu/cpu_bf16_gemm.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_threads.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/span_pool.h"
#include "model/cpu_fast.h"
#include "model/router_folder.h"

namespace petal {

StatusOr<std::unique_ptr<CpuEngine>> CpuEngine::Load(const std::string& model_dir,
                                                     const CpuEngineOptions& options,
                                                     ActivationObserver* observer) {
  std::unique_ptr<CpuEngine> e(new CpuEngine());
  e->observer_ = observer;
  PETAL_ASSIGN_OR_RETURN(e->config_, LoadModelConfig(model_dir));
  PETAL_ASSIGN_OR_RETURN(e->weights_, WeightStore::Open(TransformerDir(model_dir)));
  const cpu::CpuFeatures& f = cpu::DetectCpuFeatures();
  e->threads_ = cpu::ResolveCpuThreads(options.threads);
  const std::string threads = cpu::ConfigureCpuThreads(e->threads_);
  std::string want = options.precision;
  std::string note;
  bool gate = false;  // "auto" on a bf16 CPU: bf16 if it passes the fidelity gate, else fp32
  std::string why_not_bf16;
  if (observer != nullptr) {
    want = "reference";  // calibration observes the fp32 reference forward (model.h)
  } else if (want == "auto") {
    if (f.BestIsa() == "generic") {
      want = "reference";
    } else {
      gate = cpu::HaveBf16Gemm(&why_not_bf16);
      want = gate ? "bf16" : "fp32";
    }
  } else if (want == "bf16" && !cpu::HaveBf16Gemm(&why_not_bf16)) {
    return FailedPrecondition("--cpu-precision bf16: " + why_not_bf16);
  } else if (want != "reference" && f.BestIsa() == "generic") {
    note = " (" + want + " asked; this CPU has no AVX2, so the reference runs)";
    want = "reference";
  }
  if (gate) {
    // Candidate and fp32 reference side by side, the reference freed after the probe batch.
    auto bf16 = LoadFastCpuModel(e->config_, *e->weights_, cpu::CpuPrecision::kBf16);
    std::string refused;
    if (!bf16.ok()) {
      refused = bf16.status().message();
    } else {
      PETAL_ASSIGN_OR_RETURN(std::unique_ptr<CpuModel> ref, LoadCpuModel(e->config_, *e->weights_));
      PETAL_ASSIGN_OR_RETURN(e->gate_, RunCpuFidelityGate(**bf16, *ref));
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "worst cosine %.6f against the fp32 reference over %d probe sequences (%d "
                    "tokens), threshold %.6f",
                    e->gate_.min_cosine, e->gate_.sequences, e->gate_.tokens,
                    options.bf16_min_cosine);
      if (e->gate_.min_cosine >= options.bf16_min_cosine) {
        e->model_ = std::move(*bf16);
        note = std::string(" (auto: bf16 passed the fidelity gate, ") + buf + ")";
      } else {
        refused = std::string("the fidelity gate failed: ") + buf;
      }
    }
    if (!refused.empty()) {
      std::fprintf(stderr, "[engine] cpu precision auto: fp32, not bf16: %s\n", refused.c_str());
      note = " (auto: bf16 refused: " + refused + ")";
      want = "fp32";
    }
  }
  if (want == "reference") {
    PETAL_ASSIGN_OR_RETURN(e->model_, LoadCpuModel(e->config_, *e->weights_));
    e->path_ = "reference";
    e->describe_ = "cpu path: fp32 reference (OpenBLAS)" + note;
  } else {
    PETAL_ASSIGN_OR_RETURN(cpu::CpuPrecision p, cpu::ParseCpuPrecision(want));
    if (!e->model_) {
      PETAL_ASSIGN_OR_RETURN(e->model_, LoadFastCpuModel(e->config_, *e->weights_, p));
    }
    const dnnl_version_t* v = dnnl_version();
    e->path_ = want;
    e->describe_ = "cpu path: fast " + want + " (oneDNN " + std::to_string(v->major) + "." +
                   std::to_string(v->minor) + "." + std::to_string(v->patch) + " GEMMs)" + note;
  }
  if (e->config_.task == ModelTask::kMultiVector) {
    PETAL_ASSIGN_OR_RETURN(TokenProjection p, TokenProjection::Load(e->config_));
    e->projection_ = std::move(p);
  }
  e->describe_ += "; threads: " + threads + "; cpu: " + f.Describe();
  return e;
}

StatusOr<std::unique_ptr<PendingEmbeddings>> CpuEngine::Step(const Batch& batch) {
  PETAL_RETURN_IF_ERROR(batch.Validate(config_.vocab_size, config_.max_position_embeddings));
  const bool score = config_.HasHead();
  if (score && !batch.pool_spans.empty())
    return InvalidArgument(
        "pool spans are for embedding models, not ranking models or classifiers");
  cpu::EnterCpuThreads(threads_);  // OpenMP's count is per thread: Step may run on another one
  std::vector<float> hidden;
  Embeddings out;
  if (config_.task == ModelTask::kMultiVector) {
    // One row per token: the Dense projection of its final state, L2-normalised. Query
    // expansion tokens (a trailing run of mask tokens) are no token's keys unless the model
    // attends to them.
    if (!batch.pool_spans.empty())
      return InvalidArgument("pool spans are for embedding models, not multi-vector models");
    std::vector<int32_t> keys = MultiVectorKeyLengths(config_, batch);
    if (keys.empty()) {
      PETAL_RETURN_IF_ERROR(model_->ForwardObserved(batch, &hidden, observer_));
    } else {
      Batch b = batch;
      b.key_lengths = std::move(keys);
      PETAL_RETURN_IF_ERROR(model_->ForwardObserved(b, &hidden, observer_));
    }
    out.rows = batch.num_tokens();
    out.dim = projection_->out_dim();
    out.data.resize(static_cast<size_t>(out.rows) * out.dim);
    projection_->Apply(hidden.data(), out.rows, out.data.data());
    return std::unique_ptr<PendingEmbeddings>(new ReadyEmbeddings(std::move(out)));
  }
  PETAL_RETURN_IF_ERROR(model_->ForwardObserved(batch, &hidden, observer_));
  if (config_.task == ModelTask::kSparse) {
    // SPLADE: one vocabulary-sized row per sequence, max-pooled over its tokens, answered as
    // its non-zero entries (the sparse form, as the CUDA engine's), each row's top-k if asked.
    std::vector<float> dense(static_cast<size_t>(batch.num_seqs()) * config_.vocab_size);
    if (!dense.empty())
      PETAL_RETURN_IF_ERROR(model_->SparsePool(batch, hidden.data(), dense.data()));
    return std::unique_ptr<PendingEmbeddings>(new ReadyEmbeddings(Embeddings::SparseFromDense(
        dense.data(), batch.num_seqs(), config_.vocab_size,
        batch.sparse_top_k.empty() ? nullptr : batch.sparse_top_k.data())));
  }
  if (!batch.pool_spans.empty()) {
    // One row per span, pooled and normalised as each span's flags say.
    out.rows = batch.num_spans();
    out.dim = config_.hidden_size;
    out.data.resize(static_cast<size_t>(out.rows) * out.dim);
    cpu::PoolSpans(hidden.data(), batch.pool_spans.data(), out.rows, out.dim, out.data.data());
    return std::unique_ptr<PendingEmbeddings>(new ReadyEmbeddings(std::move(out)));
  }
  out.rows = batch.num_seqs();
  out.dim = config_.hidden_size;
  out.data.resize(static_cast<size_t>(out.rows) * out.dim);
  cpu::Pool(hidden.data(), batch.cu_seqlens.data(), out.rows, out.dim,
            static_cast<cpu::Pooling>(config_.pooling), config_.normalize && !score,
            out.data.data());
  if (score) {
    // Ranking model or classifier: the head turns each pooled state into score_outputs logits.
    std::vector<float> logits(static_cast<size_t>(out.rows) * config_.score_outputs);
    if (out.rows > 0)
      PETAL_RETURN_IF_ERROR(model_->Score(out.data.data(), out.rows, logits.data()));
    out.dim = config_.score_outputs;
    out.data = std::move(logits);
  }
  return std::unique_ptr<PendingEmbeddings>(new ReadyEmbeddings(std::move(out)));
}

}  // namespace petal
