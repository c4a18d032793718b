// TMA + wgmma split-K GEMM for small M (see gemm_wgmma.h). Work layout: CTA (x, y, z) computes
// output features [x*BN, (x+1)*BN) for tokens [z*MT, (z+1)*MT) over the K slice y of `splits`; the
// `splits` CTAs of one (x, z) form a cluster along y. Warps 0 .. 4*WG-1 are WG consumer
// warpgroups (group g owns features g*64 .. g*64+63 of the tile: the weights are wgmma's A side,
// the tokens its N side); warp 4*WG is the producer.
//
// Shared memory (1024-byte aligned): `stages` ring slots of [BN weight rows][64 k] then [MT token
// rows][64 k], 128 bytes a row, written by TMA with the 128-byte swizzle that the wgmma
// descriptors name; full[s] counts the slot's bytes in, empty[s] the consumer warps' releases.
// After the main loop the same memory holds the CTA's fp32 partial tile [MT][BN + 4] (the pad
// keeps the fragment stores free of bank conflicts), which the cluster's CTAs read from each
// other: each sums 1/splits of the valid rows over ranks 0, 1, ... and writes bf16.
#include <cooperative_groups.h>
#include <cuda.h>  // CUtensorMap (the encoder comes through cudart: no -lcuda)
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_wgmma.h"
#include "kernels/cuda/gemm_wgmma_ptx.cuh"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;

constexpr int kKC = 64;  // k per ring slot: one 128-byte (swizzle-wide) row
constexpr int kMaxStages = 8;
constexpr size_t kSmemBudget = 200u << 10;  // ring bytes per CTA (of 227 KiB)

struct Args {        // 64-byte aligned through CUtensorMap
  CUtensorMap wmap;  // w as [n rows][k], box [BN][64]
  CUtensorMap amap;  // a as [m rows][k], box [MT][64] (rows past m read as zeros)
  const bf16* bias;  // or null
  const bf16* c;     // or null; may equal out
  bf16* out;
  int m, n, k, splits, nk, stages;
  bool gelu;
};

template <int WG, int MT>
struct Cfg {
  static constexpr int BN = 64 * WG, kConsumers = 128 * WG, kThreads = kConsumers + 32;
  static constexpr uint32_t kWBytes = BN * 128, kABytes = MT * 128;
  static constexpr uint32_t kStageBytes = kWBytes + kABytes;  // a multiple of 1024
  static constexpr int BNP = BN + 4;                          // partial row stride (floats)
  static constexpr size_t kPartBytes = size_t{MT} * BNP * sizeof(float);
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void MbarInit(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void MbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, unsigned parity) {
  for (;;) {
    uint32_t done;
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, "
        "p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    if (done) return;
  }
}
// The 2-D box at (k = x, row = y) of `map` into dst; completes its bytes on bar.
__device__ __forceinline__ void TmaLoad(uint32_t dst, const CUtensorMap* map, int x, int y,
                                        uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
// wgmma shared-memory descriptor of a K-major tile written with the 128-byte swizzle: rows of 128
// bytes, 8-row groups 1024 bytes apart (stride byte offset), leading byte offset unused.
__device__ __forceinline__ uint64_t Desc(uint32_t saddr) {
  return static_cast<uint64_t>((saddr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
__device__ __forceinline__ void FenceOperand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

#endif

template <int WG, int MT>
__global__ void __launch_bounds__(Cfg<WG, MT>::kThreads, 1)
    WgmmaGemmKernel(const __grid_constant__ Args p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // wgmma: sm_90a only (see WgmmaGemmSupported)
  using C = Cfg<WG, MT>;
  using Mma = wgmma::Mma<MT>;
  constexpr int BN = C::BN;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[kMaxStages], empty[kMaxStages];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  uint8_t* smem = smem_raw + (base - raw);
  const uint32_t full0 = static_cast<uint32_t>(__cvta_generic_to_shared(full));
  const uint32_t empty0 = static_cast<uint32_t>(__cvta_generic_to_shared(empty));
  cg::cluster_group cluster = cg::this_cluster();
  const int split = static_cast<int>(cluster.block_rank());
  const int n0 = blockIdx.x * BN, m0 = blockIdx.z * MT, kbeg = split * (p.k / p.splits);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int S = p.stages, nk = p.nk;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      MbarInit(full0 + 8 * s, 1);
      MbarInit(empty0 + 8 * s, 4 * WG);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == 4 * WG) {  // producer
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&p.wmap)));
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&p.amap)));
      const int pre = min(S, nk);
      // Weights first: no kernel before this one writes them, so they may be requested before
      // the programmatic-launch wait; the activations only after it.
      for (int kb = 0; kb < pre; ++kb) {
        MbarExpectTx(full0 + 8 * kb, C::kStageBytes);
        TmaLoad(base + kb * C::kStageBytes, &p.wmap, kbeg + kb * kKC, n0, full0 + 8 * kb);
      }
      PdlWait();
      for (int kb = 0; kb < pre; ++kb)
        TmaLoad(base + kb * C::kStageBytes + C::kWBytes, &p.amap, kbeg + kb * kKC, m0,
                full0 + 8 * kb);
      for (int kb = pre; kb < nk; ++kb) {
        const int s = kb % S;
        MbarWait(empty0 + 8 * s, ((kb / S) - 1) & 1);
        const uint32_t slot = base + s * C::kStageBytes;
        MbarExpectTx(full0 + 8 * s, C::kStageBytes);
        TmaLoad(slot, &p.wmap, kbeg + kb * kKC, n0, full0 + 8 * s);
        TmaLoad(slot + C::kWBytes, &p.amap, kbeg + kb * kKC, m0, full0 + 8 * s);
      }
    }
  }

  float acc[Mma::kRegs];
  if (warp < 4 * WG) {  // consumers
    const int g = warp / 4;
#pragma unroll
    for (int i = 0; i < Mma::kRegs; ++i) acc[i] = 0.f;
    for (int kb = 0; kb < nk; ++kb) {
      const int s = kb % S;
      MbarWait(full0 + 8 * s, (kb / S) & 1);
      const uint32_t wst = base + s * C::kStageBytes + g * 64 * 128;
      const uint32_t ast = base + s * C::kStageBytes + C::kWBytes;
#pragma unroll
      for (int i = 0; i < Mma::kRegs; ++i) FenceOperand(acc[i]);
      wgmma::Fence();
#pragma unroll
      for (int kk = 0; kk < kKC / 16; ++kk) Mma::Run(acc, Desc(wst + kk * 32), Desc(ast + kk * 32));
      wgmma::Commit();
      wgmma::Wait<1>();  // the previous slot's products are done: release it
      if (kb > 0 && lane == 0) MbarArrive(empty0 + 8 * ((kb - 1) % S));
    }
    wgmma::Wait<0>();
#pragma unroll
    for (int i = 0; i < Mma::kRegs; ++i) FenceOperand(acc[i]);
  }
  __syncthreads();  // every product is done: the ring becomes the partial tile

  float* part = reinterpret_cast<float*>(smem);
  if (warp < 4 * WG) {
    const int f0 = (warp / 4) * 64 + (warp % 4) * 16 + lane / 4, t0 = 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < MT / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          part[(8 * j + t0 + e) * C::BNP + f0 + 8 * h] = acc[4 * j + 2 * h + e];
  }
  // The addend may be the previous kernel's output: every thread waits for it (a no-op without
  // programmatic launch, or once the producer has waited).
  asm volatile("griddepcontrol.wait;" ::: "memory");
  cluster.sync();  // every partial of the cluster is written

  ClusterSplitKStore<BN, C::BNP, C::kThreads>(cluster, part, p, split, m0, n0, MT);
  cluster.sync();  // no CTA leaves while another still reads its shared memory
#endif
}

struct ConfigInfo {
  int wg, mt;
};
// Index = 2 * log2(MT / 32) + (BN == 128): token tiles 32, 64, 128; feature tiles 64, 128.
constexpr ConfigInfo kConfigs[] = {{1, 32}, {2, 32}, {1, 64}, {2, 64}, {1, 128}, {2, 128}};
constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

// A 2-D bf16 tensor map over [rows][cols] (row stride cols * 2 bytes), box [box_rows][64].
Status Encode2d(const void* ptr, int cols, int rows, int box_rows, CUtensorMap* map) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (!encode) return Internal("wgmma GEMM: cuTensorMapEncodeTiled not found");
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t box[2] = {kKC, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r =
      encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(ptr), dims, strides, box,
             estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Internal("wgmma GEMM: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  return Status::Ok();
}

template <int WG, int MT>
Status Launch(const GemmParams& gp, int splits, cudaStream_t stream) {
  using C = Cfg<WG, MT>;
  Args args{};
  PETAL_RETURN_IF_ERROR(Encode2d(gp.w, gp.k, gp.n, C::BN, &args.wmap));
  PETAL_RETURN_IF_ERROR(Encode2d(gp.a, gp.k, gp.m, MT, &args.amap));
  args.bias = gp.bias, args.c = gp.c, args.out = gp.out;
  args.m = gp.m, args.n = gp.n, args.k = gp.k, args.splits = splits, args.gelu = gp.gelu_tanh;
  args.nk = gp.k / splits / kKC;
  const int fit = static_cast<int>(kSmemBudget / C::kStageBytes);
  args.stages = std::max(1, std::min({args.nk, kMaxStages, fit}));
  const size_t smem =
      std::max(size_t{static_cast<size_t>(args.stages) * C::kStageBytes}, C::kPartBytes) + 1024;
  const auto kernel = WgmmaGemmKernel<WG, MT>;
  // A refused launch (e.g. a cluster the GPU cannot place) is returned, and cleared from the
  // runtime's last error so that the tuner's later checks do not see it.
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem));
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = static_cast<unsigned>(splits);
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(gp.n / C::BN), static_cast<unsigned>(splits),
                     static_cast<unsigned>((gp.m + MT - 1) / MT));
  cfg.blockDim = dim3(C::kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = PdlEnabled() ? 2 : 1;
  if (err == cudaSuccess) err = cudaLaunchKernelEx(&cfg, kernel, args);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return Internal(std::string("wgmma GEMM launch: ") + cudaGetErrorString(err));
  }
  return Status::Ok();
}

}  // namespace

int WgmmaGemmConfigs() { return kNumConfigs; }

bool WgmmaGemmEnabled() {
  const char* v = std::getenv("PETAL_GEMM_WGMMA");
  return v != nullptr && std::string(v) == "1";
}

std::string WgmmaGemmName(int config) {
  if (config < 0 || config >= kNumConfigs) return "wgmma?";
  const ConfigInfo& c = kConfigs[config];
  return "wgmma" + std::to_string(64 * c.wg) + "x" + std::to_string(c.mt);
}

void WgmmaGemmConfigsFor(int m, int out[2]) {
  int mt = 0;
  while (mt < 2 && (32 << mt) < m) ++mt;
  out[0] = 2 * mt;
  out[1] = 2 * mt + 1;
}

bool WgmmaGemmSupported(const GemmParams& p, int config, int splits) {
#if defined(PETAL_HAVE_SM90A)
  if (config < 0 || config >= kNumConfigs || p.fp8() || !CurrentCudaDevice().hopper) return false;
  if (splits != 1 && splits != 2 && splits != 4 && splits != 8) return false;
  const int bn = 64 * kConfigs[config].wg;
  if (p.m < 1 || p.m > kWgmmaGemmMaxM || p.n % bn != 0 || p.k % (kKC * splits) != 0) return false;
  return IsAligned(p.a, 16) && IsAligned(p.w, 16) && IsAligned(p.out, 8);
#else
  (void)p, (void)config, (void)splits;
  return false;  // built without an sm_90a target
#endif
}

Status LaunchWgmmaGemm(const GemmParams& p, int config, int splits, cudaStream_t stream) {
  if (!WgmmaGemmSupported(p, config, splits))
    return InvalidArgument("wgmma GEMM: unsupported problem, configuration or device");
  switch (config) {
    case 0:
      return Launch<1, 32>(p, splits, stream);
    case 1:
      return Launch<2, 32>(p, splits, stream);
    case 2:
      return Launch<1, 64>(p, splits, stream);
    case 3:
      return Launch<2, 64>(p, splits, stream);
    case 4:
      return Launch<1, 128>(p, splits, stream);
    default:
      return Launch<2, 128>(p, splits, stream);
  }
}

}  // namespace petal::cuda
