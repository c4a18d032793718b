// Plans for inputs pooled by spans (docs/api.md "Long documents"): late chunking of a document's
// chunks (POST /v1/contextualizedembeddings) and "long_input": "mean" on /v1/embeddings. A plan
// turns token ids into model-sized sequences ("windows") with pooling spans, and says how the
// engine's raw span rows combine into the answer's vectors (a token-weighted mean per output).
//
// Windows. Every window is prefix + body[a, a + C) + suffix, where prefix / suffix are the
// model's special tokens, the body starts with the prompt (if any), and C = max_len - prefix -
// suffix. Late chunking: windows overlap by `overlap` body tokens; each body token belongs to the
// window in which it is farthest from a window edge, i.e. an overlap is split at its midpoint
// (the seam); a chunk that lies across a seam is the token-weighted mean of its parts' means,
// which is the mean of its tokens' states taken each from its own window. long_input: windows do
// not overlap and each one's span is the whole window with the model's pooling, weighted by its
// body tokens. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/tokenizer.h"

namespace petal::gateway {

struct SpanPlan {
  std::vector<std::vector<int32_t>> seqs;    // the windows, each <= max_len tokens
  std::vector<std::vector<uint32_t>> spans;  // per window: [start, end) pairs, window-relative
  // Per span, in window order then span order: the output row it adds to, and its weight.
  std::vector<int32_t> target;
  std::vector<float> weight;
  int outputs = 0;     // output rows of this plan
  int64_t tokens = 0;  // tokens of all windows
  // Appends another plan's windows and outputs after this one's.
  void Append(const SpanPlan& other);
};

// Late chunking of one document: `chunks` are its chunks' token ids (no special tokens), in
// order, each non-empty. The body is `prompt` (the model's prompt tokens, which belong to no
// chunk) followed by the chunks; `prefix` / `suffix` (special tokens) wrap every window. Output j
// is chunk j. Needs 0 <= overlap < WindowCapacity(max_len, prefix, suffix) (the caller checks).
SpanPlan PlanLateChunks(const std::vector<std::vector<int32_t>>& chunks,
                        const std::vector<int32_t>& prompt, const std::vector<int32_t>& prefix,
                        const std::vector<int32_t>& suffix, int max_len, int overlap);

// long_input "mean": `body` (the text's tokens with its prompt, no special tokens) in windows
// of C tokens without overlap, each pooled whole (span [0, window length)) and weighted by its
// body tokens. One output.
SpanPlan PlanLongInput(const std::vector<int32_t>& body, const std::vector<int32_t>& prefix,
                       const std::vector<int32_t>& suffix, int max_len);

// Body tokens per window for these special tokens: max_len - prefix - suffix.
inline int WindowCapacity(int max_len, int prefix, int suffix) { return max_len - prefix - suffix; }

// The model's special tokens around a text (e.g. [CLS] / [SEP], or a trailing <|endoftext|>):
// a probe encoded with and without them.
Status ModelSpecialTokens(const Tokenizer& tok, std::vector<int32_t>* prefix,
                          std::vector<int32_t>* suffix);

// Combines raw span rows ([plan.target.size(), dim], in plan order) into plan.outputs rows of
// dim: out[t] = sum_{spans s of t} weight[s] * row[s] / sum weight[s]. Not normalised.
std::vector<float> CombineSpanRows(const SpanPlan& plan, const float* rows, int dim);

}  // namespace petal::gateway
