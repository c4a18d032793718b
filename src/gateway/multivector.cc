// Multi-vector input shaping, skiplist and MaxSim (see multivector.h).
#include "gateway/multivector.h"

#include <algorithm>
#include <limits>

namespace petal::gateway {

TokenInputRule TokenInputFor(const ModelConfig& config, bool is_query) {
  const MultiVectorConfig& mv = config.multivector;
  TokenInputRule r;
  r.prefix_id = is_query ? mv.query_prefix_id : mv.document_prefix_id;
  const int length = is_query ? mv.query_length : mv.document_length;
  // PyLate tokenizes to length - 1 when it inserts a prefix, so the result is at most `length`.
  r.max_text_tokens = r.prefix_id >= 0 ? length - 1 : length;
  if (is_query && mv.do_query_expansion) r.pad_to = length;
  r.mask_id = mv.mask_token_id;
  return r;
}

void ShapeTokenInput(const TokenInputRule& rule, std::vector<int32_t>* ids) {
  if (rule.prefix_id >= 0) {
    ids->insert(ids->empty() ? ids->end() : ids->begin() + 1, rule.prefix_id);
  }
  if (rule.pad_to > 0 && static_cast<int>(ids->size()) < rule.pad_to) {
    ids->resize(rule.pad_to, rule.mask_id);
  }
}

bool KeepToken(const MultiVectorConfig& mv, bool is_query, int32_t id) {
  return is_query || !std::binary_search(mv.skiplist_ids.begin(), mv.skiplist_ids.end(), id);
}

namespace {

// a . b in float with kLanes independent partial sums, so the compiler vectorises the loop (a
// single running sum is one dependency chain; in double it was ~140 ms for 1 query x 100
// documents x 256 tokens at dim 128 on the H200 machine's CPU, slower than the model itself).
// Relative error ~1e-7 for the unit-length vectors ColBERT compares.
inline __attribute__((always_inline)) float Dot(const float* a, const float* b, size_t n) {
  constexpr size_t kLanes = 16;
  float acc[kLanes] = {};
  size_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) acc[l] += a[k + l] * b[k + l];
  }
  float tail = 0;
  for (; k < n; ++k) tail += a[k] * b[k];
  for (size_t w = kLanes / 2; w > 0; w /= 2) {
    for (size_t l = 0; l < w; ++l) acc[l] += acc[l + w];
  }
  return acc[0] + tail;
}

}  // namespace

// With GCC on x86-64, compiled for AVX-512, AVX2 and the baseline; the loader picks the best the
// CPU runs (target_clones), so the portable binary still uses wide registers here.
// Not under a sanitizer: the clones' ifunc resolver runs while the dynamic loader relocates,
// before TSan's runtime is up, and crashed every binary linking this file in the tsan preset.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define PETAL_MAXSIM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PETAL_MAXSIM_CLONES
#endif
PETAL_MAXSIM_CLONES double MaxSim(const float* q, size_t nq, const float* d, size_t nd,
                                  size_t dim) {
  if (nd == 0) return 0.0;
  double total = 0;
  for (size_t i = 0; i < nq; ++i) {
    const float* qi = q + i * dim;
    float best = -std::numeric_limits<float>::infinity();
    for (size_t j = 0; j < nd; ++j) best = std::max(best, Dot(qi, d + j * dim, dim));
    total += best;
  }
  return total;
}

}  // namespace petal::gateway
