// cuBLASLt plumbing for Gemm (see gemm.h); the measuring part is in gemm_tune.cc. Row-major
// out[M,N] = a[M,K] w[N,K]^T is computed as the column-major product out^T = w a^T: cuBLAS sees
// row-major w[N,K] as a column-major K x N matrix (ld K) and row-major a[M,K] as column-major
// K x M (ld K); with transa = T, transb = N it computes D (N x M, column-major, ld N) =
// w_cm^T * a_cm, and a column-major N x M matrix with ld N is exactly row-major out[M,N]. The bias
// vector has one entry per row of D, i.e. per output feature n.
#include "kernels/cuda/gemm.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "kernels/cuda/gemm_chain.h"
#include "kernels/cuda/gemm_cluster.h"
#include "kernels/cuda/gemm_cutlass.h"
#include "kernels/cuda/gemm_plan.h"
#include "kernels/cuda/gemm_smallm.h"
#include "kernels/cuda/gemm_wgmma.h"

namespace petal::cuda {

namespace {

int Alignment(const void* p) {
  if (p == nullptr) return 256;
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 1;
  while (a < 256 && v % (2 * a) == 0) a *= 2;
  return a;
}

std::string Shape(const GemmParams& p) {
  return "m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
         (p.bias ? " +bias" : "") + (p.gelu_tanh ? " +gelu_tanh" : "") + (p.c ? " +c" : "") +
         (p.fp8() ? " fp8" : "");
}

const char* StateName(int s) {
  static const char* kNames[] = {"untuned", "tuned", "too_large", "failed"};
  return kNames[s];
}

}  // namespace

StatusOr<std::unique_ptr<Gemm>> Gemm::Create(size_t workspace_bytes) {
  GemmOptions o;
  o.workspace_bytes = workspace_bytes;
  return Create(o);
}

StatusOr<std::unique_ptr<Gemm>> Gemm::Create(const GemmOptions& options) {
  if (options.max_candidates < 1 || options.timed_runs < 1 || options.warmup_runs < 0)
    return InvalidArgument("Gemm: bad tuning options");
  std::unique_ptr<Gemm> g(new Gemm());
  g->options_ = options;
  PETAL_CUBLAS_CHECK(cublasLtCreate(&g->handle_));
  PETAL_RETURN_IF_ERROR(g->workspace_.Allocate(options.workspace_bytes));
  return g;
}

Gemm::~Gemm() {
  plans_.clear();  // descriptors before the handle
  if (handle_) cublasLtDestroy(handle_);
}

Status Gemm::Validate(const GemmParams& p) const {
  if (p.m < 0 || p.n <= 0 || p.k <= 0) return InvalidArgument("Gemm: bad sizes " + Shape(p));
  if (p.fp8()) {
    if (!p.a8 || !p.w8 || !p.a_scale || !p.w_scale || !p.out)
      return InvalidArgument("Gemm: fp8 needs a8, w8, a_scale, w_scale and out, " + Shape(p));
    if (p.gelu_tanh) return InvalidArgument("Gemm: no GELU epilogue with fp8, " + Shape(p));
    if (p.m > 0 && p.m < kFp8MinM)
      return InvalidArgument("Gemm: fp8 needs m >= " + std::to_string(kFp8MinM) +
                             " (see kFp8MinM), " + Shape(p));
    // e4m3 rows must be 16-byte aligned for the tensor-core kernels, as bf16 rows are below.
    if (p.k % 16 != 0 || p.n % 16 != 0)
      return InvalidArgument("Gemm: fp8 needs n and k multiples of 16, " + Shape(p));
    return Status::Ok();
  }
  if (!p.a || !p.w || !p.out) return InvalidArgument("Gemm: null pointer " + Shape(p));
  // cuBLASLt needs 16-byte aligned rows for its tensor-core paths; every model dim is a multiple
  // of 8, so require it rather than silently falling back to slow kernels.
  if (p.k % 8 != 0 || p.n % 8 != 0)
    return InvalidArgument("Gemm: n and k must be multiples of 8, " + Shape(p));
  return Status::Ok();
}

Gemm::Key Gemm::MakeKey(const GemmParams& p) {
  const bool fp8 = p.fp8();
  return Key{p.m,
             p.n,
             p.k,
             p.bias != nullptr,
             p.gelu_tanh,
             p.c != nullptr,
             fp8,
             Alignment(fp8 ? static_cast<const void*>(p.a8) : p.a),
             Alignment(fp8 ? static_cast<const void*>(p.w8) : p.w),
             Alignment(p.c ? p.c : p.out),
             Alignment(p.out),
             Alignment(p.bias)};
}

Status Gemm::Heuristic(Plan& plan, const Key& key, int count,
                       std::vector<cublasLtMatmulHeuristicResult_t>* out) const {
  cublasLtMatmulPreference_t pref = nullptr;
  PETAL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_.bytes();
  const uint32_t align[4] = {static_cast<uint32_t>(key.align_w), static_cast<uint32_t>(key.align_a),
                             static_cast<uint32_t>(key.align_c),
                             static_cast<uint32_t>(key.align_out)};
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i)
    st = cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof(align[i]));
  out->assign(count, cublasLtMatmulHeuristicResult_t{});
  int returned = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.layout_w, plan.layout_a,
                                        plan.layout_out, plan.layout_out, pref, count, out->data(),
                                        &returned);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  PETAL_CUBLAS_CHECK(st);
  out->resize(returned);
  std::erase_if(*out, [](const auto& r) { return r.state != CUBLAS_STATUS_SUCCESS; });
  return Status::Ok();
}

StatusOr<Gemm::Plan*> Gemm::GetPlan(const Key& key, const GemmParams& p) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();

  auto plan = std::make_unique<Plan>();
  PETAL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_w = CUBLAS_OP_T, trans_a = CUBLAS_OP_N;
  PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                    &trans_w, sizeof(trans_w)));
  PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                    &trans_a, sizeof(trans_a)));
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (p.bias)
    epilogue = p.gelu_tanh ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  else if (p.gelu_tanh)
    epilogue = CUBLASLT_EPILOGUE_GELU;
  PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                    &epilogue, sizeof(epilogue)));
  if (p.bias) {
    const int32_t bias_type = CUDA_R_16BF;
    PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    // The heuristic reads the bias pointer's value for its alignment.
    PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &p.bias, sizeof(p.bias)));
  }
  const cudaDataType_t in_type = key.fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  if (key.fp8) {
    // cuBLAS's A is our w (its rows are our output channels), its B our activations (its columns
    // our tokens): outer-vector scales are then w_scale[n] for A and a_scale[m] for B.
    const cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                      &mode, sizeof(mode)));
    PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                      &mode, sizeof(mode)));
    PETAL_RETURN_IF_ERROR(SetScales(*plan, p));
  }
  // Column-major views (see the file comment): w is K x N, a is K x M, out is N x M.
  PETAL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_w, in_type, p.k, p.n, p.k));
  PETAL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_a, in_type, p.k, p.m, p.k));
  PETAL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_out, CUDA_R_16BF, p.n, p.m, p.n));

  // One result only: this path may run during capture, and the tuner asks again for more.
  std::vector<cublasLtMatmulHeuristicResult_t> results;
  PETAL_RETURN_IF_ERROR(Heuristic(*plan, key, 1, &results));
  if (results.empty()) return Internal("Gemm: cuBLASLt found no algorithm for " + Shape(p));
  plan->first = plan->algo = results[0].algo;
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

Status Gemm::Enqueue(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmParams& p,
                     cudaStream_t stream) const {
  if (p.bias) {
    // Plans are shared by layers of the same shape; each call brings its own bias.
    PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &p.bias, sizeof(p.bias)));
  }
  const void* w = p.w;
  const void* a = p.a;
  if (p.fp8()) {
    PETAL_RETURN_IF_ERROR(SetScales(plan, p));  // per call, like the bias: layers share plans
    w = p.w8;
    a = p.a8;
  }
  const float alpha = 1.f, beta = p.c ? 1.f : 0.f;
  const void* c = p.c ? static_cast<const void*>(p.c) : static_cast<const void*>(p.out);
  PETAL_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, w, plan.layout_w, a, plan.layout_a,
                                    &beta, c, plan.layout_out, p.out, plan.layout_out, &algo,
                                    workspace_.get(), workspace_.bytes(), stream));
  return Status::Ok();
}

Status Gemm::SetScales(const Plan& plan, const GemmParams& p) {
  PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                    &p.w_scale, sizeof(p.w_scale)));
  PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                    &p.a_scale, sizeof(p.a_scale)));
  return Status::Ok();
}

Status Gemm::Prepare(const GemmParams& p, cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(Validate(p));
  if (p.m == 0) return Status::Ok();
  const Key key = MakeKey(p);
  PETAL_ASSIGN_OR_RETURN(Plan * plan, GetPlan(key, p));
  return MaybeTune(*plan, key, p, stream);
}

Status Gemm::Run(const GemmParams& p, cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(Validate(p));
  if (p.m == 0) return Status::Ok();
  const Key key = MakeKey(p);
  PETAL_ASSIGN_OR_RETURN(Plan * plan, GetPlan(key, p));
  PETAL_RETURN_IF_ERROR(MaybeTune(*plan, key, p, stream));
  // The plan's key fixes sizes and alignments, so our kernel's choice still applies.
  if (plan->petal_kernel == PetalKernel::kSmallM)
    return LaunchSmallMGemm(p, plan->petal_splits, workspace_.get(), stream);
  if (plan->petal_kernel == PetalKernel::kCluster)
    return LaunchClusterGemm(p, plan->petal_config, plan->petal_splits, stream);
  if (plan->petal_kernel == PetalKernel::kWgmma)
    return LaunchWgmmaGemm(p, plan->petal_config, plan->petal_splits, stream);
  if (plan->petal_kernel == PetalKernel::kCutlass)
    return LaunchCutlassGemm(p, {plan->petal_config, plan->petal_splits}, workspace_.get(),
                             workspace_.bytes(), stream);
  return Enqueue(*plan, plan->algo, p, stream);
}

std::string GemmPlanInfo::ToString() const {
  char buf[400];
  std::snprintf(buf, sizeof(buf),
                "m=%d n=%d k=%d%s%s%s%s %s algo=%d tile=%d stages=%d splitk=%d red=%d swz=%d "
                "custom=%d cluster=%d cand=%d%s first=%.1fus chosen=%.1fus ours=%s %.1fus",
                m, n, k, bias ? " +bias" : "", gelu ? " +gelu" : "", c ? " +c" : "",
                fp8 ? " fp8" : "", state.c_str(), algo_id, tile_id, stages_id, split_k, reduction,
                swizzle, custom, cluster_id, candidates, chained ? " chained" : "", first_us,
                chosen_us, ours.empty() ? "-" : ours.c_str(), ours_us);
  return buf;
}

std::string GemmStats::ToString() const {
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "gemm plans=%zu tuned=%zu untuned=%zu too_large=%zu small_m_rejected=%zu "
                "tune_ms=%.1f",
                plans, tuned, untuned, too_large, small_m_rejected, tune_ms);
  std::string s = buf;
  for (const GemmPlanInfo& i : per_plan) s += "\n  " + i.ToString();
  return s;
}

GemmStats Gemm::Stats() const {
  GemmStats s;
  s.plans = plans_.size();
  s.tune_ms = tune_ms_;
  s.small_m_rejected = small_m_rejected_;
  for (const auto& [key, plan] : plans_) {
    GemmPlanInfo i;
    i.m = key.m, i.n = key.n, i.k = key.k, i.bias = key.bias, i.gelu = key.gelu, i.c = key.c;
    i.fp8 = key.fp8;
    i.state = StateName(static_cast<int>(plan->state));
    const cublasLtMatmulAlgo_t& a = plan->algo;
    const bool ours = plan->petal_kernel != PetalKernel::kNone;
    i.algo_id = plan->petal_kernel == PetalKernel::kSmallM    ? -1
                : plan->petal_kernel == PetalKernel::kCluster ? -2
                : plan->petal_kernel == PetalKernel::kCutlass ? -3
                : plan->petal_kernel == PetalKernel::kWgmma   ? -4
                                                              : AlgoId(a);
    i.tile_id = ours ? plan->petal_config : AlgoConfig<uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID);
    i.stages_id = AlgoConfig<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID);
    i.split_k = ours ? plan->petal_splits : AlgoSplitK(a);
    i.reduction = AlgoReduction(a);
    i.swizzle = AlgoConfig<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
    i.custom = AlgoConfig<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
    i.cluster_id = AlgoConfig<uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
    i.candidates = plan->candidates;
    i.chained = plan->chained;
    i.first_us = plan->first_us, i.chosen_us = plan->chosen_us;
    i.ours_us = plan->ours_us, i.ours = plan->ours;
    s.tuned += plan->state == Plan::State::kTuned;
    s.untuned += plan->state == Plan::State::kUntuned;
    s.too_large += plan->state == Plan::State::kTooLarge;
    s.per_plan.push_back(std::move(i));
  }
  return s;
}

}  // namespace petal::cuda
