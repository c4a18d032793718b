// cuBLASLt plumbing for Gemm (see gemm.h). Row-major out[M,N] = a[M,K] w[N,K]^T is computed as
// the column-major product out^T = w a^T: cuBLAS sees row-major w[N,K] as a
// column-major K x N matrix (ld K) and row-major a[M,K] as column-major K x M (ld K); with
// transa = T, transb = N it computes D (N x M, column-major, ld N) = w_cm^T * a_cm, and a
// column-major N x M matrix with ld N is exactly row-major out[M,N]. The bias vector has one
// entry per row of D, i.e. per output feature n.
#include "kernels/cuda/gemm.h"

#include <algorithm>
#include <string>

namespace petal::cuda {

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_w = nullptr, layout_a = nullptr, layout_out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (layout_out) cublasLtMatrixLayoutDestroy(layout_out);
    if (layout_a) cublasLtMatrixLayoutDestroy(layout_a);
    if (layout_w) cublasLtMatrixLayoutDestroy(layout_w);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

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
         (p.bias ? " +bias" : "") + (p.gelu_tanh ? " +gelu_tanh" : "") + (p.c ? " +c" : "");
}

}  // namespace

StatusOr<std::unique_ptr<Gemm>> Gemm::Create(size_t workspace_bytes) {
  std::unique_ptr<Gemm> g(new Gemm());
  PETAL_CUBLAS_CHECK(cublasLtCreate(&g->handle_));
  PETAL_RETURN_IF_ERROR(g->workspace_.Allocate(workspace_bytes));
  return g;
}

Gemm::~Gemm() {
  plans_.clear();  // descriptors before the handle
  if (handle_) cublasLtDestroy(handle_);
}

Status Gemm::Validate(const GemmParams& p) const {
  if (p.m < 0 || p.n <= 0 || p.k <= 0) return InvalidArgument("Gemm: bad sizes " + Shape(p));
  if (!p.a || !p.w || !p.out) return InvalidArgument("Gemm: null pointer " + Shape(p));
  // cuBLASLt needs 16-byte aligned rows for its tensor-core paths; every model dim is a multiple
  // of 8, so require it rather than silently falling back to slow kernels.
  if (p.k % 8 != 0 || p.n % 8 != 0)
    return InvalidArgument("Gemm: n and k must be multiples of 8, " + Shape(p));
  return Status::Ok();
}

StatusOr<Gemm::Plan*> Gemm::GetPlan(const GemmParams& p) {
  const Key key{p.m,
                p.n,
                p.k,
                p.bias != nullptr,
                p.gelu_tanh,
                p.c != nullptr,
                Alignment(p.a),
                Alignment(p.w),
                Alignment(p.c ? p.c : p.out),
                Alignment(p.out),
                Alignment(p.bias)};
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
  // Column-major views (see the file comment): w is K x N, a is K x M, out is N x M.
  PETAL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_w, CUDA_R_16BF, p.k, p.n, p.k));
  PETAL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_a, CUDA_R_16BF, p.k, p.m, p.k));
  PETAL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_out, CUDA_R_16BF, p.n, p.m, p.n));

  cublasLtMatmulPreference_t pref = nullptr;
  PETAL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = workspace_.bytes();
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
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->layout_w, plan->layout_a,
                                        plan->layout_out, plan->layout_out, pref, 1, &result,
                                        &returned);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  PETAL_CUBLAS_CHECK(st);
  if (returned == 0 || result.state != CUBLAS_STATUS_SUCCESS)
    return Internal("Gemm: cuBLASLt found no algorithm for " + Shape(p));
  plan->algo = result.algo;
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

Status Gemm::Prepare(const GemmParams& p) {
  PETAL_RETURN_IF_ERROR(Validate(p));
  if (p.m == 0) return Status::Ok();
  return GetPlan(p).status();
}

Status Gemm::Run(const GemmParams& p, cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(Validate(p));
  if (p.m == 0) return Status::Ok();
  PETAL_ASSIGN_OR_RETURN(Plan * plan, GetPlan(p));
  if (p.bias) {
    // Plans are shared by layers of the same shape; each call brings its own bias.
    PETAL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &p.bias, sizeof(p.bias)));
  }
  const float alpha = 1.f, beta = p.c ? 1.f : 0.f;
  const void* c = p.c ? static_cast<const void*>(p.c) : static_cast<const void*>(p.out);
  PETAL_CUBLAS_CHECK(cublasLtMatmul(handle_, plan->desc, &alpha, p.w, plan->layout_w, p.a,
                                    plan->layout_a, &beta, c, plan->layout_out, p.out,
                                    plan->layout_out, &plan->algo, workspace_.get(),
                                    workspace_.bytes(), stream));
  return Status::Ok();
}

}  // namespace petal::cuda
