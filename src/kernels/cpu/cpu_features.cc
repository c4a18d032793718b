#include "kernels/cpu/cpu_features.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dnnl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace petal::cpu {
namespace {

#if defined(__x86_64__)
struct Regs {
  uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs Cpuid(uint32_t leaf, uint32_t sub) {
  Regs r;
  if (__get_cpuid_max(0, nullptr) < leaf) return r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}

uint64_t Xgetbv() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool Bit(uint32_t v, int b) { return (v >> b) & 1u; }

// Linux 5.16+: AMX tile data state is off until the process asks for it.
bool RequestAmxPermission() {
  constexpr int kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXtileData = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXtileData) != 0) return false;
  unsigned long mask = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &mask) != 0) return false;
  return (mask >> kXtileData) & 1u;
}
#endif

CpuFeatures Probe() {
  CpuFeatures f;
#if defined(__x86_64__)
  const Regs l1 = Cpuid(1, 0), l7 = Cpuid(7, 0), l7s1 = Cpuid(7, 1);
  const bool osxsave = Bit(l1.c, 27);
  const uint64_t xcr0 = osxsave ? Xgetbv() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6, zmm = ymm && (xcr0 & 0xe0) == 0xe0;
  const bool tiles = (xcr0 & 0x60000) == 0x60000;
  f.avx2 = ymm && Bit(l1.c, 28) && Bit(l1.c, 12) && Bit(l7.b, 5);
  f.avx512 = zmm && f.avx2 && Bit(l7.b, 16) && Bit(l7.b, 17) && Bit(l7.b, 30) && Bit(l7.b, 31);
  f.avx512_vnni = f.avx512 && Bit(l7.c, 11);
  f.avx512_bf16 = f.avx512 && Bit(l7s1.a, 5);
  f.avx_vnni = f.avx2 && Bit(l7s1.a, 4);
  const bool amx = f.avx512 && tiles && Bit(l7.d, 24);
  if (amx) {
    if (RequestAmxPermission()) {
      f.amx_bf16 = Bit(l7.d, 22);
      f.amx_int8 = Bit(l7.d, 25);
    } else {
      f.amx_denied = true;
    }
  }
#endif
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      f.model = line.substr(line.find(':') + 2);
      break;
    }
  }
  if (f.model.empty()) f.model = "unknown CPU";
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) f.usable_cores = std::max(1, CPU_COUNT(&set));
  return f;
}

}  // namespace

const std::vector<std::string>& IsaLevels() {
  static const std::vector<std::string> levels = {"generic", "avx2", "avx512", "avx512_bf16",
                                                  "amx"};
  return levels;
}

std::string CpuFeatures::IsaLevel() const {
  if (amx_bf16 || amx_int8) return "amx";
  if (avx512_bf16) return "avx512_bf16";
  if (avx512) return "avx512";
  if (avx2) return "avx2";
  return "generic";
}

bool IsaLevelAtMost(const std::string& level, const CpuFeatures& f) {
  const auto& l = IsaLevels();
  const auto want = std::find(l.begin(), l.end(), level),
             have = std::find(l.begin(), l.end(), f.IsaLevel());
  return want != l.end() && want <= have;
}

CpuFeatures CapFeatures(CpuFeatures f, const std::string& cap) {
  f.cap = cap.empty() ? "auto" : cap;
  if (f.cap == "auto" || f.cap == "amx") return f;
  f.amx_bf16 = f.amx_int8 = false;
  if (f.cap == "avx512_bf16") return f;
  f.avx512_bf16 = false;
  if (f.cap == "avx512") return f;
  f.avx512 = f.avx512_vnni = false;
  if (f.cap == "avx2") return f;
  f.avx2 = f.avx_vnni = false;  // "generic" and anything unknown
  return f;
}

std::string CpuFeatures::BestIsa() const {
  if (amx_bf16 || amx_int8) return "amx";
  if (avx512) return "avx512";
  if (avx2) return "avx2";
  return "generic";
}

std::string CpuFeatures::Describe() const {
  std::string flags;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!flags.empty()) flags += ' ';
    flags += name;
  };
  add(avx2, "avx2+fma");
  add(avx512, "avx512");
  add(avx512_vnni, "avx512_vnni");
  add(avx_vnni, "avx_vnni");
  add(avx512_bf16, "avx512_bf16");
  add(amx_bf16, "amx_bf16");
  add(amx_int8, "amx_int8");
  if (flags.empty()) flags = "none";
  std::string s = model + ", " + std::to_string(usable_cores) + " usable cores, isa " + BestIsa() +
                  " (" + flags + ")";
  if (amx_denied) s += ", AMX present but the kernel refused tile state";
  if (cap != "auto") s += ", capped by PETAL_CPU_ISA=" + cap;
  return s;
}

const CpuFeatures& UncappedCpuFeatures() {
  static const CpuFeatures f = Probe();
  return f;
}

const CpuFeatures& DetectCpuFeatures() {
  static const CpuFeatures f = [] {
    const char* cap = std::getenv("PETAL_CPU_ISA");
    CpuFeatures c = CapFeatures(UncappedCpuFeatures(), cap ? cap : "auto");
    // oneDNN dispatches on its own CPUID: cap it the same way (before its first primitive).
    if (c.cap != "auto" && c.cap != "amx") {
      dnnl_cpu_isa_t isa = dnnl_cpu_isa_sse41;
      if (c.avx512_bf16) {
        isa = dnnl_cpu_isa_avx512_core_bf16;
      } else if (c.avx512) {
        isa = dnnl_cpu_isa_avx512_core_vnni;
      } else if (c.avx2) {
        isa = dnnl_cpu_isa_avx2;
      }
      dnnl_set_max_cpu_isa(isa);
    }
    return c;
  }();
  return f;
}

}  // namespace petal::cpu
