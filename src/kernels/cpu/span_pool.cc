#include "kernels/cpu/span_pool.h"

#include "kernels/cpu/ops.h"

namespace petal::cpu {

void PoolSpans(const float* hidden, const int32_t* spans, int num_spans, int dim, float* out) {
#pragma omp parallel for schedule(dynamic, 1) if (num_spans > 1)
  for (int i = 0; i < num_spans; ++i) {
    const int32_t* sp = spans + 3 * i;
    // A span is Pool() of a one-sequence batch whose offsets are the span's bounds.
    const int32_t cu[2] = {sp[0], sp[1] > sp[0] ? sp[1] : sp[0]};
    Pool(hidden, cu, 1, dim, static_cast<Pooling>(sp[2] & 0xff), (sp[2] & 0x100) != 0,
         out + static_cast<int64_t>(i) * dim);
  }
}

}  // namespace petal::cpu
