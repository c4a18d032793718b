#include "gateway/span_plan.h"

#include <algorithm>

namespace petal::gateway {
namespace {

// Window starts over a body of n tokens with capacity c and overlap o: stride c - o, the last
// window ending exactly at n (so it may overlap its predecessor by more than o).
std::vector<int64_t> WindowStarts(int64_t n, int64_t c, int64_t o) {
  std::vector<int64_t> starts = {0};
  while (starts.back() + c < n) starts.push_back(std::min(starts.back() + (c - o), n - c));
  return starts;
}

std::vector<int32_t> Wrap(const std::vector<int32_t>& prefix, const int32_t* body, int64_t n,
                          const std::vector<int32_t>& suffix) {
  std::vector<int32_t> w;
  w.reserve(prefix.size() + n + suffix.size());
  w.insert(w.end(), prefix.begin(), prefix.end());
  w.insert(w.end(), body, body + n);
  w.insert(w.end(), suffix.begin(), suffix.end());
  return w;
}

}  // namespace

void SpanPlan::Append(const SpanPlan& o) {
  seqs.insert(seqs.end(), o.seqs.begin(), o.seqs.end());
  spans.insert(spans.end(), o.spans.begin(), o.spans.end());
  for (int32_t t : o.target) target.push_back(t + outputs);
  weight.insert(weight.end(), o.weight.begin(), o.weight.end());
  outputs += o.outputs;
  tokens += o.tokens;
}

SpanPlan PlanLateChunks(const std::vector<std::vector<int32_t>>& chunks,
                        const std::vector<int32_t>& prompt, const std::vector<int32_t>& prefix,
                        const std::vector<int32_t>& suffix, int max_len, int overlap) {
  SpanPlan plan;
  plan.outputs = static_cast<int>(chunks.size());
  std::vector<int32_t> body = prompt;
  std::vector<int64_t> bounds = {static_cast<int64_t>(prompt.size())};  // chunk j: [b_j, b_j+1)
  for (const auto& c : chunks) {
    body.insert(body.end(), c.begin(), c.end());
    bounds.push_back(static_cast<int64_t>(body.size()));
  }
  const int64_t n = static_cast<int64_t>(body.size());
  const int64_t cap =
      WindowCapacity(max_len, static_cast<int>(prefix.size()), static_cast<int>(suffix.size()));
  const std::vector<int64_t> starts = WindowStarts(n, cap, overlap);
  const size_t w_count = starts.size();
  const int64_t pre = static_cast<int64_t>(prefix.size());
  for (size_t k = 0; k < w_count; ++k) {
    const int64_t a = starts[k], e = std::min(n, a + cap);
    // Owned body range: from the previous seam to the next; a seam is the midpoint of the
    // overlap of two neighbouring windows.
    const int64_t own_lo = k == 0 ? 0 : (starts[k] + starts[k - 1] + cap + 1) / 2;
    const int64_t own_hi = k + 1 == w_count ? n : (starts[k + 1] + a + cap + 1) / 2;
    plan.seqs.push_back(Wrap(prefix, body.data() + a, e - a, suffix));
    plan.tokens += static_cast<int64_t>(plan.seqs.back().size());
    std::vector<uint32_t> sp;
    for (size_t j = 0; j < chunks.size(); ++j) {
      const int64_t lo = std::max(bounds[j], own_lo), hi = std::min(bounds[j + 1], own_hi);
      if (lo >= hi) continue;
      sp.push_back(static_cast<uint32_t>(pre + lo - a));
      sp.push_back(static_cast<uint32_t>(pre + hi - a));
      plan.target.push_back(static_cast<int32_t>(j));
      plan.weight.push_back(static_cast<float>(hi - lo));
    }
    plan.spans.push_back(std::move(sp));
  }
  // A window that owns no chunk token (only the prompt) still runs; it has no spans, which the
  // wire does not allow: drop such windows (they contribute nothing).
  for (size_t k = plan.seqs.size(); k-- > 0;) {
    if (plan.spans[k].empty()) {
      plan.tokens -= static_cast<int64_t>(plan.seqs[k].size());
      plan.seqs.erase(plan.seqs.begin() + k);
      plan.spans.erase(plan.spans.begin() + k);
    }
  }
  return plan;
}

SpanPlan PlanLongInput(const std::vector<int32_t>& body, const std::vector<int32_t>& prefix,
                       const std::vector<int32_t>& suffix, int max_len) {
  SpanPlan plan;
  plan.outputs = 1;
  const int64_t n = static_cast<int64_t>(body.size());
  const int64_t cap =
      WindowCapacity(max_len, static_cast<int>(prefix.size()), static_cast<int>(suffix.size()));
  for (int64_t a = 0; a < n; a += cap) {
    const int64_t e = std::min(n, a + cap);
    plan.seqs.push_back(Wrap(prefix, body.data() + a, e - a, suffix));
    const auto len = static_cast<uint32_t>(plan.seqs.back().size());
    plan.tokens += len;
    plan.spans.push_back({0, len});
    plan.target.push_back(0);
    plan.weight.push_back(static_cast<float>(e - a));
  }
  return plan;
}

Status ModelSpecialTokens(const Tokenizer& tok, std::vector<int32_t>* prefix,
                          std::vector<int32_t>* suffix) {
  EncodeOptions with, without;
  without.add_special_tokens = false;
  PETAL_ASSIGN_OR_RETURN(auto full, tok.Encode("a", with));
  PETAL_ASSIGN_OR_RETURN(auto body, tok.Encode("a", without));
  auto at = std::search(full.begin(), full.end(), body.begin(), body.end());
  if (body.empty() || at == full.end())
    return Internal("cannot locate the text between the tokenizer's special tokens");
  prefix->assign(full.begin(), at);
  suffix->assign(at + static_cast<std::ptrdiff_t>(body.size()), full.end());
  return Status::Ok();
}

std::vector<float> CombineSpanRows(const SpanPlan& plan, const float* rows, int dim) {
  std::vector<double> acc(static_cast<size_t>(plan.outputs) * dim, 0.0);
  std::vector<double> wsum(plan.outputs, 0.0);
  for (size_t s = 0; s < plan.target.size(); ++s) {
    const int t = plan.target[s];
    const double w = plan.weight[s];
    wsum[t] += w;
    const float* r = rows + s * static_cast<size_t>(dim);
    double* a = acc.data() + static_cast<size_t>(t) * dim;
    for (int d = 0; d < dim; ++d) a[d] += w * r[d];
  }
  std::vector<float> out(acc.size());
  for (int t = 0; t < plan.outputs; ++t) {
    const double inv = wsum[t] > 0 ? 1.0 / wsum[t] : 0.0;
    for (int d = 0; d < dim; ++d)
      out[static_cast<size_t>(t) * dim + d] =
          static_cast<float>(acc[static_cast<size_t>(t) * dim + d] * inv);
  }
  return out;
}

}  // namespace petal::gateway
