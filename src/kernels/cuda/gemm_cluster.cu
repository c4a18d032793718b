// Cluster split-K GEMM (see gemm_cluster.h). Work layout: CTA (x, y, z) computes output features
// [x*BN, (x+1)*BN) for tokens [z*MT, (z+1)*MT) over the K slice y of `splits`; the `splits` CTAs
// of one (x, z) form a cluster along y. A CTA has WN x WM warps; warp (wn, wm) owns 32 features
// (two m16 tiles: the weights are mma's A operand) and 8*JB tokens (JB n8 blocks: the activations
// are the B operand, each token's k values contiguous = mma's "col" B layout).
//
// Shared memory per stage: BN weight rows then MT token rows, 64 bf16 (128 bytes) each, the eight
// 16-byte chunks of row r stored at chunk ^ (r & 7), so the 8 rows one ldmatrix reads fall in 8
// different bank groups. After the main loop the same memory holds the CTA's fp32 partial tile
// [MT][BN], which the cluster's CTAs read from each other (each reduces 1/splits of the tile).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_cluster.h"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;

constexpr int kKC = 64;  // k per pipeline stage: one 128-byte row
constexpr int kStages = 4;

struct Args {
  const bf16* a;
  const bf16* w;
  const bf16* bias;  // or null
  const bf16* c;     // or null; may equal out
  bf16* out;
  int m, n, k, splits;
  bool gelu;
};

// Device code for Hopper and newer only (clusters, distributed shared memory); on older devices
// the kernel is empty and ClusterGemmSupported is false.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t Swz(int row, int chunk) {
  return static_cast<uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
}

__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
  // src-size 0 fills the 16 bytes with zeros (tokens past m).
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void CpCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void CpWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void Ldsm4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif

template <int WN, int WM, int JB>
struct Cfg {
  static constexpr int kThreads = 32 * WN * WM, BN = 32 * WN, MT = 8 * JB * WM;
  static constexpr int kRows = BN + MT;
  static constexpr uint32_t kStageBytes = kRows * 128;
  static constexpr size_t kPipeBytes = size_t{kStages} * kStageBytes;
  static constexpr size_t kPartBytes = size_t{MT} * BN * sizeof(float);
  static constexpr size_t kSmemBytes = kPipeBytes > kPartBytes ? kPipeBytes : kPartBytes;
};

template <int WN, int WM, int JB>
__global__ void __launch_bounds__(32 * WN * WM, 1) ClusterGemmKernel(const Args p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // clusters are Hopper+ (see Supported)
  using C = Cfg<WN, WM, JB>;
  constexpr int BN = C::BN, MT = C::MT;
  extern __shared__ __align__(128) uint8_t smem[];
  PdlWait();  // see pdl.cuh: before any global memory access
  cg::cluster_group cluster = cg::this_cluster();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wn = warp % WN, wm = warp / WN;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.z * MT;
  const int split = static_cast<int>(cluster.block_rank());
  const int k_per = p.k / p.splits, kbeg = split * k_per, nk = k_per / kKC;
  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

  auto load_stage = [&](int kb, int stage) {
    const int k0 = kbeg + kb * kKC;
    const uint32_t st = sbase + stage * C::kStageBytes;
    for (int i = threadIdx.x; i < C::kRows * 8; i += C::kThreads) {
      const int r = i / 8, ch = i % 8;
      if (r < BN) {
        CpAsync16(st + Swz(r, ch), p.w + static_cast<size_t>(n0 + r) * p.k + k0 + ch * 8, true);
      } else {
        const int tok = m0 + r - BN;
        const bool valid = tok < p.m;
        CpAsync16(st + Swz(r, ch), p.a + static_cast<size_t>(valid ? tok : 0) * p.k + k0 + ch * 8,
                  valid);
      }
    }
  };

  float acc[2][JB][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < JB; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nk) load_stage(s, s);
    CpCommit();
  }
  const int q = lane >> 3, r8 = lane & 7;
  for (int kb = 0; kb < nk; ++kb) {
    CpWait<kStages - 2>();
    __syncthreads();  // stage kb landed for every thread; stage kb-1 is no longer read
    if (kb + kStages - 1 < nk) load_stage(kb + kStages - 1, (kb + kStages - 1) % kStages);
    CpCommit();
    const uint32_t st = sbase + (kb % kStages) * C::kStageBytes;
#pragma unroll
    for (int kk = 0; kk < kKC / 16; ++kk) {
      uint32_t af[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        // Matrices: rows 0-7 / 8-15 of the m16 tile x k 0-7 / 8-15 = a0, a1, a2, a3.
        const int row = wn * 32 + i * 16 + (q & 1) * 8 + r8;
        Ldsm4(st + Swz(row, 2 * kk + (q >> 1)), af[i]);
      }
#pragma unroll
      for (int j = 0; j < JB; j += 2) {
        // Matrices: token block j x k 0-7 / 8-15, then block j+1: b0, b1 of j, then of j+1.
        const int row = BN + wm * (8 * JB) + (j + (q >> 1)) * 8 + r8;
        uint32_t b[4];
        Ldsm4(st + Swz(row, 2 * kk + (q & 1)), b);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          Mma(acc[i][j], af[i], b[0], b[1]);
          Mma(acc[i][j + 1], af[i], b[2], b[3]);
        }
      }
    }
  }
  CpWait<0>();
  __syncthreads();  // every warp is done with the pipeline buffers: reuse them for the partials

  // acc[i][j] = {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]}: rows are features, columns
  // tokens. Partial tile: [MT tokens][BN features] fp32.
  float* part = reinterpret_cast<float*>(smem);
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < JB; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int nl = wn * 32 + i * 16 + g + 8 * (e / 2);
        const int tl = wm * (8 * JB) + j * 8 + 2 * t + (e % 2);
        part[tl * BN + nl] = acc[i][j][e];
      }
  cluster.sync();  // every partial of the cluster is written

  ClusterSplitKStore<BN, BN, C::kThreads>(cluster, part, p, split, m0, n0, MT);
  cluster.sync();  // no CTA leaves while another still reads its shared memory
#endif
}

struct ConfigInfo {
  int wn, wm, jb;
};
// Index = 2 * log2(MT / 16) + (BN == 64): token tiles 16, 32, 64, 128; feature tiles 128, 64.
constexpr ConfigInfo kConfigs[] = {{4, 1, 2}, {2, 1, 2}, {4, 1, 4}, {2, 1, 4},
                                   {4, 1, 8}, {2, 1, 8}, {4, 2, 8}, {2, 2, 8}};
constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

template <int WN, int WM, int JB>
Status Launch(const Args& args, int splits, cudaStream_t stream) {
  using C = Cfg<WN, WM, JB>;
  const auto kernel = ClusterGemmKernel<WN, WM, JB>;
  PETAL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(C::kSmemBytes)));
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = static_cast<unsigned>(splits);
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(args.n / C::BN), static_cast<unsigned>(splits),
                     static_cast<unsigned>((args.m + C::MT - 1) / C::MT));
  cfg.blockDim = dim3(C::kThreads);
  cfg.dynamicSmemBytes = C::kSmemBytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = PdlEnabled() ? 2 : 1;
  PETAL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args));
  return Status::Ok();
}

}  // namespace

int ClusterGemmConfigs() { return kNumConfigs; }

std::string ClusterGemmName(int config) {
  if (config < 0 || config >= kNumConfigs) return "cluster?";
  const ConfigInfo& c = kConfigs[config];
  return "cluster" + std::to_string(32 * c.wn) + "x" + std::to_string(8 * c.jb * c.wm);
}

void ClusterGemmConfigsFor(int m, int out[2]) {
  int mt = 0;
  while (mt < 3 && (16 << mt) < m) ++mt;
  out[0] = 2 * mt;
  out[1] = 2 * mt + 1;
}

bool ClusterGemmSupported(const GemmParams& p, int config, int splits) {
  if (config < 0 || config >= kNumConfigs || p.fp8() || !DeviceIsHopperOrNewer()) return false;
  if (splits != 1 && splits != 2 && splits != 4 && splits != 8) return false;
  const int bn = 32 * kConfigs[config].wn;
  if (p.m < 1 || p.m > kClusterGemmMaxM || p.n % bn != 0 || p.k % (kKC * splits) != 0) return false;
  if (!IsAligned(p.a, 16) || !IsAligned(p.w, 16) || !IsAligned(p.out, 8)) return false;
  return p.c == nullptr || IsAligned(p.c, 2);
}

Status LaunchClusterGemm(const GemmParams& p, int config, int splits, cudaStream_t stream) {
  if (!ClusterGemmSupported(p, config, splits))
    return InvalidArgument("cluster GEMM: unsupported problem or configuration");
  const Args args{p.a, p.w, p.bias, p.c, p.out, p.m, p.n, p.k, splits, p.gelu_tanh};
  switch (config) {
    case 0:
      return Launch<4, 1, 2>(args, splits, stream);
    case 1:
      return Launch<2, 1, 2>(args, splits, stream);
    case 2:
      return Launch<4, 1, 4>(args, splits, stream);
    case 3:
      return Launch<2, 1, 4>(args, splits, stream);
    case 4:
      return Launch<4, 1, 8>(args, splits, stream);
    case 5:
      return Launch<2, 1, 8>(args, splits, stream);
    case 6:
      return Launch<4, 2, 8>(args, splits, stream);
    default:
      return Launch<2, 2, 8>(args, splits, stream);
  }
}

}  // namespace petal::cuda
