// A CPU emulator for the attention kernels, for tests: runs every CUDA thread of a CTA as a
// cooperative context (ucontext) and emulates what the kernels use: ldmatrix (plain and .trans),
// mma.m16n8k16 bf16 and shfl.xor per the PTX ISA, __syncthreads, and cp.async (a committed group
// lands either at once or as late as wait_group allows, chosen at random). Include it before the
// kernel headers (it defines PETAL_ATTN_EMULATE and the built-ins they use), then call RunCta.
// Deadlocks, diverged warp collectives and out-of-range shared-memory accesses set M().error.
// Thread-safety: a single global machine; single-threaded use only.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

enum class Op { kRun, kLdsm, kLdsmT, kMma, kShfl, kAny, kWarpSync, kBarrier, kDone };

struct Copy {
  uint32_t dst;
  const void* src;
  bool valid;
};

struct Lane {
  ucontext_t ctx{};
  Op op = Op::kRun;
  uint32_t addr = 0;  // ldmatrix row address
  uint32_t a[4] = {}, b[2] = {};
  float c[4] = {};
  float f = 0.0f, f_out = 0.0f;
  int xor_mask = 0;
  uint32_t r[4] = {};
  std::vector<std::vector<Copy>> pending;  // committed cp.async groups, oldest first
  std::vector<Copy> open;                  // issued since the last commit
};

struct Machine {
  std::vector<Lane> lanes;
  std::vector<std::vector<char>> stacks;
  int cur = 0;
  ucontext_t sched{};
  std::function<void()> body;
  Dim3 block_idx;
  unsigned char* smem = nullptr;
  size_t smem_size = 0;
  std::mt19937 rng{1};
  std::string error;
};
inline Machine& M() {
  static Machine m;
  return m;
}
inline Lane& Me() { return M().lanes[M().cur]; }
inline void Yield() { swapcontext(&Me().ctx, &M().sched); }
inline Dim3 ThreadIdx() {
  Dim3 d;
  d.x = static_cast<unsigned>(M().cur);
  return d;
}
inline void Fail(const std::string& e) {
  if (M().error.empty()) M().error = e;
}

inline void SyncThreads() {
  Me().op = Op::kBarrier;
  Yield();
}
inline bool AnySync(unsigned mask, bool pred) {
  if (mask != 0xffffffffu) Fail("vote with a partial mask");
  Me().f = pred ? 1.0f : 0.0f;
  Me().op = Op::kAny;
  Yield();
  return Me().f_out != 0.0f;
}
inline void SyncWarp() {
  Me().op = Op::kWarpSync;
  Yield();
}
inline float ShflXor(unsigned mask, float v, int x) {
  if (mask != 0xffffffffu) Fail("shfl with a partial mask");
  Me().f = v;
  Me().xor_mask = x;
  Me().op = Op::kShfl;
  Yield();
  return Me().f_out;
}

inline void Land(const Copy& c) {
  if (c.dst % 16 != 0 || c.dst + 16 > M().smem_size) {
    Fail("cp.async destination out of range or misaligned: " + std::to_string(c.dst));
    return;
  }
  if (c.valid) {
    std::memcpy(M().smem + c.dst, c.src, 16);
  } else {
    std::memset(M().smem + c.dst, 0, 16);
  }
}

inline uint16_t Load16(uint32_t addr) {
  uint16_t v;
  std::memcpy(&v, M().smem + addr, 2);
  return v;
}
inline float AsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float Bf16Lo(uint32_t r) { return AsFloat(r << 16); }
inline float Bf16Hi(uint32_t r) { return AsFloat(r & 0xFFFF0000u); }

// Executes the warp-collective instruction all 32 lanes of warp w are waiting at.
inline void ExecWarp(int w) {
  Lane* L = &M().lanes[32 * w];
  const Op op = L[0].op;
  for (int i = 0; i < 32; ++i) {
    if (L[i].op != op) return Fail("lanes of warp " + std::to_string(w) + " diverged");
  }
  if (op == Op::kLdsm || op == Op::kLdsmT) {
    for (int i = 0; i < 32; ++i) {
      if (L[i].addr % 16 != 0 || L[i].addr + 16 > M().smem_size) {
        return Fail("ldmatrix address out of range or misaligned: " + std::to_string(L[i].addr));
      }
    }
    for (int lane = 0; lane < 32; ++lane) {
      for (int i = 0; i < 4; ++i) {
        if (op == Op::kLdsm) {  // row lane/4 of matrix i, elements 2(lane%4), +1
          const uint32_t row = L[8 * i + lane / 4].addr;
          L[lane].r[i] =
              Load16(row + 4 * (lane % 4)) | (uint32_t{Load16(row + 4 * (lane % 4) + 2)} << 16);
        } else {  // column lane/4 of matrix i, rows 2(lane%4), +1
          const uint32_t lo = L[8 * i + 2 * (lane % 4)].addr + 2 * (lane / 4);
          const uint32_t hi = L[8 * i + 2 * (lane % 4) + 1].addr + 2 * (lane / 4);
          L[lane].r[i] = Load16(lo) | (uint32_t{Load16(hi)} << 16);
        }
      }
    }
  } else if (op == Op::kMma) {  // PTX ISA m16n8k16 .row.col fragment layouts
    float A[16][16], B[16][8];
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      const uint32_t* a = L[lane].a;
      A[g][2 * t] = Bf16Lo(a[0]), A[g][2 * t + 1] = Bf16Hi(a[0]);
      A[g + 8][2 * t] = Bf16Lo(a[1]), A[g + 8][2 * t + 1] = Bf16Hi(a[1]);
      A[g][2 * t + 8] = Bf16Lo(a[2]), A[g][2 * t + 9] = Bf16Hi(a[2]);
      A[g + 8][2 * t + 8] = Bf16Lo(a[3]), A[g + 8][2 * t + 9] = Bf16Hi(a[3]);
      B[2 * t][g] = Bf16Lo(L[lane].b[0]), B[2 * t + 1][g] = Bf16Hi(L[lane].b[0]);
      B[2 * t + 8][g] = Bf16Lo(L[lane].b[1]), B[2 * t + 9][g] = Bf16Hi(L[lane].b[1]);
    }
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      for (int e = 0; e < 4; ++e) {
        const int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
        float sum = 0.0f;
        for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
        L[lane].c[e] += sum;
      }
    }
  } else if (op == Op::kShfl) {
    for (int lane = 0; lane < 32; ++lane) {
      if (L[lane].xor_mask != L[0].xor_mask) return Fail("shfl lanes disagree on the lane mask");
      L[lane].f_out = L[lane ^ L[0].xor_mask].f;
    }
  } else if (op == Op::kAny) {
    float any = 0.0f;
    for (int lane = 0; lane < 32; ++lane) any = std::max(any, L[lane].f);
    for (int lane = 0; lane < 32; ++lane) L[lane].f_out = any;
  } else if (op != Op::kWarpSync) {
    return;  // not a warp collective
  }
  for (int i = 0; i < 32; ++i) L[i].op = Op::kRun;
}

inline void Trampoline() {
  M().body();
  Me().op = Op::kDone;  // returning resumes uc_link = the scheduler
}

// Runs one CTA of `threads` threads (a multiple of 32) to completion.
inline void RunCta(int threads, unsigned block, const std::function<void()>& body) {
  Machine& m = M();
  m.body = body;
  m.block_idx.x = block;
  m.lanes.assign(threads, Lane{});
  if (m.stacks.size() < static_cast<size_t>(threads)) m.stacks.resize(threads);
  for (int t = 0; t < threads; ++t) {
    m.stacks[t].resize(64 * 1024);
    getcontext(&m.lanes[t].ctx);
    m.lanes[t].ctx.uc_stack.ss_sp = m.stacks[t].data();
    m.lanes[t].ctx.uc_stack.ss_size = m.stacks[t].size();
    m.lanes[t].ctx.uc_link = &m.sched;
    makecontext(&m.lanes[t].ctx, Trampoline, 0);
  }
  while (m.error.empty()) {
    bool progress = false;
    for (int t = 0; t < threads; ++t) {
      if (m.lanes[t].op != Op::kRun) continue;
      m.cur = t;
      swapcontext(&m.sched, &m.lanes[t].ctx);
      progress = true;
    }
    for (int w = 0; w < threads / 32; ++w) {
      const Op op = m.lanes[32 * w].op;
      if (op == Op::kLdsm || op == Op::kLdsmT || op == Op::kMma || op == Op::kShfl ||
          op == Op::kAny || op == Op::kWarpSync) {
        bool all = true;
        for (int i = 0; i < 32; ++i) all = all && m.lanes[32 * w + i].op != Op::kRun;
        if (all) {
          ExecWarp(w);
          progress = true;
        }
      }
    }
    int done = 0, barrier = 0;
    for (const Lane& l : m.lanes) {
      done += l.op == Op::kDone;
      barrier += l.op == Op::kBarrier;
    }
    if (done == threads) return;
    if (barrier > 0 && barrier + done == threads) {
      if (done > 0) return Fail("__syncthreads reached while some threads had exited");
      for (Lane& l : m.lanes) l.op = Op::kRun;
      progress = true;
    }
    if (!progress) return Fail("deadlock: threads wait at mismatched collectives");
  }
}

}  // namespace emu

// The kernels' view of the CUDA built-ins and PTX wrappers, emulated.
#define PETAL_ATTN_EMULATE 1
#define __launch_bounds__(...)
#define threadIdx (::emu::ThreadIdx())
#define blockIdx (::emu::M().block_idx)
#define __syncthreads() ::emu::SyncThreads()
#define __syncwarp() ::emu::SyncWarp()
#define __any_sync(mask, pred) ::emu::AnySync(mask, pred)
#define __shfl_xor_sync(mask, v, x) ::emu::ShflXor(mask, v, x)

namespace petal::cuda::attn {
using std::max;
using std::min;
alignas(16) inline unsigned char smem_raw[256 * 1024];  // the CTA's dynamic shared memory

inline uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - smem_raw);
}
inline void CpAsync16(uint32_t dst, const void* src, bool valid) {
  ::emu::Me().open.push_back({dst, src, valid});
}
inline void CpAsyncCommit() {
  ::emu::Lane& me = ::emu::Me();
  std::vector<::emu::Copy> group = std::move(me.open);
  me.open.clear();
  // The group lands right away or as late as allowed (at the wait that needs it); either way it
  // stays in the ordered list, since wait_group counts the most recent groups, landed or not.
  if (::emu::M().rng() % 2) {
    for (const auto& c : group) ::emu::Land(c);
    group.clear();
  }
  me.pending.push_back(std::move(group));
}
template <int kPending>
void CpAsyncWait() {
  ::emu::Lane& me = ::emu::Me();
  while (me.pending.size() > static_cast<size_t>(kPending)) {
    for (const auto& c : me.pending.front()) ::emu::Land(c);
    me.pending.erase(me.pending.begin());
  }
}
inline void LdMatrixX4(uint32_t (&r)[4], uint32_t addr) {
  ::emu::Me().addr = addr;
  ::emu::Me().op = ::emu::Op::kLdsm;
  ::emu::Yield();
  std::memcpy(r, ::emu::Me().r, sizeof(r));
}
inline void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
  ::emu::Me().addr = addr;
  ::emu::Me().op = ::emu::Op::kLdsmT;
  ::emu::Yield();
  std::memcpy(r, ::emu::Me().r, sizeof(r));
}
inline void MmaBf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  ::emu::Lane& me = ::emu::Me();
  std::memcpy(me.a, a, sizeof(me.a));
  me.b[0] = b0;
  me.b[1] = b1;
  std::memcpy(me.c, c, sizeof(me.c));
  me.op = ::emu::Op::kMma;
  ::emu::Yield();
  std::memcpy(c, ::emu::Me().c, sizeof(me.c));
}
inline uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t r;
  std::memcpy(&r, &v, 4);
  return r;
}
inline float FastExp2(float x) { return std::exp2(x); }
}  // namespace petal::cuda::attn
