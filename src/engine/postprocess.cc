#include "engine/postprocess.h"

#include <algorithm>
#include <cmath>

namespace petal {

Status TruncateAndNormalize(Embeddings* emb, int dims) {
  if (dims < 1 || dims > emb->dim) {
    return InvalidArgument("dimensions " + std::to_string(dims) + " must be between 1 and " +
                           std::to_string(emb->dim));
  }
  std::vector<float> out(static_cast<size_t>(emb->rows) * dims);
  for (int r = 0; r < emb->rows; ++r) {
    const float* src = emb->row(r);
    float* dst = out.data() + static_cast<size_t>(r) * dims;
    double ss = 0;
    for (int i = 0; i < dims; ++i) ss += static_cast<double>(src[i]) * src[i];
    const double inv = 1.0 / std::max(std::sqrt(ss), 1e-12);
    for (int i = 0; i < dims; ++i) dst[i] = static_cast<float>(src[i] * inv);
  }
  emb->data = std::move(out);
  emb->dim = dims;
  return Status::Ok();
}

void QuantizeInt8Tanh(const float* x, int n, int8_t* out) {
  for (int i = 0; i < n; ++i) {
    // fp32 like the reference (torch.tanh on fp32, times 127, torch.round = half to even).
    const float v = std::nearbyint(std::tanh(x[i]) * 127.0f);
    out[i] = static_cast<int8_t>(std::clamp(v, -128.0f, 127.0f));
  }
}

void QuantizeBinarySign(const float* x, int n, int8_t* out) {
  for (int i = 0; i < n; ++i) out[i] = x[i] >= 0 ? 1 : -1;
}

void PackBinarySign(const float* x, int n, uint8_t* out) {
  std::fill(out, out + (n + 7) / 8, uint8_t{0});
  for (int i = 0; i < n; ++i) {
    if (x[i] >= 0) out[i / 8] |= static_cast<uint8_t>(0x80u >> (i % 8));
  }
}

double CosineSimilarity(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

}  // namespace petal
