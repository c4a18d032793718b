// Output post-processing applied to pooled embeddings after the engine: Matryoshka truncation
// with re-normalisation, and the quantised output formats that pplx-embed-v1 defines natively.
//
// pplx-embed-v1's sentence-transformers pipeline ends in a quantiser module (st_quantize.py in
// the model repository) applied to the *unnormalised* mean-pooled embedding:
//   int8:    q = clamp(round_half_even(tanh(x) * 127), -128, 127)
//   binary:  +1 if x >= 0 else -1 (sign of the unquantised value; x = 0 counts as positive)
//   ubinary: the binary bits packed 8 per byte, first dimension in the most significant bit
//            (numpy.packbits' default order)
// so these functions must be given the pooled vector before any L2 normalisation (pplx-embed
// checkpoints have no Normalize module). Matryoshka truncation commutes with all three because
// they are elementwise. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"

namespace petal {

// Keeps the first `dims` columns of every row and L2-normalises each row again (x / max(|x|,
// 1e-12)). `dims` must be in [1, emb.dim]; dims == emb.dim only re-normalises.
Status TruncateAndNormalize(Embeddings* emb, int dims);

// pplx-embed int8: out[i] = clamp(round_half_even(tanh(x[i]) * 127), -128, 127).
void QuantizeInt8Tanh(const float* x, int n, int8_t* out);
// pplx-embed binary: out[i] = x[i] >= 0 ? +1 : -1.
void QuantizeBinarySign(const float* x, int n, int8_t* out);
// pplx-embed packed binary: (n + 7) / 8 bytes, bit (7 - i % 8) of byte i / 8 set iff x[i] >= 0;
// padding bits of the last byte are zero.
void PackBinarySign(const float* x, int n, uint8_t* out);

// Cosine similarity of two n-vectors, accumulated in double; 0 if either is all zeros. Used by
// the accuracy checks (bench warm-up, tests) and scoring.
double CosineSimilarity(const float* a, const float* b, int n);

}  // namespace petal
