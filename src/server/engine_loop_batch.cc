// EngineLoop::AssembleBatch: one batch's token ids, types, pooling spans and top-k from the
// sequences the scheduler took; records each request's queue wait as it first runs.
#include <string>
#include <vector>

#include "server/engine_loop.h"
#include "server/engine_loop_internal.h"

namespace petal::server {

// AssembleBatch clears each of Batch's vectors before refilling it: a field added to Batch must be
// cleared there too.
static_assert(sizeof(Batch) == 6 * sizeof(std::vector<int32_t>),
              "Batch has a new field: clear it in EngineLoop::AssembleBatch");

void EngineLoop::AssembleBatch(const std::vector<Entry>& entries, int num_tokens, Batch* out) {
  Batch& batch = *out;
  for (auto* v : {&batch.token_ids, &batch.cu_seqlens, &batch.token_type_ids, &batch.pool_spans,
                  &batch.key_lengths, &batch.sparse_top_k})
    v->clear();
  batch.token_ids.reserve(num_tokens);
  batch.cu_seqlens.reserve(entries.size() + 1);
  batch.cu_seqlens.push_back(0);
  const auto now = Clock::now();
  // Token types travel only when some sequence of the batch has them (pairs of a ranking
  // model); the others then get zeros.
  bool typed = false, spanned = false, top_k = false;
  for (const Entry& e : entries) {
    typed = typed || !e.request->job.token_type_ids.empty();
    spanned = spanned || !e.request->job.cu_spans.empty();
    top_k = top_k || e.request->job.max_active_dims > 0;
  }
  // Pooling spans travel when some sequence has them; the others then get one span over the
  // whole sequence with the model's pooling and normalisation, which is their usual row.
  const ModelConfig& model = engine_->config();
  if (typed) batch.token_type_ids.reserve(num_tokens);
  for (const Entry& e : entries) {
    LoopRequest& r = *e.request;
    const auto& cu = r.job.cu_seqlens;
    const int32_t base = static_cast<int32_t>(batch.token_ids.size());
    if (spanned && r.job.cu_spans.empty()) {
      batch.AddSpan(base, base + cu[e.seq + 1] - cu[e.seq], static_cast<int32_t>(model.pooling),
                    model.normalize);
    } else if (spanned) {
      for (int k = r.job.cu_spans[e.seq]; k < r.job.cu_spans[e.seq + 1]; ++k) {
        const int32_t* sp = r.job.spans.data() + Batch::kSpanInts * k;
        batch.pool_spans.insert(batch.pool_spans.end(), {base + sp[0], base + sp[1], sp[2]});
      }
    }
    batch.token_ids.insert(batch.token_ids.end(), r.job.token_ids.begin() + cu[e.seq],
                           r.job.token_ids.begin() + cu[e.seq + 1]);
    if (typed) {
      if (r.job.token_type_ids.empty()) {
        batch.token_type_ids.resize(batch.token_ids.size(), 0);
      } else {
        batch.token_type_ids.insert(batch.token_type_ids.end(),
                                    r.job.token_type_ids.begin() + cu[e.seq],
                                    r.job.token_type_ids.begin() + cu[e.seq + 1]);
      }
    }
    batch.cu_seqlens.push_back(static_cast<int32_t>(batch.token_ids.size()));
    if (top_k) batch.sparse_top_k.push_back(r.job.max_active_dims);
    int64_t unset = -1;
    if (r.queue_us.compare_exchange_strong(unset, MicrosSince(r.admitted, now))) {
      metrics_->queue_wait_s.Observe(MicrosSince(r.admitted, now) * 1e-6);
      if (r.job.trace.valid()) {
        trace::RecordChild("queue wait", r.job.trace, trace::ToUnixNs(r.admitted),
                           trace::ToUnixNs(now));
      }
    }
  }
}

}  // namespace petal::server
