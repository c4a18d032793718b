// Per-M plans of bench/persistent_probe.cu: one decomposition per (M, weight path, k-group
// reduction mode, activation stage depth / count), its shared-memory layout (weight arena, then
// the activation area: --stages stages of StageBytes(M, --stage-k), which the smem k-group
// reduction reuses after each unit's main loop and may extend), the host self-check of every plan,
// and the --dry matrix over tilings and M.
//
// A plan is either accepted (and then must pass every self-check: a failure is a bug, "FAIL"),
// or rejected for a stated reason (no 8-warp grid for the tile and M, tile / K constraints, or
// more shared memory than the GPU allows); rejected M are skipped with the reason printed.
#pragma once
#include <string>
#include <vector>

#include "persistent_probe_host.cuh"
#include "persistent_probe_stage.cuh"

namespace probe {
namespace {

const char* kPathNames[2] = {"bulk1d", "tma2d"};
const char* kWkNames[2] = {"global", "smem"};  // --wk-reduce: k groups' partials via ws / in CTA

// "a,b,c" -> {"a", "b", "c"}.
std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < s.size();) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}
// --tiles qkv=BNxS,o=BNxS,gu=BNxS,down=BNxS (any subset).
bool ParseTiles(const char* arg, int* bn, int* splits) {
  for (const std::string& item : SplitList(arg)) {
    const size_t eq = item.find('='), x = item.find('x');
    if (eq == std::string::npos || x == std::string::npos || x < eq) return false;
    int idx = -1;
    for (int i = 0; i < kShapes; ++i)
      if (item.substr(0, eq) == kNames[i]) idx = i;
    if (idx < 0) return false;
    bn[idx] = std::atoi(item.substr(eq + 1, x - eq - 1).c_str());
    splits[idx] = std::atoi(item.substr(x + 1).c_str());
  }
  return true;
}

// One M's decomposition for one weight path and one k-group reduction mode.
struct PlanSet {
  PhaseCfg cfg[kShapes];
  int path = kTma2d, wkred = 1, arena = 0, smem = 0;
  int stage_bytes = 0, act_bytes = 0;  // activation stage stride; activation area (>= red_bytes)
  int acts_tma = 0;                    // --acts tma2d
  int akc = kKC, astages = kAStages;   // --stage-k, --stages
  // "_kc128", "_st6": only where not the defaults (64, 4), so earlier names stay
  std::string StageSuffix() const {
    return (akc != kKC ? "_kc" + std::to_string(akc) : "") +
           (astages != kAStages ? "_st" + std::to_string(astages) : "");
  }
  std::string Name() const {
    return std::string(kPathNames[path]) + (acts_tma ? "_atma" : "") + "_wk" + kWkNames[wkred] +
           StageSuffix();
  }
};

enum PlanResult { kPlanOk = 0, kPlanRejected = 1, kPlanFail = 2 };

// Decomposition for one M: cfg[4], the arena, the activation area and the dynamic shared memory;
// kPlanRejected + reason if a shape or the shared memory is not supported, kPlanFail + reason if
// a self-check fails.
PlanResult Plan(const int* bn, const int* splits, int m, int path, int wkred, int akc, int stages,
                int smem_limit, PlanSet* ps, std::string* why) {
  PhaseCfg* cfg = ps->cfg;
  ps->path = path, ps->wkred = wkred, ps->akc = akc, ps->astages = stages;
  if (akc < kKC || akc > kMaxStageK || akc % kKC || stages < 2 || stages > kMaxAStages) {
    *why = "--stage-k must be 64, 128, 192 or 256 and --stages 2..8";
    return kPlanRejected;
  }
  for (int s = 0; s < kShapes; ++s) {
    if (!MakeCfg(s, bn[s], splits[s], m, path, wkred, &cfg[s], why)) {
      *why = std::string(kNames[s]) + ": " + *why;
      return kPlanRejected;
    }
    cfg[s].akc = akc, cfg[s].astages = stages;
  }
  ps->arena = PlaceRegions(cfg);
  ps->stage_bytes = StageBytes(m, akc);
  ps->act_bytes = stages * ps->stage_bytes;
  for (int s = 0; s < kShapes; ++s) ps->act_bytes = std::max(ps->act_bytes, cfg[s].red_bytes);
  ps->act_bytes = (ps->act_bytes + kSwzAlign - 1) / kSwzAlign * kSwzAlign;
  ps->smem = ps->arena + ps->act_bytes + kArenaSlack;
  if (ps->smem > smem_limit) {
    *why =
        std::to_string(ps->smem) + " B of shared memory needed (weight arena " +
        std::to_string(ps->arena) + " = two regions, activation area " +
        std::to_string(ps->act_bytes) +
        (ps->StageSuffix().empty()  // the default's text as before
             ? ""
             : " = max(" + std::to_string(stages) + " stages x " + std::to_string(ps->stage_bytes) +
                   " B of stage-k " + std::to_string(akc) + ", k-group reduction)") +
        "), " + std::to_string(smem_limit) + " available";
    return kPlanRejected;
  }
  for (int s = 0; s < kShapes; ++s)
    if (!SelfCheck(cfg[s], m, ps->arena, ps->act_bytes, ps->stage_bytes, why) ||
        !WeightLayoutCheck(cfg[s], ps->arena, why) ||
        !ActLayoutCheck(cfg[s], m, ps->arena, ps->stage_bytes, false, why) ||
        !ActLayoutCheck(cfg[s], m, ps->arena, ps->stage_bytes, true, why)) {
      *why = std::string(kNames[s]) + ": " + *why;
      return kPlanFail;
    }
  return kPlanOk;
}

std::string CfgJson(const PhaseCfg& c) {
  char b[512];
  std::snprintf(b, sizeof b,
                "{\"n\": %d, \"k\": %d, \"bn\": %d, \"splits\": %d, \"ks\": %d, \"units\": %d, "
                "\"parts\": %d, \"warp_tile\": \"%dx%d\", \"warp_grid\": \"%dx%dx%d\", "
                "\"wk_reduce\": \"%s\", \"red_bytes\": %d, "
                "\"wchunk\": %d, \"region_bytes\": %d, \"region_off\": %d}",
                c.n, c.k, c.bn, c.splits, c.ks, c.units, c.parts, c.mtw * 16, c.nbw * 8, c.wf, c.wt,
                c.wk, c.wk > 1 ? kWkNames[c.wkred] : "none", c.red_bytes, c.wchunk, c.region_bytes,
                c.region_off);
  return b;
}

void PrintCfg(int m, const PlanSet& ps) {
  const PhaseCfg* cfg = ps.cfg;
  std::printf(
      "M=%d %s decomposition (arena %d B + activation area %d B (%d stages x %d B) + %d "
      "B alignment slack = %d B shared):\n",
      m, ps.Name().c_str(), ps.arena, ps.act_bytes, ps.astages, ps.stage_bytes, kArenaSlack,
      ps.smem);
  if (ps.akc != kKC)
    std::printf("  activation stages of %d k (%d 64-k sub-steps; %s)\n", ps.akc, ps.akc / kKC,
                ps.acts_tma ? "--acts tma2d: that many boxes per stage" : "cp.async");
  for (int s = 0; s < kShapes; ++s) {
    const PhaseCfg& c = cfg[s];
    std::printf(
        "  %-4s N=%4d K=%4d  tile %3d x K/%d (ks %3d) = %3d units, parts %2d, warp tile "
        "%2dx%-3d grid %dx%dx%d, weight chunk %3d x %d, region %6d B @ %d\n",
        kNames[s], c.n, c.k, c.bn, c.splits, c.ks, c.units, c.parts, c.mtw * 16, c.nbw * 8, c.wf,
        c.wt, c.wk, c.wchunk, c.nwc, c.region_bytes, c.region_off);
    if (c.wk > 1)
      std::printf("       %d k groups summed %s%s\n", c.wk,
                  c.wkred ? "in shared memory (activation area, " : "through the global workspace",
                  c.wkred ? (std::to_string(c.red_bytes) + " B), kg 0 writes").c_str() : "");
    if (c.parts == 1) std::printf("       parts 1: bf16 out directly, no split-K reduction\n");
    if (c.tma)
      std::printf(
          "       tma2d: %d boxes of [%d rows x 64 k] (%d B, 128B swizzle) per unit, %d "
          "per chunk, at region + kb * %d\n",
          c.ks / kBoxK, c.bn, c.bn * 128, c.wchunk / kBoxK, c.bn * 128);
    else
      std::printf("       bulk1d: %d copies of %d B per unit, row stride %d B\n", c.bn * c.nwc,
                  c.wchunk * 2, c.wrow);
  }
}

// --dry without --tiles: the default tiling plus the two split = 1 / 2 tilings, every M of --ms
// (default 8..128 here), every weight path and both reduction modes, for every activation stage
// depth and count (--stage-k default 64,128,256 here, --stages default 4); the default (64, 4)
// block prints as before, the others after it with their names suffixed. PASS iff no accepted
// plan fails a self-check and the default tiling is accepted at every M at stage-k 64, 4 stages
// (other depths may be rejected for shared memory, with the reason).
struct Tiling {
  const char* name;
  int bn[kShapes], splits[kShapes];
};
const Tiling kDryTilings[] = {
    {"qkv=128x4,o=64x8,gu=192x4,down=64x8", {128, 64, 192, 64}, {4, 8, 4, 8}},
    {"qkv=32x1,o=16x1,gu=48x1,down=16x1", {32, 16, 48, 16}, {1, 1, 1, 1}},
    {"qkv=64x2,o=16x2,gu=96x2,down=16x2", {64, 16, 96, 16}, {2, 2, 2, 2}}};

bool DryMatrix(const std::vector<Tiling>& tilings, const std::vector<int>& ms,
               const std::vector<int>& akcs, const std::vector<int>& stages, int smem_limit) {
  bool ok = true;
  for (int akc : akcs)
    for (int st : stages) {
      const bool def = akc == kKC && st == kAStages;
      for (size_t ti = 0; ti < tilings.size(); ++ti) {
        const Tiling& t = tilings[ti];
        if (def)
          std::printf("tiling %s:\n", t.name);
        else
          std::printf("tiling %s, stage-k %d, %d stages:\n", t.name, akc, st);
        for (int m : ms)
          for (int path : {kTma2d, kBulk1d})
            for (int wkred : {1, 0}) {
              PlanSet ps;
              std::string why;
              const PlanResult r =
                  Plan(t.bn, t.splits, m, path, wkred, akc, st, smem_limit, &ps, &why);
              std::string parts;
              if (r == kPlanOk)
                for (int s = 0; s < kShapes; ++s)
                  parts += std::string(s ? " " : "") + kNames[s] + " " +
                           std::to_string(ps.cfg[s].wk) + "/" + std::to_string(ps.cfg[s].parts);
              std::printf("  M=%-3d %-16s %s%s%s\n", m, ps.Name().c_str(),
                          r == kPlanOk         ? "ok, smem "
                          : r == kPlanRejected ? "rejected: "
                                               : "FAIL: ",
                          r == kPlanOk ? std::to_string(ps.smem).c_str() : why.c_str(),
                          r == kPlanOk ? (" B, k groups / global parts: " + parts).c_str() : "");
              if (r == kPlanFail || (r == kPlanRejected && ti == 0 && def)) ok = false;
            }
      }
    }
  return ok;
}

}  // namespace
}  // namespace probe
