// Span pooling on the CPU: one output row per pooling span of a ragged batch (late chunking,
// windowed long inputs). The reference of the CUDA op LaunchPoolSpans (kernels/cuda/ops.h).
// Thread-safety: a pure function over caller-owned buffers.
#pragma once

#include <cstdint>

namespace petal::cpu {

// For span i (spans[3i], spans[3i+1], spans[3i+2] = start, end, flags; see Batch::pool_spans):
// out[i,:] = Pool over hidden rows [start, end) with pooling (flags & 0xff): the mean of the
// span, its first token or its last token; L2-normalised iff flags & 0x100. An empty span gives
// zeros. hidden is [tokens, dim]; out is [num_spans, dim].
void PoolSpans(const float* hidden, const int32_t* spans, int num_spans, int dim, float* out);

}  // namespace petal::cpu
