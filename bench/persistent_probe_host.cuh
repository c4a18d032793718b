// Host helpers of bench/persistent_probe.cu: the per-shape decomposition (MakeCfg), the host
// self-check that runs the kernel's own index math over every shape, cuBLASLt plans, comparison.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "persistent_probe_chain.cuh"

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)
#define CKL(x)                                                                               \
  do {                                                                                       \
    cublasStatus_t s_ = (x);                                                                 \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                       \
      std::fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

namespace probe {
namespace {

const char* kNames[kShapes] = {"qkv", "o", "gu", "down"};
const int kN[kShapes] = {4096, 1024, 6144, 1024}, kK[kShapes] = {1024, 2048, 1024, 3072};
const int kLda[kShapes] = {1024, 4096, 1024, 6144};

// ---------------- decomposition (host) ----------------
bool MakeCfg(int s, int bn, int splits, int m, int tma, int wkred, PhaseCfg* c, std::string* why) {
  *c = PhaseCfg{};
  c->tma = tma;
  c->n = kN[s], c->k = kK[s], c->lda = kLda[s], c->bn = bn, c->splits = splits;
  if (bn <= 0 || splits <= 0 || bn % 16 || c->n % bn || c->k % (splits * kKC)) {
    *why = "bn must be a multiple of 16 dividing N and K / splits a multiple of 64";
    return false;
  }
  if (tma && bn > 256) {
    *why = "tma2d: a box has at most 256 rows (bn <= 256)";
    return false;
  }
  if (m < 8 || m > kMaxM || m % 8) {
    *why = "M must be a multiple of 8 in [8, 128]";
    return false;
  }
  c->ks = c->k / splits, c->tiles = c->n / bn, c->units = c->tiles * splits;
  if (c->tiles > kMaxTiles) {
    *why = "too many feature tiles";
    return false;
  }
  // Warp grid: least k groups, then the largest warp tile (fewest ldmatrix per mma).
  const int mt = bn / 16, nb = m / 8;
  int best = -1000000;
  for (int mtw : {3, 2, 1})
    for (int nbw : {8, 4, 2, 1}) {
      if (mt % mtw || nb % nbw || mtw * nbw > 24) continue;
      const int wf = mt / mtw, wt = nb / nbw;
      if (wf * wt > kWarps || kWarps % (wf * wt)) continue;
      const int wk = kWarps / (wf * wt);
      if (wk > 4) continue;
      const int score = -wk * 1000 + mtw * nbw;
      if (score > best)
        best = score, c->mtw = mtw, c->nbw = nbw, c->wf = wf, c->wt = wt, c->wk = wk;
    }
  if (best == -1000000) {
    *why = "no 8-warp grid for this tile and M (tile " + std::to_string(bn / 16) + " m16 x " +
           std::to_string(m / 8) + " n8: fewer than 2 warp tiles, i.e. > 4 k groups)";
    return false;
  }
  // wkred: the wk k groups of a unit are summed in shared memory; one global partial per split.
  c->wkred = wkred && c->wk > 1;
  c->parts = c->wkred ? splits : splits * c->wk;
  c->red_bytes = c->wkred ? (c->wk - 1) * bn * m * 4 : 0;
  c->wchunk = 0;
  for (int w = 128; w <= c->ks && !c->wchunk; w += 64)
    if (c->ks % w == 0 && c->ks / w <= kMaxChunks) c->wchunk = w;
  if (!c->wchunk && c->ks == 64) c->wchunk = 64;
  if (!c->wchunk) {
    *why = "no weight chunk size";
    return false;
  }
  c->nwc = c->ks / c->wchunk;
  c->wrow = tma ? kBoxK * 2 : c->ks * 2 + 16;
  c->region_bytes = tma ? (c->ks / kBoxK) * bn * kBoxK * 2 : bn * c->wrow;
  return true;
}

// Arena: even shapes (QKV, GU) at the bottom, odd (O, DOWN) at the top; consecutive phases
// alternate, so any two consecutive phases' regions are disjoint.
int PlaceRegions(PhaseCfg* cfg) {
  int arena = 0;
  for (int s = 0; s < kShapes; ++s)
    arena = std::max(arena, cfg[s].region_bytes + cfg[(s + 1) % kShapes].region_bytes);
  arena = (arena + kSwzAlign - 1) / kSwzAlign * kSwzAlign;  // regions stay 1024-B aligned
  for (int s = 0; s < kShapes; ++s)
    cfg[s].region_off = (s % 2 == 0) ? 0 : arena - cfg[s].region_bytes;
  return arena;
}

// Host self-check of the decomposition with the kernel's own index functions (UnitCoords,
// WarpCoords, RedSlot, PartIndex, ReduceShare), emulating the epilogue at fragment level:
//  - every (n8 token block, m16 feature tile, k16 step) multiplied exactly once;
//  - wkred: each k group q >= 1 stores its fragments to RedSlot slots (16-B aligned, inside
//    red_bytes <= the activation area, which starts at `arena`, past every weight region: no live
//    data; stages are drained by then), each slot written once per unit, and k group 0 reads only
//    slots written in this unit for the same (token block, feature tile);
//  - every global partial / output element (part, token, feature) written exactly once, and the
//    k16 steps accumulated into it recorded; ReduceTiles reads part pi of tile t only where a unit
//    of tile t wrote it (the tile counter waits for its `splits` units, which must be its writers);
//  - per output (token, feature): the k steps over all parts it is summed from (or the direct bf16
//    write when parts == 1) are every k step exactly once; every reduction group summed once;
//  - shared-memory reads and bulk copies inside their regions and aligned.
bool SelfCheck(const PhaseCfg& c, int m, int arena, int act_bytes, int stage_bytes,
               std::string* why) {
  const int nb = m / 8, mt = c.n / 16, ksteps = c.k / 16, gw = c.wf * c.wt;
  if (c.parts != (c.wkred ? c.splits : c.splits * c.wk) || (c.wkred && c.wk < 2))
    return *why = "parts", false;
  std::vector<unsigned char> mma(static_cast<size_t>(nb) * mt * ksteps, 0);
  std::vector<unsigned char> part(static_cast<size_t>(c.parts) * m * c.n, 0);
  std::vector<int> writer(static_cast<size_t>(c.parts) * m * c.n, -1);  // unit
  // k steps accumulated into part pi's fragment (t8, f16)
  std::vector<unsigned char> kc(static_cast<size_t>(c.parts) * nb * mt * ksteps, 0);
  auto kcat = [&](int pi, int t8, int f16) {
    return &kc[((static_cast<size_t>(pi) * nb + t8) * mt + f16) * ksteps];
  };
  if (c.wkred) {
    if (c.red_bytes != (c.wk - 1) * c.bn * m * 4 || c.red_bytes > act_bytes)
      return *why = "smem reduction area larger than the activation area", false;
    if (c.region_off + c.region_bytes > arena)
      return *why = "reduction area overlaps weights", false;
  }
  const int nslots = c.wkred ? c.red_bytes / 16 : 0;
  for (int u = 0; u < c.units; ++u) {
    int tile, split;
    UnitCoords(c, u, &tile, &split);
    if (tile < 0 || tile >= c.tiles || split < 0 || split >= c.splits) return *why = "unit", false;
    // per warp and fragment (i, j): the k steps it accumulated
    std::vector<std::vector<unsigned char>> wks(kWarps, std::vector<unsigned char>(ksteps, 0));
    std::vector<int> slot_src(nslots, -1);  // (t8 * mt + f16) * 8 + warp that stored it
    for (int w = 0; w < kWarps; ++w) {
      int fg, tg, kg;
      WarpCoords(c, w, &fg, &tg, &kg);
      const int frow = fg * c.mtw * 16, tblk = tg * c.nbw;
      if (frow + c.mtw * 16 > c.bn || (tblk + c.nbw) * 8 > m || kg >= c.wk)
        return *why = "warp tile", false;
      if (fg + c.wf * tg != w % gw) return *why = "warp in-group index", false;
      for (int st = 0; st < c.ks / 16; ++st) {
        if (st % c.wk != kg) continue;
        // ldmatrix rows and byte columns of this step stay inside the region / stage
        const int last_w = c.tma ? c.region_bytes - 1  // tma2d: checked by TmaLayoutCheck
                                 : (frow + c.mtw * 16 - 1) * c.wrow + (st * 16 + 15) * 2 + 1;
        if (last_w >= c.region_bytes || c.region_off + c.region_bytes > arena)
          return *why = "weight smem bounds", false;
        const int kin = (st * 16) % c.akc;  // k within its activation stage (cp.async layout)
        const int last_a = ((tblk + c.nbw) * 8 - 1) * ARow(c.akc) + (kin + 15) * 2 + 1;
        if (last_a >= stage_bytes || c.astages * stage_bytes > act_bytes)
          return *why = "activation smem bounds", false;
        const int kstep = (split * c.ks) / 16 + st;
        wks[w][kstep - (split * c.ks) / 16] = 1;
        for (int i = 0; i < c.mtw; ++i)
          for (int j = 0; j < c.nbw; ++j) {
            const int f16 = (tile * c.bn + frow) / 16 + i, t8 = tblk + j;
            if (++mma[(static_cast<size_t>(t8) * mt + f16) * ksteps + kstep] != 1)
              return *why = "mma covered twice", false;
          }
      }
    }
    // epilogue: smem stores by k groups >= 1 (all before the __syncthreads), then the writers
    for (int pass = 0; pass < 2; ++pass)
      for (int w = 0; w < kWarps; ++w) {
        int fg, tg, kg;
        WarpCoords(c, w, &fg, &tg, &kg);
        const int frow = fg * c.mtw * 16, tblk = tg * c.nbw, wg = w % gw;
        if (pass == 0 && !(c.wkred && kg > 0)) continue;
        if (pass == 1 && c.wkred && kg > 0) continue;
        for (int i = 0; i < c.mtw; ++i)
          for (int j = 0; j < c.nbw; ++j) {
            const int f16 = (tile * c.bn + frow) / 16 + i, t8 = tblk + j;
            std::vector<unsigned char> ks = wks[w];
            for (int lane = 0; lane < 32; ++lane) {
              if (pass == 0) {  // store of k group kg's fragment
                const int sl = RedSlot(c, kg, wg, i, j, lane);
                if (sl < 0 || sl >= nslots || (sl + 1) * 16 > act_bytes)
                  return *why = "smem reduction slot out of bounds", false;
                if (slot_src[sl] != -1) return *why = "smem reduction slot written twice", false;
                slot_src[sl] = (t8 * mt + f16) * 8 + w;
                continue;
              }
              if (c.wkred && lane == 0)  // k group 0 adds q = 1 .. wk - 1 in order
                for (int q = 1; q < c.wk; ++q) {
                  bool found = false;
                  for (int l2 = 0; l2 < 32; ++l2) {
                    const int sl = RedSlot(c, q, wg, i, j, l2);
                    if (sl < 0 || sl >= nslots || slot_src[sl] == -1)
                      return *why = "smem reduction reads an unwritten slot", false;
                    const int src = slot_src[sl] % 8;
                    if (slot_src[sl] / 8 != t8 * mt + f16 || src / gw != q || src % gw != wg)
                      return *why = "smem reduction reads another fragment", false;
                    if (l2 == 0) {
                      for (int k = 0; k < ksteps; ++k)
                        if (wks[src][k] && ks[k]++) return *why = "k step reduced twice", false;
                      found = true;
                    }
                  }
                  if (!found) return *why = "smem reduction slot", false;
                }
              const int pi = PartIndex(c, split, kg);
              if (pi < 0 || pi >= c.parts) return *why = "partial index", false;
              if (lane == 0) {
                unsigned char* dst = kcat(pi, t8, f16) + (split * c.ks) / 16;
                for (int k = 0; k < c.ks / 16; ++k)
                  if (ks[k] && dst[k]++) return *why = "k step in a partial twice", false;
              }
              for (int e = 0; e < 4; ++e) {
                const int f = tile * c.bn + frow + i * 16 + lane / 4 + 8 * (e / 2);
                const int tok = (tblk + j) * 8 + 2 * (lane % 4) + (e % 2);
                if (f >= c.n || tok >= m || f / 16 != f16 || tok / 8 != t8)
                  return *why = "epilogue bounds", false;
                const size_t at = (static_cast<size_t>(c.parts == 1 ? 0 : pi) * m + tok) * c.n + f;
                if (++part[at] != 1) return *why = "partial / output written twice", false;
                writer[at] = u;
              }
            }
          }
      }
  }
  for (unsigned char v : mma)
    if (v != 1) return *why = "mma not covered", false;
  for (unsigned char v : part)
    if (v != 1) return *why = "partial / output not written", false;
  // every output (t8, f16): k steps over all parts exactly once
  for (int t8 = 0; t8 < nb; ++t8)
    for (int f16 = 0; f16 < mt; ++f16)
      for (int k = 0; k < ksteps; ++k) {
        int n = 0;
        for (int pi = 0; pi < c.parts; ++pi) n += kcat(pi, t8, f16)[k];
        if (n != 1) return *why = "output does not sum every k step exactly once", false;
      }
  if (c.parts > 1) {
    std::vector<int> units_of(c.tiles, 0);
    for (int u = 0; u < c.units; ++u) ++units_of[u / c.splits];
    for (int tile = 0; tile < c.tiles; ++tile) {
      if (units_of[tile] != c.splits)
        return *why = "tile counter target != units of the tile", false;
      std::vector<unsigned char> red(m * c.bn / 4, 0);
      for (int s = 0; s < c.splits; ++s) {
        int g0, g1;
        ReduceShare(c, m, s, &g0, &g1);
        for (int g = g0; g < g1; ++g) {
          if (++red[g] != 1) return *why = "reduced twice", false;
          const int gpr = c.bn / 4, tok = g / gpr, f = tile * c.bn + (g % gpr) * 4;
          for (int pi = 0; pi < c.parts; ++pi)
            for (int e = 0; e < 4; ++e) {
              const int wu = writer[(static_cast<size_t>(pi) * m + tok) * c.n + f + e];
              if (wu < 0 || wu / c.splits != tile)
                return *why = "reduction reads a partial not written by its tile's units", false;
            }
        }
      }
      for (unsigned char v : red)
        if (v != 1) return *why = "not reduced", false;
    }
  }
  // bulk copies: 16-byte sizes, sources and destinations; tx bytes per mbarrier phase < 2^20
  if ((c.wchunk * 2) % 16 || (c.k * 2) % 16 || (c.ks * 2) % 16 || c.wrow % 16 || c.region_off % 16)
    return *why = "bulk copy alignment", false;
  if (c.nwc > kMaxChunks || c.nwc * c.wchunk != c.ks || c.bn * c.wchunk * 2 >= (1 << 20))
    return *why = "weight chunks", false;
  if ((c.lda * 2) % 16 || c.ks % kKC) return *why = "activation alignment", false;
  return true;
}

// ldmatrix -> mma fragment agreement, emulated from the PTX rules: lane L receives, from matrix
// r of an ldmatrix, the elements (row L / 4, columns 2 (L % 4) + {0, 1}) of the 8 x 8 matrix whose
// row addresses lanes 8 r .. 8 r + 7 supply. mma.m16n8k16 wants a_r = A[L/4 + 8 (r & 1)][2 (L%4)
// + h + 8 (r >> 1)] and b_x = B[k = 2 (L%4) + h + 8 x][n = L / 4]. Checks that the kernel's
// addressing (LdsmWeights / LdsmTokens) delivers exactly that.
bool FragmentCheck(std::string* why) {
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h) {
        const RowK src = LdsmWeights(8 * r + lane / 4);
        const int row = src.row, k = src.k + 2 * (lane % 4) + h;
        if (row != lane / 4 + 8 * (r & 1) || k != 2 * (lane % 4) + h + 8 * (r >> 1))
          return *why = "weight fragment", false;
        const RowK t = LdsmTokens(8 * r + lane / 4);  // x4: b0, b1 of block 0, then of block 1
        if (t.row != (r >> 1) * 8 + lane / 4 ||
            t.k + 2 * (lane % 4) + h != 2 * (lane % 4) + h + 8 * (r & 1))
          return *why = "token fragment (x4)", false;
        if (r < 2) {  // x2: lanes 0-15 supply rows
          const RowK t2 = LdsmTokens(8 * r + lane / 4);
          if (t2.row != lane / 4 || t2.k != 8 * r) return *why = "token fragment (x2)", false;
        }
      }
  return true;
}

// ---------------- device helpers (host side) ----------------
__global__ void FillBf16(bf16* p, size_t n, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ (seed * 0x9E3779B9u) ^
                 static_cast<unsigned>(i >> 32) * 0x85EBCA6Bu;
    h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12, h *= 0x297A2D39u, h ^= h >> 15;
    const float u = (h >> 8) * (1.f / 16777216.f) * 2.f - 1.f;  // [-1, 1)
    p[i] = __float2bfloat16(u * scale);
  }
}

struct LtPlan {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t lw, la, lo;
  cublasLtMatmulAlgo_t algo;
};

LtPlan MakePlan(cublasLtHandle_t h, int s, int m, size_t ws_bytes) {
  LtPlan p;
  CKL(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t tw = CUBLAS_OP_T, ta = CUBLAS_OP_N;
  CKL(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &tw, sizeof(tw)));
  CKL(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &ta, sizeof(ta)));
  CKL(cublasLtMatrixLayoutCreate(&p.lw, CUDA_R_16BF, kK[s], kN[s], kK[s]));
  CKL(cublasLtMatrixLayoutCreate(&p.la, CUDA_R_16BF, kK[s], m, kLda[s]));
  CKL(cublasLtMatrixLayoutCreate(&p.lo, CUDA_R_16BF, kN[s], m, kN[s]));
  cublasLtMatmulPreference_t pref;
  CKL(cublasLtMatmulPreferenceCreate(&pref));
  CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &ws_bytes, sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t res;
  int n = 0;
  CKL(cublasLtMatmulAlgoGetHeuristic(h, p.desc, p.lw, p.la, p.lo, p.lo, pref, 1, &res, &n));
  if (n < 1) {
    std::fprintf(stderr, "cuBLASLt: no algorithm for %s at M=%d\n", kNames[s], m);
    std::exit(2);
  }
  p.algo = res.algo;
  cublasLtMatmulPreferenceDestroy(pref);
  return p;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Err {
  double rel;
  size_t nonfinite;
};
Err Compare(const bf16* d_got, const bf16* d_ref, size_t rows, size_t cols, size_t ld) {
  std::vector<bf16> g(rows * ld), r(rows * ld);
  CK(cudaMemcpy(g.data(), d_got, g.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.data(), d_ref, r.size() * 2, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  size_t bad = 0;
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) {
      const double a = __bfloat162float(g[i * ld + j]), b = __bfloat162float(r[i * ld + j]);
      if (!std::isfinite(a) || !std::isfinite(b)) {
        ++bad;
        continue;
      }
      num += (a - b) * (a - b), den += b * b;
    }
  return {den > 0 ? std::sqrt(num / den) : (num > 0 ? 1e30 : 0), bad};
}

struct Variant {
  const char* name;
  int prefetch, use_cg;
};
const Variant kVariants[] = {{"persistent_prefetch2", 2, 0},
                             {"persistent_prefetch1", 1, 0},
                             {"persistent_prefetch0", 0, 0},
                             {"persistent_prefetch1_cgsync", 1, 1}};
constexpr int kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);

std::string Json(double v) {
  char b[64];
  std::snprintf(b, sizeof b, std::isfinite(v) ? "%.6g" : "null", v);
  return b;
}

}  // namespace
}  // namespace probe
