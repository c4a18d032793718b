// Internal to gemm_cutlass*.cu: one CUTLASS 3 Hopper GEMM instantiation per tile configuration
// (each in its own translation unit, since each takes minutes to compile), behind the plain call
// of gemm_cutlass_configs.h. See gemm_cutlass.h for what the kernels compute and why transposed.
#pragma once

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <type_traits>

#include "kernels/cuda/cutlass_smem.cuh"
#include "kernels/cuda/gemm_cutlass_configs.h"

namespace petal::cuda::cutlass_gemm {

// Cooperative: two consumer warpgroups share a 128-feature tile, with the stream-K scheduler
// (data-parallel, stream-K or split-K per call). Pingpong: each consumer warpgroup owns a
// 64-feature tile, persistent data-parallel scheduler only.
struct Cooperative {
  static constexpr int kFeatures = 128;
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using Scheduler = cutlass::gemm::StreamKScheduler;
};
struct Pingpong {
  static constexpr int kFeatures = 64;
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
  using Scheduler = cutlass::gemm::PersistentScheduler;
};

template <int kTokens, class Schedule = Cooperative>
struct Kernel {
  using Bf16 = cutlass::bfloat16_t;
  static constexpr bool kStreamK =
      std::is_same_v<typename Schedule::Scheduler, cutlass::gemm::StreamKScheduler>;
  // M = output features (weights' rows), N = tokens, K = 64 bf16 = one 128-byte swizzle row.
  using TileShape = cute::Shape<cute::Int<Schedule::kFeatures>, cute::Int<kTokens>, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  // out^T [features, tokens] column-major is out [tokens, features] row-major.
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, Bf16,
      cutlass::layout::ColumnMajor, 8, Bf16, cutlass::layout::ColumnMajor, 8,
      typename Schedule::Epilogue>::CollectiveOp;
  // A = w [features, K] row-major; B = a [tokens, K] row-major, i.e. K-major ("column-major" B).
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, cutlass::layout::RowMajor, 8, Bf16,
      cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename Schedule::Mainloop>::CollectiveOp;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop,
                                                          Epilogue, typename Schedule::Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  static typename Gemm::Arguments MakeArguments(const Call& call) {
    const GemmParams& p = *call.p;
    using StrideA = typename GemmKernel::StrideA;
    using StrideB = typename GemmKernel::StrideB;
    using StrideC = typename GemmKernel::StrideC;
    using StrideD = typename GemmKernel::StrideD;
    const auto sa = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(p.n, p.k, 1));
    const auto sb = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(p.m, p.k, 1));
    const auto sc = cutlass::make_cute_packed_stride(StrideC{}, cute::make_shape(p.n, p.m, 1));
    const auto sd = cutlass::make_cute_packed_stride(StrideD{}, cute::make_shape(p.n, p.m, 1));
    auto* out = reinterpret_cast<Bf16*>(p.out);
    // Without an addend the source is the output itself with beta = 0 (never read), which keeps
    // a valid address in the epilogue's TMA descriptor.
    const Bf16* src = p.c ? reinterpret_cast<const Bf16*>(p.c) : out;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {p.n, p.m, p.k, 1},
        {reinterpret_cast<const Bf16*>(p.w), sa, reinterpret_cast<const Bf16*>(p.a), sb},
        {{1.f, p.c ? 1.f : 0.f}, src, sc, out, sd},
        {call.device, call.sm_count}};
    if constexpr (kStreamK) {
      using Decomposition = typename GemmKernel::TileScheduler::DecompositionMode;
      using Reduction = typename GemmKernel::TileScheduler::ReductionMode;
      args.scheduler.reduction_mode = Reduction::Deterministic;
      if (call.splits == 0) {
        args.scheduler.decomposition_mode = Decomposition::StreamK;
      } else if (call.splits == 1) {
        args.scheduler.decomposition_mode = Decomposition::DataParallel;
      } else {
        args.scheduler.decomposition_mode = Decomposition::SplitK;
        args.scheduler.splits = call.splits;
      }
    }
    return args;
  }

  static bool Supported(const Call& call, size_t* workspace) {
    if (!kStreamK && call.splits != 1) return false;  // data-parallel only
    const typename Gemm::Arguments args = MakeArguments(call);
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return false;
    *workspace = Gemm::get_workspace_size(args);
    return true;
  }

  // Raises the kernel's shared-memory limit (once; outside capture).
  static bool SetAttributesOnce() { return RaiseSmemLimitOnce<GemmKernel>(); }

  static const char* Launch(const Call& call) {
    if (!kStreamK && call.splits != 1) return "this configuration is data-parallel only";
    if (!SetAttributesOnce()) return "cudaFuncSetAttribute failed";
    typename Gemm::Arguments args = MakeArguments(call);
    if (Gemm::get_workspace_size(args) > call.workspace_bytes) return "workspace too small";
    if (GemmKernel::initialize_workspace(args, call.workspace, call.stream) !=
        cutlass::Status::kSuccess)
      return "initialize_workspace failed";
    typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, call.workspace);
    // Built with CUTLASS_ENABLE_GDC_FOR_SM90: the kernel waits for its predecessor before its
    // first load and releases its dependents after its last tile's main loop.
    if (Gemm::run(params, call.stream, nullptr, call.pdl) != cutlass::Status::kSuccess)
      return "launch failed";
    return nullptr;
  }
};

}  // namespace petal::cuda::cutlass_gemm
