// Multi-vector input shaping, skiplist and MaxSim (see multivector.h).
#include "gateway/multivector.h"

#include <algorithm>
#include <limits>
#include <vector>

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

// Documents are scored 16 vectors at a time: the block's vectors transposed (dimension-major,
// 16 floats per dimension), so that one query vector's 16 dot products are 16 independent lanes
// of one vector register: a broadcast and a fused multiply-add per dimension, and no horizontal
// sums. (One dot product at a time was ~11 ms for 1 query x 100 documents x 256 tokens at dim
// 128 on one core; a double-precision running sum before that, ~140 ms.)
constexpr size_t kLanes = 16;

// Packs d's rows [j0, j0 + 16) transposed into `block` (dim x 16); missing rows are zeros.
inline void PackBlock(const float* d, size_t nd, size_t dim, size_t j0, float* block) {
  const size_t n = std::min(kLanes, nd - j0);
  for (size_t k = 0; k < dim; ++k) {
    float* out = block + k * kLanes;
    for (size_t l = 0; l < n; ++l) out[l] = d[(j0 + l) * dim + k];
    for (size_t l = n; l < kLanes; ++l) out[l] = 0.0f;
  }
}

// 16 floats; one AVX-512 register (two AVX2 ones, four SSE ones: the compiler splits it).
// aligned(4): loads and stores from any float address.
typedef float V16 __attribute__((vector_size(kLanes * sizeof(float)), aligned(4)));

// best[i] = max(best[i], max over the block's `valid` lanes of q_i . d_lane), for query rows
// [i0, i0 + R): each of the block's rows is loaded once for R query rows.
template <size_t R>
inline __attribute__((always_inline)) void ScoreRows(const float* q, size_t i0, size_t dim,
                                                     const float* block, size_t valid,
                                                     float* best) {
  V16 acc[R] = {};
  for (size_t k = 0; k < dim; ++k) {
    const V16 b = *reinterpret_cast<const V16*>(block + k * kLanes);
    for (size_t r = 0; r < R; ++r) acc[r] += q[(i0 + r) * dim + k] * b;
  }
  for (size_t r = 0; r < R; ++r) {
    float m = best[i0 + r];
    for (size_t l = 0; l < valid; ++l) m = std::max(m, acc[r][l]);
    best[i0 + r] = m;
  }
}

inline __attribute__((always_inline)) void ScoreBlock(const float* q, size_t nq, size_t dim,
                                                      const float* block, size_t valid,
                                                      float* best) {
  size_t i = 0;
  for (; i + 4 <= nq; i += 4) ScoreRows<4>(q, i, dim, block, valid, best);
  for (; i < nq; ++i) ScoreRows<1>(q, i, dim, block, valid, best);
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
  thread_local std::vector<float> block, best;
  block.resize(dim * kLanes);
  best.assign(nq, -std::numeric_limits<float>::infinity());
  for (size_t j0 = 0; j0 < nd; j0 += kLanes) {
    PackBlock(d, nd, dim, j0, block.data());
    ScoreBlock(q, nq, dim, block.data(), std::min(kLanes, nd - j0), best.data());
  }
  double total = 0;
  for (float b : best) total += b;
  return total;
}

}  // namespace petal::gateway
