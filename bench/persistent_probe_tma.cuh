// Weight-path helpers of bench/persistent_probe.cu: the host emulation of where each weight copy
// (1-D bulk rows or 2-D 128B-swizzled tensor-map boxes) puts every element in shared memory, the
// check that every ldmatrix fragment the kernel reads is the element it expects, and the host
// encoding of the tensor maps (cuTensorMapEncodeTiled through cudart's driver entry point, so the
// binary links only cudart + cublasLt). The per-M plans are in persistent_probe_plan.cuh.
//
// 128B swizzle, as documented for CU_TENSOR_MAP_SWIZZLE_128B / the PTX tensor "swizzling modes":
// 16-byte chunks are permuted within each 128-byte span, the pattern repeating every 1024 bytes
// (8 spans). In address terms: byte address bits [4, 7) (the chunk within the span) are XORed
// with bits [7, 10) (the span within the 1024-B atom); the destination must be 1024-B aligned so
// that a box row r (at r * 128 from the box start) gets chunk j -> j ^ (r % 8). The emulation
// below applies that rule to the absolute (arena-relative, the arena being 1024-B aligned on the
// device) byte address of the box's dense row-major image, independently of WeightByte.
#pragma once
#include <cudaTypedefs.h>

#include <string>
#include <vector>

#include "persistent_probe_host.cuh"

namespace probe {
namespace {

int Swizzle128(int addr) { return addr ^ (((addr >> 7) & 7) << 4); }

// Emulates one unit's weight copies into an arena map (owner of every bf16 slot), then checks:
// destinations inside the arena, 1024-B aligned (tma2d) or 16-B (bulk1d), no slot written twice,
// every chunk's copied bytes == its expect_tx count (< 2^20); every ldmatrix row address of every
// warp / k step / m16 tile / lane is 16-B aligned and its 8 bf16 are (row, k .. k + 7) of the
// slice; the 8 row addresses of each 8x8 matrix fall in 8 distinct 16-byte bank groups.
bool WeightLayoutCheck(const PhaseCfg& c, int arena, std::string* why) {
  std::vector<int> owner(arena / 2, -1);
  auto own = [](int row, int k) { return row * 65536 + k; };
  std::vector<long> chunk_bytes(c.nwc, 0);
  auto put = [&](int addr, int row, int k) {
    if (addr < c.region_off || addr + 2 > c.region_off + c.region_bytes || addr + 2 > arena)
      return *why = "copy outside region / arena", false;
    if (owner[addr / 2] != -1) return *why = "smem slot written twice", false;
    owner[addr / 2] = own(row, k);
    return true;
  };
  if (c.tma) {
    for (int kb = 0; kb < c.ks / kBoxK; ++kb) {
      const int dst = c.region_off + BoxDst(c, kb);
      if (dst % kSwzAlign) return *why = "TMA destination not 1024-B aligned", false;
      if (BoxChunk(c, kb) >= c.nwc || kb * kBoxK / c.wchunk != BoxChunk(c, kb))
        return *why = "box chunk", false;
      chunk_bytes[BoxChunk(c, kb)] += static_cast<long>(c.bn) * kBoxK * 2;
      for (int r = 0; r < c.bn; ++r)
        for (int e = 0; e < kBoxK; ++e)
          if (!put(Swizzle128(dst + r * kBoxK * 2 + e * 2), r, kb * kBoxK + e)) return false;
    }
  } else {
    for (int r = 0; r < c.bn; ++r)
      for (int ch = 0; ch < c.nwc; ++ch) {
        const int dst = c.region_off + r * c.wrow + ch * c.wchunk * 2;
        if (dst % 16) return *why = "bulk destination not 16-B aligned", false;
        chunk_bytes[ch] += c.wchunk * 2;
        for (int e = 0; e < c.wchunk; ++e)
          if (!put(dst + e * 2, r, ch * c.wchunk + e)) return false;
      }
  }
  for (int ch = 0; ch < c.nwc; ++ch)
    if (chunk_bytes[ch] != static_cast<long>(c.bn) * c.wchunk * 2 || chunk_bytes[ch] >= (1 << 20))
      return *why = "chunk bytes != expect_tx (or >= 2^20)", false;
  for (int w = 0; w < kWarps; ++w) {
    int fg, tg, kg;
    WarpCoords(c, w, &fg, &tg, &kg);
    const int frow = fg * c.mtw * 16;
    for (int st = 0; st < c.ks / 16; ++st) {
      if (st % c.wk != kg) continue;
      for (int i = 0; i < c.mtw; ++i) {
        int groups[4] = {0, 0, 0, 0};  // per 8x8 matrix: bitmask of 16-B bank groups
        for (int lane = 0; lane < 32; ++lane) {
          const RowK a = LdsmWeights(lane);
          const int row = frow + i * 16 + a.row, k = st * 16 + a.k;
          const int addr =
              c.region_off + (c.tma ? WeightByte<true>(c, row, k) : WeightByte<false>(c, row, k));
          if (addr % 16 || addr < 0 || addr + 16 > arena)
            return *why = "ldmatrix address misaligned / outside arena", false;
          for (int t = 0; t < 8; ++t)
            if (owner[addr / 2 + t] != own(row, k + t))
              return *why = "ldmatrix reads the wrong weight element", false;
          groups[lane / 8] |= 1 << ((addr >> 4) & 7);
        }
        for (int q = 0; q < 4; ++q)
          if (groups[q] != 0xff) return *why = "ldmatrix bank conflict", false;
      }
    }
  }
  return true;
}

// A 2-D bf16 tensor map: [rows][cols] (row stride cols * 2 bytes), box [box_rows][64] (128 B per
// row), 128B swizzle, 256-B L2 promotion.
bool Encode2d(const void* base, size_t cols, size_t rows, int box_rows, CUtensorMap* map,
              std::string* why) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (!encode) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn)
      return *why = "cuTensorMapEncodeTiled entry point not found", false;
    encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kBoxK), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r =
      encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
             estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return *why = "cuTensorMapEncodeTiled failed (CUresult " + std::to_string(r) + ")", false;
  return true;
}
// Weights: one map per shape over all layers, [kLayers * N rows][K], box [bn rows][64 k].
bool EncodeWeightMaps(bf16* const* w, const PhaseCfg* cfg, CUtensorMap* maps, std::string* why) {
  for (int s = 0; s < kShapes; ++s)
    if (!Encode2d(w[s], cfg[s].k, static_cast<size_t>(kLayers) * cfg[s].n, cfg[s].bn, &maps[s],
                  why))
      return false;
  return true;
}
// Activations (--acts tma2d): the input of shape s as [M][lda], box [M rows][64 k]; shape 0 reads
// x (act[3]) in layers > 0, x0 (maps[kShapes]) in layer 0.
bool EncodeActMaps(const bf16* x0, bf16* const* act, int m, CUtensorMap* maps, std::string* why) {
  const bf16* in[kShapes + 1] = {act[3], act[0], act[1], act[2], x0};
  const int lda[kShapes + 1] = {kLda[0], kLda[1], kLda[2], kLda[3], kLda[0]};
  for (int i = 0; i <= kShapes; ++i)
    if (!Encode2d(in[i], lda[i], m, m, &maps[i], why)) return false;
  return true;
}

}  // namespace
}  // namespace probe
