#include "engine/cuda/attention_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/attention_internal.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/ops.h"

namespace petal::cuda {
namespace {

// cuDNN's fused attention needs little or no workspace for inference; plans wanting more than
// this are treated as unsupported, so the buffer never moves under a captured graph.
constexpr size_t kCudnnWorkspaceBytes = 32u << 20;
constexpr int kTimingReps = 3;

Status Check(cudaError_t e, const char* what) {
  return e == cudaSuccess ? Status::Ok()
                          : Internal(std::string(what) + ": " + cudaGetErrorString(e));
}

const char* Name(AttentionRunner::Backend b) {
  switch (b) {
    case AttentionRunner::Backend::kFlash:
      return "petal-flash";
    case AttentionRunner::Backend::kCudnn:
      return "cudnn";
    default:
      return "reference";
  }
}

}  // namespace

AttentionRunner::AttentionRunner() = default;
AttentionRunner::~AttentionRunner() = default;

Status AttentionRunner::Init(const Capacity& cap, int head_dim) {
  mode_ = cap.attention;
  const char* tv = std::getenv("PETAL_ATTN_VARIANTS");
  tune_variants_ = tv != nullptr && std::string(tv) == "1";
  flash_ = head_dim == 32 || head_dim == 64 || head_dim == 128;
  if (!flash_) return Status::Ok();  // the reference kernel needs nothing
  PETAL_RETURN_IF_ERROR(workspace_.Allocate(AttentionWorkspaceBytes(cap.max_tokens, cap.max_seqs)));
  if (mode_ == AttentionMode::kFlash) return Status::Ok();
  auto created = CudnnAttention::Create(nullptr);
  if (!created.ok()) {
    cudnn_unavailable_ = created.status().message();
    if (mode_ == AttentionMode::kCudnn) {
      std::fprintf(stderr, "petal: --attention cudnn: %s; using petal-flash\n",
                   cudnn_unavailable_.c_str());
    }
    return Status::Ok();
  }
  cudnn_ = std::move(created).value();
  PETAL_RETURN_IF_ERROR(cudnn_meta_storage_.Allocate(CudnnAttentionMetaBytes(cap.max_seqs)));
  cudnn_meta_ = CarveCudnnAttentionMeta(cudnn_meta_storage_.get(), cap.max_seqs);
  return Status::Ok();
}

AttentionRunner::ShapeKey AttentionRunner::KeyOf(const AttentionParams& p) {
  return {p.max_seqs, p.max_seqlen, p.num_heads, p.num_kv_heads, p.head_dim, p.causal};
}

Status AttentionRunner::Plan(const AttentionParams& p, cudaStream_t stream) {
  if (!flash_) return Status::Ok();
  if (p.kv_lens != nullptr) return PlanRaggedAttention(p, workspace_.get(), stream);  // flash only
  auto it = choices_.find(KeyOf(p));
  const bool known = it != choices_.end();
  if (!known) {
    PETAL_RETURN_IF_ERROR(PlanRaggedAttention(p, workspace_.get(), stream));
  } else if (it->second.backend == Backend::kFlash) {
    const int v = it->second.variant >= 0 ? it->second.variant : DefaultFlashVariant(p);
    PETAL_RETURN_IF_ERROR(PlanRaggedAttentionVariant(p, v, workspace_.get(), stream));
  }
  if (cudnn_ && (!known || it->second.backend == Backend::kCudnn)) {
    PETAL_RETURN_IF_ERROR(LaunchCudnnAttentionMeta(p, cudnn_meta_, stream));
  }
  return Status::Ok();
}

Status AttentionRunner::EnsureCudnnWorkspace() {
  if (cudnn_->WorkspaceBytes() > kCudnnWorkspaceBytes) {
    return ResourceExhausted("cuDNN wants " + std::to_string(cudnn_->WorkspaceBytes()) +
                             " bytes of workspace");
  }
  if (cudnn_->WorkspaceBytes() > 0 && cudnn_workspace_.bytes() == 0) {
    PETAL_RETURN_IF_ERROR(cudnn_workspace_.Allocate(kCudnnWorkspaceBytes));
  }
  return Status::Ok();
}

Status AttentionRunner::RunWith(Backend b, const AttentionParams& p, cudaStream_t stream,
                                int variant) {
  switch (b) {
    case Backend::kFlash:
      if (variant >= 0) return RunRaggedAttentionVariant(p, variant, workspace_.get(), stream);
      return RunRaggedAttention(p, workspace_.get(), stream);
    case Backend::kCudnn:
      return cudnn_->Run(p, p.max_seqlen > 0 ? p.max_seqlen : p.max_tokens, cudnn_meta_,
                         cudnn_workspace_.get(), stream);
    default:
      return LaunchReferenceAttention(p, stream);
  }
}

template <class F>
StatusOr<double> AttentionRunner::TimeRuns(F&& f, cudaStream_t stream) {
  cudaEvent_t ev[2];
  PETAL_CUDA_CHECK(cudaEventCreate(&ev[0]));
  PETAL_CUDA_CHECK(cudaEventCreate(&ev[1]));
  Status s = f();  // warm-up (module load, caches)
  if (s.ok()) s = Check(cudaEventRecord(ev[0], stream), "event");
  for (int r = 0; r < kTimingReps && s.ok(); ++r) s = f();
  if (s.ok()) s = Check(cudaEventRecord(ev[1], stream), "event");
  if (s.ok()) s = Check(cudaEventSynchronize(ev[1]), "event sync");
  float t = 0;
  if (s.ok()) s = Check(cudaEventElapsedTime(&t, ev[0], ev[1]), "elapsed");
  cudaEventDestroy(ev[0]);
  cudaEventDestroy(ev[1]);
  if (!s.ok()) return s;
  return static_cast<double>(t) / kTimingReps;
}

StatusOr<int> AttentionRunner::ChooseFlashVariant(const AttentionParams& p, cudaStream_t stream,
                                                  double* ms, double* default_ms) {
  const int def = DefaultFlashVariant(p);
  const int group = p.num_kv_heads > 0 ? p.num_heads / p.num_kv_heads : 0;
  int best = def;
  *ms = *default_ms = -1;
  for (int v = 0; v < FlashVariantCount(p.head_dim); ++v) {
    if (v != def && (!tune_variants_ || !FlashVariantSupports(p.head_dim, v, group))) continue;
    PETAL_RETURN_IF_ERROR(PlanRaggedAttentionVariant(p, v, workspace_.get(), stream));
    PETAL_ASSIGN_OR_RETURN(
        double t,
        TimeRuns([&] { return RunRaggedAttentionVariant(p, v, workspace_.get(), stream); },
                 stream));
    if (v == def) *default_ms = t;
    if (*ms < 0 || t < *ms) {
      *ms = t;
      best = v;
    }
  }
  // Leave the chosen variant's plan in the workspace for the runs that follow.
  PETAL_RETURN_IF_ERROR(PlanRaggedAttentionVariant(p, best, workspace_.get(), stream));
  return best;
}

StatusOr<AttentionRunner::Choice> AttentionRunner::Choose(const AttentionParams& p,
                                                          cudaStream_t stream) {
  Choice c;
  const auto t0 = std::chrono::steady_clock::now();
  auto done = [&] {
    tune_ms_ +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  const bool cudnn_only = cudnn_ && mode_ == AttentionMode::kCudnn;
  if (!cudnn_only) {
    auto v = ChooseFlashVariant(p, stream, &c.flash_ms, &c.default_flash_ms);
    if (!v.ok()) {
      // Timing failed: the default variant, re-planned, as before variant tuning.
      c.note = "flash timing failed: " + v.status().message();
      PETAL_RETURN_IF_ERROR(PlanRaggedAttention(p, workspace_.get(), stream));
      return c;
    }
    c.variant = *v;
  }
  if (!cudnn_) {
    c.note = cudnn_unavailable_.empty() ? "flash forced" : cudnn_unavailable_;
    done();
    return c;
  }
  const int max_len = p.max_seqlen > 0 ? p.max_seqlen : p.max_tokens;
  Status prepared = cudnn_->Prepare(p, max_len);
  if (prepared.ok()) prepared = EnsureCudnnWorkspace();
  if (!prepared.ok()) {
    c.note = prepared.message();
    std::fprintf(stderr, "petal: cuDNN attention unavailable for %d seqs x %d tokens: %s\n",
                 p.max_seqs, p.max_tokens, c.note.c_str());
    if (cudnn_only) PETAL_RETURN_IF_ERROR(PlanRaggedAttention(p, workspace_.get(), stream));
    done();
    return c;
  }
  if (cudnn_only) {
    c.backend = Backend::kCudnn;
    done();
    return c;
  }
  // cuDNN's metadata for this batch was enqueued by Plan().
  auto t = TimeRuns([&] { return RunWith(Backend::kCudnn, p, stream); }, stream);
  if (!t.ok()) {
    c.note = "cudnn timing failed: " + t.status().message();
    done();
    return c;
  }
  c.cudnn_ms = *t;
  if (c.cudnn_ms < c.flash_ms) c.backend = Backend::kCudnn;
  done();
  return c;
}

Status AttentionRunner::Pick(const AttentionParams& p, cudaStream_t stream, Backend* b,
                             int* variant) {
  *variant = -1;
  *b = Backend::kFlash;
  if (!flash_) {
    *b = Backend::kReference;
    return Status::Ok();
  }
  // Key lengths (multi-vector query expansion): cuDNN's call does not take them.
  if (p.kv_lens != nullptr) return Status::Ok();
  const ShapeKey key = KeyOf(p);
  auto it = choices_.find(key);
  if (it == choices_.end()) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    PETAL_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    // Not expected (shapes run eagerly first); flash's plan was enqueued, so it is safe.
    if (capturing != cudaStreamCaptureStatusNone) return Status::Ok();
    PETAL_ASSIGN_OR_RETURN(Choice c, Choose(p, stream));
    c.timed_tokens = p.max_tokens;
    it = choices_.emplace(key, std::move(c)).first;
  }
  *b = it->second.backend;
  *variant = it->second.variant;
  return Status::Ok();
}

Status AttentionRunner::Run(const AttentionParams& p, cudaStream_t stream) {
  // The choice is made (and timed) on plain attention: timing runs must not normalise q/k in
  // place, and the norm costs every backend about the same.
  AttentionParams plain = p;
  plain.qk_norm = {};
  Backend b;
  int variant;
  PETAL_RETURN_IF_ERROR(Pick(plain, stream, &b, &variant));
  if (!p.qk_norm.enabled()) return RunWith(b, p, stream, variant);
  if (b == Backend::kFlash && FlashFoldsQkNorm(p)) {
    ++qk_norm_folded_;
    return RunWith(b, p, stream, variant);
  }
  // Another backend (or a shape the flash prologue does not cover): the norm in place first.
  if (p.k != p.q + static_cast<int64_t>(p.num_heads) * p.head_dim || p.k_stride != p.q_stride) {
    return InvalidArgument(
        "attention: q/k norm without the flash prologue needs the fused QKV "
        "layout (k right after q's heads in each row)");
  }
  QkNormRopeParams rp;
  rp.qkv = const_cast<__nv_bfloat16*>(p.q);
  rp.rows = p.max_tokens;
  rp.row_stride = static_cast<int>(p.q_stride);
  rp.num_q_heads = p.num_heads;
  rp.num_kv_heads = p.num_kv_heads;
  rp.head_dim = p.head_dim;
  rp.q_norm_weight = p.qk_norm.q_weight;
  rp.k_norm_weight = p.qk_norm.k_weight;
  rp.eps = p.qk_norm.eps;
  rp.positions = p.qk_norm.positions;
  rp.rope_table = p.qk_norm.rope_table;
  rp.rope_table_rows = p.qk_norm.rope_table_rows;
  PETAL_RETURN_IF_ERROR(LaunchQkNormRope(rp, stream));
  ++qk_norm_separate_;
  return RunWith(b, plain, stream, variant);
}

std::string AttentionRunner::backend() const {
  if (!flash_) return "reference";
  int counts[3] = {0, 0, 0};
  for (const auto& [k, c] : choices_) ++counts[static_cast<int>(c.backend)];
  const char* mode = mode_ == AttentionMode::kAuto    ? "auto"
                     : mode_ == AttentionMode::kFlash ? "flash"
                                                      : "cudnn";
  std::string s = std::string(mode) + ": petal-flash x" + std::to_string(counts[0]) + ", cudnn x" +
                  std::to_string(counts[1]);
  s += cudnn_ ? " (" + cudnn_->Version() + ")" : " (cudnn unavailable: " + cudnn_unavailable_ + ")";
  return s;
}

std::string AttentionRunner::DescribeChoices() const {
  std::string out;
  char line[384];
  for (const auto& [k, c] : choices_) {
    const auto& [seqs, max_len, hq, hkv, d, causal] = k;
    std::snprintf(line, sizeof(line),
                  "  attention seqs=%d max_len=%d (timed at %d tokens) heads=%d/%d d=%d%s -> %s "
                  "(flash %s %.4f ms, default variant %.4f ms; cudnn %.4f ms)%s%s\n",
                  seqs, max_len, c.timed_tokens, hq, hkv, d, causal ? " causal" : "",
                  Name(c.backend),
                  c.variant >= 0 ? FlashVariantName(d, c.variant).c_str() : "default", c.flash_ms,
                  c.default_flash_ms, c.cudnn_ms, c.note.empty() ? "" : " note: ", c.note.c_str());
    out += line;
  }
  return out;
}

std::map<std::string, double> AttentionRunner::Stats() const {
  int counts[3] = {0, 0, 0};
  for (const auto& [k, c] : choices_) ++counts[static_cast<int>(c.backend)];
  return {{"attention_flash", flash_ ? 1.0 : 0.0},
          {"attention_cudnn_available", cudnn_ ? 1.0 : 0.0},
          {"attention_shapes_flash", double(counts[0])},
          {"attention_shapes_cudnn", double(counts[1])},
          {"attention_tune_ms", tune_ms_},
          // enqueued calls (eager runs and captures, not graph replays)
          {"attention_qk_norm_folded_calls", double(qk_norm_folded_)},
          {"attention_qk_norm_separate_calls", double(qk_norm_separate_)}};
}

size_t AttentionRunner::bytes() const {
  return workspace_.bytes() + cudnn_meta_storage_.bytes() + cudnn_workspace_.bytes();
}

std::map<std::string, double> KernelStats(const Gemm& gemm, const AttentionRunner& attention) {
  const GemmStats g = gemm.Stats();
  std::map<std::string, double> s = {{"gemm_plans", double(g.plans)},
                                     {"gemm_tuned", double(g.tuned)},
                                     {"gemm_untuned", double(g.untuned)},
                                     {"gemm_too_large_to_tune", double(g.too_large)},
                                     {"gemm_small_m_rejected", double(g.small_m_rejected)},
                                     {"gemm_tune_ms", g.tune_ms}};
  for (const auto& [k, v] : attention.Stats()) s[k] = v;
  return s;
}

std::string DescribeKernels(const Gemm& gemm, const AttentionRunner& attention) {
  return "attention backend: " + attention.backend() + "\n" + attention.DescribeChoices() +
         gemm.Stats().ToString();
}

}  // namespace petal::cuda
