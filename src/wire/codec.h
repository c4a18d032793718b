// The output codec shared by engine users, server, gateway and CLI: Matryoshka truncation with
// L2 re-normalisation, the wire dtypes of petal.proto (float32, float16, int8 with a per-row
// scale, pplx-embed's native tanh int8, and sign bits packed MSB-first as sentence-transformers'
// quantize_embeddings does for "binary"/"ubinary"), their decoding, and cosine similarity. This
// is the only place in the codebase that truncates, normalises, quantises or decodes a row; it
// knows nothing of protobuf (wire/messages.h maps dtypes to the proto enum) or of engines.
//
// pplx-embed-v1's sentence-transformers pipeline ends in a quantiser module (st_quantize.py in
// the model's Hugging Face repository) applied to the *unnormalised* mean-pooled embedding:
//   int8:    q = clamp(round_half_even(tanh(x) * 127), -128, 127)
//   binary:  +1 if x >= 0 else -1 (sign of the unquantised value; x = 0 counts as positive)
//   ubinary: the binary bits packed 8 per byte, first dimension in the most significant bit
//            (numpy.packbits' default order)
// so these must be given the pooled vector before any L2 normalisation (pplx-embed checkpoints
// have no Normalize module). Matryoshka truncation commutes with all three (they are
// elementwise). Rows are independent, so a request's rows are encoded as its sequences finish,
// in whatever batch they ran. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace petal::wire {

enum class OutputDType { kFloat32, kFloat16, kInt8, kBinary, kUbinary, kInt8Tanh };

const char* OutputDTypeName(OutputDType t);

struct OutputFormat {
  int dims = 0;            // embedding dimensions kept (first `dims` of the row)
  bool normalize = false;  // L2-normalise after truncation
  OutputDType dtype = OutputDType::kFloat32;
  // Sparse (SPLADE) float32 rows answered as their non-zero entries (EmbedOptions.sparse;
  // sparse_rows.h packs them when the response is built). Encoding is unchanged.
  bool sparse = false;
};

// Elements of `dtype` per encoded row: dims, or ceil(dims / 8) for the packed-bit types.
int ElementsPerRow(const OutputFormat& f);
// Bytes per encoded row.
size_t BytesPerRow(const OutputFormat& f);

// Encodes the first f.dims values of `row` (Matryoshka truncation; L2-normalised first when
// f.normalize) into BytesPerRow(f) bytes at `out` (little-endian). For kInt8, *scale receives
// the row's dequantisation scale (x ~= q * scale); else 0.
void EncodeRow(const float* row, const OutputFormat& f, uint8_t* out, float* scale);

// In-place L2 normalisation, x / max(||x||, 1e-12) accumulated in double (as
// torch.nn.functional.normalize); an all-zero row stays zero.
void L2Normalize(float* x, int n);

// Whether a row truncated to `dims` of `hidden` must be re-normalised when the request does not
// say: the engine already normalised full rows of a model that normalises, so only a truncated
// row of such a model needs it again.
inline bool RenormalizeByDefault(bool model_normalizes, int dims, int hidden) {
  return model_normalizes && dims < hidden;
}

// pplx-embed int8: out[i] = clamp(round_half_even(tanh(x[i]) * 127), -128, 127).
void QuantizeInt8Tanh(const float* x, int n, int8_t* out);
// pplx-embed binary: out[i] = x[i] >= 0 ? +1 : -1.
void QuantizeBinarySign(const float* x, int n, int8_t* out);
// pplx-embed packed binary: (n + 7) / 8 bytes, bit (7 - i % 8) of byte i / 8 set iff x[i] >= 0;
// padding bits of the last byte are zero.
void PackBinarySign(const float* x, int n, uint8_t* out);

// Cosine similarity of two n-vectors, accumulated in double; 0 if either is all zeros. Used by
// /v1/score, the accuracy checks (bench warm-up) and tests.
double CosineSimilarity(const float* a, const float* b, int n);

// A ranking model's relevance score from its logits for one sequence (n = score_outputs):
//   n == 1 (a cross-encoder's one label): sigmoid(x) when `sigmoid`, else x (raw);
//   n == 2 (an LM reranker's [yes, no]): softmax([yes, no])[yes] = sigmoid(yes - no), and
//          raw = yes - no (the log-odds), when not `sigmoid`.
// Computed in double; the sigmoid is stable for large |x|.
double ScoreFromLogits(const float* logits, int n, bool sigmoid);

// A sequence classifier's class probabilities from its n logits, in double: softmax over the n
// classes (max-shifted), or, when `sigmoid` (multi-label), each logit's own sigmoid.
void ClassProbabilities(const float* logits, int n, bool sigmoid, double* out);

// IEEE binary16 conversions; FloatToHalf rounds to nearest even, overflow gives +-inf, NaN stays
// NaN.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
// The same for n values at once, little-endian halves at `out` / `in` (any alignment); 8 at a
// time with F16C where the CPU has it (same bits as the scalar functions, NaN payloads aside).
void FloatsToHalves(const float* x, size_t n, uint8_t* out);
void HalvesToFloats(const uint8_t* in, size_t n, float* out);

// Decodes an encoded row back to floats (for clients and tests): float types exactly, int8 as
// q * scale, tanh int8 as atanh(q / 127), binary types as +1 / -1 per dimension. `out` has
// f.dims entries.
void DecodeRow(const uint8_t* in, const OutputFormat& f, float scale, float* out);

}  // namespace petal::wire
