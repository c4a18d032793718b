// Probe: which cuBLASLt FP8 (e4m3) configurations the installed cuBLAS supports on this GPU, and
// how fast they are against bf16, for the dense shapes of the pplx-embed-v1-0.6b / 4b models.
// Standalone (links only cudart + cublasLt) so it can run before the engine integrates FP8.
// Output: one JSON object per line on stdout (shape, mode, supported, heuristic-best time).
//   nvcc -O2 -std=c++17 -arch=sm_90a bench/fp8_probe.cu -lcublasLt -o fp8_probe && ./fp8_probe
// Modes: bf16 (today's path), fp8 with scalar scales, fp8 with outer-vector scales (per-token x
// per-output-channel, what the engine wants), each with/without a bf16 addend C (beta = 1: the
// residual add) and bias. Times are the median of 20 runs of the heuristic's best of up to 8
// candidates, L2 not flushed (weights of one GEMM fit in L2: an optimistic figure for small M).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace {

struct Mode {
  const char* name;
  bool fp8, outer, c, bias;
};

__global__ void Fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    p[i] = (unsigned char)(h & 0x3f);  // small positive bytes: finite in both bf16 and e4m3
  }
}

__global__ void FillF(float* p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = 0.01f + 0.001f * (i % 7);
}

// Returns median microseconds, or -1 if unsupported (status in *why).
float Run(cublasLtHandle_t h, const Mode& md, int m, int n, int k, void* ws, size_t ws_bytes,
          void* a, void* w, void* c, void* out, float* sa, float* sw, void* bias, int* why,
          int* nalgo) {
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasOperation_t tw = CUBLAS_OP_T, ta = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &tw, sizeof(tw));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &ta, sizeof(ta));
  cudaDataType_t in = md.fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  if (md.fp8) {
    if (md.outer) {
      cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode));
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode));
    }
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sw, sizeof(sw));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof(sa));
  }
  if (md.bias) {
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep));
    int32_t bt = CUDA_R_16BF;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  }
  cublasLtMatrixLayout_t lw, la, lo;
  cublasLtMatrixLayoutCreate(&lw, in, k, n, k);
  cublasLtMatrixLayoutCreate(&la, in, k, m, k);
  cublasLtMatrixLayoutCreate(&lo, CUDA_R_16BF, n, m, n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  uint64_t wsb = ws_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                       sizeof(wsb));
  cublasLtMatmulHeuristicResult_t res[8];
  int got = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, desc, lw, la, lo, lo, pref, 8, res, &got);
  *why = st;
  *nalgo = got;
  float best = -1.f;
  if (st == CUBLAS_STATUS_SUCCESS && got > 0) {
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const float alpha = 1.f, beta = md.c ? 1.f : 0.f;
    for (int i = 0; i < got; ++i) {
      std::vector<float> t;
      bool ok = true;
      for (int r = 0; r < 23 && ok; ++r) {
        CK(cudaEventRecord(e0, s));
        cublasStatus_t x = cublasLtMatmul(h, desc, &alpha, w, lw, a, la, &beta, md.c ? c : out, lo,
                                          out, lo, &res[i].algo, ws, ws_bytes, s);
        CK(cudaEventRecord(e1, s));
        if (x != CUBLAS_STATUS_SUCCESS) {
          ok = false;
          *why = 1000 + x;
          break;
        }
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 3) t.push_back(ms * 1000.f);
      }
      if (!ok) continue;
      std::sort(t.begin(), t.end());
      const float med = t[t.size() / 2];
      if (best < 0 || med < best) best = med;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(s);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(lw);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lo);
  cublasLtMatmulDescDestroy(desc);
  (void)cudaGetLastError();
  return best;
}

}  // namespace

int main() {
  std::printf("{\"cublasLt_version\": %zu, \"cudart\": %d}\n", cublasLtGetVersion(),
              CUDART_VERSION);
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  const size_t ws_bytes = 32u << 20;
  const size_t max_mk = size_t(32768) * 9728, max_nk = size_t(9728) * 2560 * 2,
               max_mn = size_t(32768) * 19456 * 2;
  void *ws, *a, *w, *c, *out, *bias;
  float *sa, *sw;
  CK(cudaMalloc(&ws, ws_bytes));
  CK(cudaMalloc(&a, max_mk * 2));
  CK(cudaMalloc(&w, max_nk * 2));
  CK(cudaMalloc(&c, max_mn));
  CK(cudaMalloc(&out, max_mn));
  CK(cudaMalloc(&bias, 32768 * 2));
  CK(cudaMalloc(&sa, 32768 * 4));
  CK(cudaMalloc(&sw, 32768 * 4));
  Fill<<<1024, 256>>>((unsigned char*)a, max_mk * 2, 1);
  Fill<<<1024, 256>>>((unsigned char*)w, max_nk * 2, 2);
  Fill<<<1024, 256>>>((unsigned char*)c, max_mn, 3);
  Fill<<<64, 256>>>((unsigned char*)bias, 32768 * 2, 4);
  FillF<<<64, 256>>>(sa, 32768);
  FillF<<<64, 256>>>(sw, 32768);
  CK(cudaDeviceSynchronize());
  const Mode modes[] = {
      {"bf16", false, false, false, false},        {"bf16+c", false, false, true, false},
      {"fp8_scalar", true, false, false, false},   {"fp8_scalar+c", true, false, true, false},
      {"fp8_outer", true, true, false, false},     {"fp8_outer+c", true, true, true, false},
      {"fp8_outer+bias", true, true, false, true}, {"fp8_outer+c+bias", true, true, true, true},
  };
  // (n, k): 0.6b qkv, o, gate_up, down; 4b qkv, o, gate_up, down.
  const int shapes[][2] = {{4096, 1024}, {1024, 2048}, {6144, 1024},  {1024, 3072},
                           {6144, 2560}, {2560, 4096}, {19456, 2560}, {2560, 9728}};
  const int ms[] = {1, 16, 128, 512, 2048, 8192, 32768};
  for (auto& sh : shapes) {
    for (int m : ms) {
      for (const Mode& md : modes) {
        int why = 0, nalgo = 0;
        const float us =
            Run(h, md, m, sh[0], sh[1], ws, ws_bytes, a, w, c, out, sa, sw, bias, &why, &nalgo);
        const double flops = 2.0 * m * sh[0] * sh[1];
        std::printf(
            "{\"n\": %d, \"k\": %d, \"m\": %d, \"mode\": \"%s\", \"status\": %d, \"algos\": %d, "
            "\"us\": %.2f, \"tflops\": %.1f}\n",
            sh[0], sh[1], m, md.name, why, nalgo, us, us > 0 ? flops / us * 1e-6 : 0.0);
        std::fflush(stdout);
      }
    }
  }
  cublasLtDestroy(h);
  return 0;
}
