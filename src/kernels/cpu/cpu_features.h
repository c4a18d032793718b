// Run-time CPU feature detection for the CPU engine's fast paths: which vector ISAs (AVX2/FMA,
// AVX-512, VNNI, BF16) and AMX tiles this machine has and the OS lets us use, and the cores this
// process may run on. PETAL_CPU_ISA (env) caps what is reported, to test fallbacks on a machine
// that has more. The levels, lowest first (kIsaLevels): "generic" (no fast path: the fp32
// reference on OpenBLAS), "avx2" (AVX2 + FMA, AVX-VNNI), "avx512" (F/BW/VL/DQ + VNNI),
// "avx512_bf16" (+ AVX512-BF16), "amx" (+ AMX tiles) = "auto" (default: everything found). The
// cap is applied to oneDNN too (dnnl_set_max_cpu_isa), so its GEMMs run the capped ISA's kernels.
// Thread-safety: DetectCpuFeatures() computes once (thread-safe static) and is then read-only.
#pragma once

#include <string>
#include <vector>

namespace petal::cpu {

struct CpuFeatures {
  bool avx2 = false;         // AVX2 + FMA, with OS-enabled YMM state
  bool avx512 = false;       // AVX-512 F/BW/VL/DQ, with OS-enabled ZMM state
  bool avx512_vnni = false;  // int8 dot products on ZMM
  bool avx_vnni = false;     // int8 dot products on YMM (VEX encoded)
  bool avx512_bf16 = false;  // bf16 dot products
  bool amx_bf16 = false;     // AMX tiles, bf16 (OS state enabled and permission granted)
  bool amx_int8 = false;     // AMX tiles, int8
  bool amx_denied = false;   // the CPU has AMX but the kernel refused the XTILEDATA request
  std::string model;         // /proc/cpuinfo "model name"
  std::string cap;           // the PETAL_CPU_ISA cap in force ("auto" if none)
  int usable_cores = 1;      // CPUs in this process's affinity mask (sched_getaffinity)

  // The best ISA family present: "amx", "avx512", "avx2" or "generic".
  std::string BestIsa() const;
  // The highest PETAL_CPU_ISA level these features satisfy (one of kIsaLevels).
  std::string IsaLevel() const;
  // One line: model, cores, and the feature flags, e.g. "AMD EPYC, 2 cores, isa avx2 (avx2 fma)".
  std::string Describe() const;
};

// This machine's features, capped by PETAL_CPU_ISA. On x86-64 Linux it also asks the kernel for
// AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM) the first time, since Linux grants it per
// process.
const CpuFeatures& DetectCpuFeatures();

// The PETAL_CPU_ISA levels, lowest first.
const std::vector<std::string>& IsaLevels();

// Whether `level` (one of IsaLevels()) is at or below what `f` has.
bool IsaLevelAtMost(const std::string& level, const CpuFeatures& f);

// The features as detected from CPUID/XGETBV, with a cap applied (a level or "auto"); an unknown
// cap acts as "generic". Exposed for tests.
CpuFeatures CapFeatures(CpuFeatures f, const std::string& cap);

// The features of this machine before any PETAL_CPU_ISA cap (for tests that run each level).
const CpuFeatures& UncappedCpuFeatures();

}  // namespace petal::cpu
