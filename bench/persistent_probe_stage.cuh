// Activation-pipeline self-check of bench/persistent_probe.cu (--stage-k, --stages, --acts): a
// host emulation of one unit's main loop in RunUnit (persistent_probe_unit.cuh), step by step in
// the kernel's order and with its index functions (AStagesOf, AStageLen, ActByte, LdsmTokens,
// WarpCoords): the prologue's astages - 1 loads, then per stage kb the cp.async group wait
// (wait_group astages - 2) or the stage mbarrier wait (--acts tma2d), the weight-chunk waits at
// every 64-k sub-step where a chunk starts, the __syncthreads, the load of stage kb + astages - 1
// into the slot stage kb - 1 used, and every token ldmatrix read of every warp. It checks:
//  - the stages cover the unit's K slice exactly (a short last stage allowed, multiples of 64);
//  - the fill: cp.async 16-byte rows (row stride (akc + 8) * 2) or akc / 64 2-D TMA boxes per
//    stage, emulated with the 128B swizzle rule (chunk bits 4-6 ^= bits 7-9 of the absolute
//    address) at 1024-B aligned box destinations; inside the stage, no slot written twice, box
//    sources inside the input's K columns, expect_tx == the stage's box bytes (< 2^20);
//  - a load only goes to a slot whose previous stage was read before the __syncthreads that
//    precedes the issue (no write-after-read race), and the group / mbarrier phase a wait
//    releases is the one holding that stage (per-slot phase counts balanced at the unit's end,
//    so the parities carried in wpar to the next unit stay right);
//  - every weight chunk waited exactly once per unit, before any read of its k;
//  - every token ldmatrix (x4, or x2 when NBW == 1) of every warp and k16 step reads (token, k ..
//    k + 7) of the stage being consumed, 16-B aligned, inside the stage, rows < M, and the 8 rows
//    of each 8x8 matrix fall in 8 distinct 16-byte bank groups.
#pragma once
#include <string>
#include <vector>

#include "persistent_probe_tma.cuh"

namespace probe {
namespace {

bool ActLayoutCheck(const PhaseCfg& c, int m, int arena, int stage_bytes, bool atma,
                    std::string* why) {
  const int S = c.astages, nst = AStagesOf(c);
  if (S < 2 || S > kMaxAStages || c.akc < kKC || c.akc % kKC || c.akc > kMaxStageK)
    return *why = "stage-k / stages out of range", false;
  if (atma && m > 256) return *why = "act box rows > 256", false;
  int covered = 0;
  for (int kb = 0; kb < nst; ++kb) {
    const int len = AStageLen(c, kb);
    if (len <= 0 || len % kKC || len > c.akc) return *why = "activation stage length", false;
    covered += len;
  }
  if (covered != c.ks) return *why = "activation stages do not cover the K slice", false;
  for (int split = 0; split < c.splits; ++split)  // sources: the slice's k lies inside K
    if (split * c.ks + c.ks > c.k || c.k > c.lda || (c.lda * 2) % 16)
      return *why = "activation source outside the input", false;

  std::vector<std::vector<int>> owner(S, std::vector<int>(stage_bytes / 2, -1));
  std::vector<int> slot_kb(S, -1), slot_read(S, 1), issued(S, 0), waited(S, 0);
  std::vector<int> load_group(nst, -1), chunk_waits(c.nwc, 0);
  int committed = 0;
  auto issue = [&](int kb) {
    const int slot = kb % S, len = AStageLen(c, kb), base = arena + slot * stage_bytes;
    if (!slot_read[slot]) return *why = "stage loaded into a slot not yet read", false;
    if (base % kSwzAlign) return *why = "activation stage not 1024-B aligned", false;
    std::fill(owner[slot].begin(), owner[slot].end(), -1);
    long tx = 0;
    for (int r = 0; r < m; ++r)
      for (int e = 0; e < len; ++e) {
        int at = r * ARow(c.akc) + e * 2;
        if (atma) {
          const int box = base + (e / kBoxK) * m * kBoxK * 2;
          if (box % kSwzAlign) return *why = "activation TMA box not 1024-B aligned", false;
          at = Swizzle128(box + r * kBoxK * 2 + (e % kBoxK) * 2) - base;
          ++tx;
        }
        if (at < 0 || at + 2 > stage_bytes || owner[slot][at / 2] != -1)
          return *why = "activation stage fill overlaps / out of the stage", false;
        owner[slot][at / 2] = r * 65536 + kb * c.akc + e;
      }
    if (atma && (tx * 2 != static_cast<long>(m) * len * 2 || tx * 2 >= (1 << 20)))
      return *why = "activation expect_tx bytes", false;
    slot_kb[slot] = kb, slot_read[slot] = 0, ++issued[slot], load_group[kb] = committed;
    return true;
  };
  auto wait_w = [&](int kw) {  // the kernel's wait_w
    const int ch = WeightWaitChunk(c, kw);
    if (ch >= c.nwc) return *why = "weight chunk index", false;
    if (ch >= 0) ++chunk_waits[ch];
    return true;
  };
  for (int st = 0; st < S - 1; ++st) {
    if (st < nst && !issue(st)) return false;
    ++committed;
  }
  for (int kb = 0; kb < nst; ++kb) {
    const int slot = kb % S;
    // cp.async.wait_group S - 2: groups [0, committed - (S - 2)) complete
    if (!atma && !(load_group[kb] >= 0 && load_group[kb] < committed - (S - 2)))
      return *why = "cp.async wait does not cover the stage", false;
    if (atma && issued[slot] != waited[slot] + 1) return *why = "stage mbarrier phase", false;
    ++waited[slot];
    if (slot_kb[slot] != kb) return *why = "stage slot holds another stage", false;
    if (!wait_w(kb * c.akc)) return false;
    if (kb > 0) slot_read[(kb - 1) % S] = 1;  // __syncthreads: stage kb - 1's readers are done
    if (kb + S - 1 < nst && !issue(kb + S - 1)) return false;
    ++committed;
    const int nsub = AStageLen(c, kb) / kKC;
    for (int sub = 0; sub < nsub; ++sub) {
      if (sub && !wait_w(kb * c.akc + sub * kKC)) return false;
      for (int kk = 0; kk < kKC / 16; ++kk) {
        const int kw = kb * c.akc + sub * kKC + kk * 16, kc = (sub * kKC + kk * 16) / 8;
        if (kw / c.wchunk >= c.nwc || chunk_waits[kw / c.wchunk] != 1)
          return *why = "weight chunk read before its wait", false;
        for (int w = 0; w < kWarps; ++w) {
          int fg, tg, kg;
          WarpCoords(c, w, &fg, &tg, &kg);
          if ((kw / 16) % c.wk != kg) continue;
          const int tblk = tg * c.nbw;
          for (int j = 0; j < c.nbw; j += 2) {
            const int lanes = c.nbw == 1 ? 16 : 32;
            int groups[4] = {0, 0, 0, 0};
            for (int lane = 0; lane < lanes; ++lane) {
              const RowK t = LdsmTokens(lane);
              const int row = (tblk + j) * 8 + t.row;
              const int addr = ActByte(m, c.akc, atma, row, kc + t.k / 8);
              if (addr % 16 || addr < 0 || addr + 16 > stage_bytes || row >= m)
                return *why = "token ldmatrix address", false;
              for (int e = 0; e < 8; ++e)
                if (owner[slot][addr / 2 + e] != row * 65536 + kw + t.k + e)
                  return *why = "token ldmatrix reads the wrong activation element", false;
              groups[lane / 8] |= 1 << ((addr >> 4) & 7);
            }
            for (int q = 0; q < lanes / 8; ++q)
              if (groups[q] != 0xff) return *why = "token ldmatrix bank conflict", false;
          }
        }
      }
    }
  }
  for (int ch = 0; ch < c.nwc; ++ch)
    if (chunk_waits[ch] != 1) return *why = "weight chunk not waited exactly once", false;
  for (int s = 0; s < S; ++s)
    if (issued[s] != waited[s]) return *why = "stage phases unbalanced at the unit's end", false;
  return true;
}

}  // namespace
}  // namespace probe
