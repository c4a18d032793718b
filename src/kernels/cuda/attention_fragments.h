// Lane -> shared-memory coordinates for the ldmatrix loads of the flash attention kernel, and the
// coordinates an mma.m16n8k16 accumulator element holds. Host + device, so a CPU test
// (tests/ops/attention_fragments_test.cc) checks them against an emulation of the PTX semantics.
// Thread-safety: constexpr functions only.
#pragma once

#if defined(__CUDACC__)
#define PETAL_ATTN_HD __host__ __device__
#else
#define PETAL_ATTN_HD
#endif

namespace petal::cuda::attn {

struct FragCoord {
  int row;
  int col;
};

// ldmatrix.x4 over a 16x16 block (row-major in shared memory): lane L supplies the address of row
// L % 8 of matrix L / 8; these return that row's (row, column) offset within the block.

// A operand (Q): matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) become
// registers a0..a3 of the m16n8k16 A fragment.
PETAL_ATTN_HD constexpr FragCoord LdsmA(int lane) { return {lane & 15, (lane >> 4) * 8}; }

// B operand of S = Q K^T from K stored as rows [key][dim] (plain ldmatrix): matrices (keys 0-7,
// dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 0-7), (keys 8-15, dims 8-15) become b0, b1
// of the n-block of keys 0-7, then b0, b1 of the n-block of keys 8-15.
PETAL_ATTN_HD constexpr FragCoord LdsmBKeyMajor(int lane) {
  return {(lane & 7) + (lane >> 4) * 8, ((lane >> 3) & 1) * 8};
}

// B operand of O = P V from V stored as rows [key][dim] (ldmatrix.trans): matrices (keys 0-7,
// dims 0-7), (keys 8-15, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 8-15) become b0, b1
// of the n-block of dims 0-7, then b0, b1 of the n-block of dims 8-15.
PETAL_ATTN_HD constexpr FragCoord LdsmBTransposed(int lane) {
  return {(lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 8};
}

// Accumulator element e (0..3) of an m16n8 C fragment held by `lane`: (row, column) in the tile.
PETAL_ATTN_HD constexpr FragCoord AccumCoord(int lane, int e) {
  return {(lane >> 2) + (e >> 1) * 8, (lane & 3) * 2 + (e & 1)};
}

// P = softmax(S) reuses the S accumulators as the A operand of O += P V: register r (0..3) of P's
// A fragment for k-step kc (keys 16kc..16kc+15) packs elements PRegElem(r) and PRegElem(r) + 1
// of S n-block 2 * kc + PRegBlock(r).
PETAL_ATTN_HD constexpr int PRegBlock(int r) { return r >> 1; }
PETAL_ATTN_HD constexpr int PRegElem(int r) { return (r & 1) * 2; }

}  // namespace petal::cuda::attn
