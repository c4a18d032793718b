// Per-row output post-processing done by the server after the engine: Matryoshka truncation,
// optional L2 re-normalisation, and encoding into the wire dtypes of petal.proto (float32,
// float16, int8 with a per-row scale, pplx-embed's native tanh int8, and sign bits packed
// MSB-first as sentence-transformers' quantize_embeddings does for "binary"/"ubinary"). The
// truncation and the pplx-embed quantisers are the engine's (engine/postprocess.h); this file
// adds the per-row wire encoding. Rows are independent, so a request's rows are encoded as its
// sequences finish, in whatever batch they ran. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace petal::server {

enum class OutputDType { kFloat32, kFloat16, kInt8, kBinary, kUbinary, kInt8Tanh };

const char* OutputDTypeName(OutputDType t);

struct OutputFormat {
  int dims = 0;            // embedding dimensions kept (first `dims` of the row)
  bool normalize = false;  // L2-normalise after truncation
  OutputDType dtype = OutputDType::kFloat32;
};

// Elements of `dtype` per encoded row: dims, or ceil(dims / 8) for the packed-bit types.
int ElementsPerRow(const OutputFormat& f);
// Bytes per encoded row.
size_t BytesPerRow(const OutputFormat& f);

// Encodes the first f.dims values of `row` into BytesPerRow(f) bytes at `out` (little-endian).
// For kInt8, *scale receives the row's dequantisation scale (x ~= q * scale); else 0.
void EncodeRow(const float* row, const OutputFormat& f, uint8_t* out, float* scale);

// In-place L2 normalisation; an all-zero row stays zero.
void L2Normalize(float* x, int n);

// IEEE binary16 conversions; FloatToHalf rounds to nearest even, overflow gives +-inf, NaN stays
// NaN.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

// Decodes an encoded row back to floats (for clients and tests): float types exactly, int8 as
// q * scale, tanh int8 as atanh(q / 127), binary types as +1 / -1 per dimension. `out` has
// f.dims entries.
void DecodeRow(const uint8_t* in, const OutputFormat& f, float scale, float* out);

}  // namespace petal::server
