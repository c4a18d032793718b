// Internal to gemm_fused_*.cu: a CUTLASS 3 Hopper GEMM (TMA loads, wgmma, warp-specialised
// cooperative kernel, persistent tile scheduler) whose epilogue is ours: it reads the fp32
// accumulators in registers and writes whatever the fused op produces (gemm_fused_epilogues.cuh).
// out = f(x w^T) with x [m, k] and w [n, k] row-major bf16. One instantiation per (tile, epilogue),
// each in its own translation unit (each takes about a minute to compile).
#pragma once

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/detail.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include "kernels/cuda/cutlass_smem.cuh"
#include "kernels/cuda/gemm_fused_configs.h"

namespace petal::cuda::gemm_fused {

// What CUTLASS's kernel and adapter ask of a register-to-global epilogue (DefaultEpilogue's
// shape); Derived adds Arguments, FromCall, can_implement and the operator() that stores.
template <class Derived>
struct EpilogueBase {
  using ElementC = cutlass::bfloat16_t;  // unused: no source operand
  using ElementD = cutlass::bfloat16_t;
  using StrideC = cute::Stride<int64_t, cute::Int<1>, int64_t>;
  using StrideD = StrideC;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  using ThreadEpilogueOp = void;  // named by GemmUniversalAdapter, unused
  struct SharedStorage {};
  using TensorStorage = SharedStorage;

  template <class ProblemShape, class Args>
  static constexpr Args to_underlying_arguments(ProblemShape const&, Args const& args, void*) {
    return args;
  }
  template <class ProblemShape, class Args>
  static size_t get_workspace_size(ProblemShape const&, Args const&) {
    return 0;
  }
  template <class ProblemShape, class Args>
  static cutlass::Status initialize_workspace(ProblemShape const&, Args const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  CUTLASS_DEVICE bool is_source_needed() { return false; }
};

// The (m, n) coordinates of the accumulators a thread holds, as a tensor shaped like them.
template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class TiledMma>
CUTLASS_DEVICE auto ThreadCoords(ProblemShapeMNKL shape, BlockShapeMNK blk, BlockCoordMNKL coord,
                                 TiledMma mma, int thread_idx) {
  using namespace cute;
  Tensor all = make_identity_tensor(make_shape(get<0>(shape), get<1>(shape)));
  Tensor tile = local_tile(all, take<0, 2>(blk), make_coord(get<0>(coord), get<1>(coord)));
  return mma.get_thread_slice(thread_idx).partition_C(tile);
}

// Cooperative: two consumer warpgroups share one 128-token tile. Pingpong: each consumer
// warpgroup owns a 64-token tile, and one's epilogue overlaps the other's main loop.
struct Cooperative {
  static constexpr int kTileM = 128;
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
};
struct Pingpong {
  static constexpr int kTileM = 64;
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
};

// kClusterM CTAs along M (tokens) share each weight tile through TMA multicast.
template <int kTileN, class Schedule, int kClusterM, class Epi>
struct Kernel {
  using Bf16 = cutlass::bfloat16_t;
  // M = tokens, N = output features, K = 64 bf16 = one 128-byte swizzle row.
  using TileShape = cute::Shape<cute::Int<Schedule::kTileM>, cute::Int<kTileN>, cute::_64>;
  using ClusterShape = cute::Shape<cute::Int<kClusterM>, cute::_1, cute::_1>;
  using Epilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Epi>;
  // A = x [tokens, K] row-major; B = w [features, K] row-major, i.e. K-major ("column-major" B).
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, cutlass::layout::RowMajor, 8, Bf16,
      cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<0>,
      typename Schedule::Mainloop>::CollectiveOp;
  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue,
                                           cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  using RasterOptions = cutlass::gemm::kernel::detail::RasterOrderOptions;
  static typename Gemm::Arguments MakeArguments(const Call& c) {
    using StrideA = typename GemmKernel::StrideA;
    using StrideB = typename GemmKernel::StrideB;
    const auto sa = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(c.m, c.k, 1));
    const auto sb = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(c.n, c.k, 1));
    return typename Gemm::Arguments{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {c.m, c.n, c.k, 1},
        {reinterpret_cast<const Bf16*>(c.x), sa, reinterpret_cast<const Bf16*>(c.w), sb},
        Epi::FromCall(c),
        {c.device, c.sm_count},
        {c.max_swizzle, c.raster == 1   ? RasterOptions::AlongM
                        : c.raster == 2 ? RasterOptions::AlongN
                                        : RasterOptions::Heuristic}};
  }

  // Raises the kernel's shared-memory limit (once; outside capture).
  static bool SetAttributesOnce() { return RaiseSmemLimitOnce<GemmKernel>(); }

  static const char* Launch(const Call& c) {
    if (!SetAttributesOnce()) return "cudaFuncSetAttribute failed";
    typename Gemm::Arguments args = MakeArguments(c);
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return "CUTLASS cannot implement";
    if (Gemm::get_workspace_size(args) != 0) return "the kernel wants a workspace";
    typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, nullptr);
    if (Gemm::run(params, c.stream, nullptr, c.pdl) != cutlass::Status::kSuccess)
      return "launch failed";
    return nullptr;
  }

  static size_t Workspace(const Call& c) { return Gemm::get_workspace_size(MakeArguments(c)); }
};

}  // namespace petal::cuda::gemm_fused

// One translation unit's definitions of gemm_fused_configs.h's three functions.
#define PETAL_FUSED_GEMM_DEFINE(name, ...)                                    \
  namespace petal::cuda::gemm_fused {                                         \
  const char* Launch##name(const Call& c) { return __VA_ARGS__::Launch(c); }  \
  size_t Workspace##name(const Call& c) { return __VA_ARGS__::Workspace(c); } \
  bool Prepare##name() { return __VA_ARGS__::SetAttributesOnce(); }           \
  }
