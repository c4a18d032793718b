#include "gateway/chunker.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

#include "common/recycler.h"
#include "wire/recycled.h"

namespace petal::gateway {

namespace {

// Answer lists and chunk plans of formatted requests, kept with their capacity for the next
// requests. Bounds are in elements (as "bytes"): a list of thousands of chunks is freed.
template <typename T>
Recycler<std::vector<T>>* MakeListRecycler() {
  return new Recycler<std::vector<T>>(
      {.max_kept = 256,
       .max_bytes = 4096,
       .bytes = [](const std::vector<T>& v) { return v.capacity(); },
       .reusable = [](const std::vector<T>& v) { return v.capacity() > 0; }});
}
Recycler<std::vector<v1::EmbedResponse>>& ResponseLists() {
  static auto* lists = MakeListRecycler<v1::EmbedResponse>();
  return *lists;
}
Recycler<std::vector<std::pair<size_t, size_t>>>& RangeLists() {
  static auto* lists = MakeListRecycler<std::pair<size_t, size_t>>();
  return *lists;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> SplitChunks(std::span<const std::vector<int32_t>> seqs,
                                                   const ChunkLimits& limits) {
  // A recycled list: the plan ends in ChunkedResult::ranges, whose destructor gives it back.
  std::vector<std::pair<size_t, size_t>> out = RangeLists().Take();
  size_t begin = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int64_t n = static_cast<int64_t>(seqs[i].size());
    const bool full = static_cast<int>(i - begin) >= limits.max_seqs ||
                      (i > begin && tokens + n > limits.max_tokens);
    if (full) {
      out.emplace_back(begin, i);
      begin = i;
      tokens = 0;
    }
    tokens += n;
  }
  if (begin < seqs.size()) out.emplace_back(begin, seqs.size());
  return out;
}

ChunkedResult::~ChunkedResult() {
  for (v1::EmbedResponse& r : responses) wire::RecycleEmbedResponse(std::move(r));
  responses.clear();
  ResponseLists().Give(std::move(responses));
  ranges.clear();
  RangeLists().Give(std::move(ranges));
}

namespace {

// Shared by the chunks of one request until the last one answers.
struct Gather {
  std::mutex mu;
  ChunkedResult result;
  Status error;
  std::atomic<size_t> remaining{0};
  ChunksDone done;
};

}  // namespace

void EmbedChunks(ReplicaSet* replicas, const std::vector<std::vector<int32_t>>& seqs,
                 std::vector<std::pair<size_t, size_t>> chunks, const v1::EmbedOptions& options,
                 const std::string& request_id, ChunksDone done, const trace::SpanContext& trace,
                 const std::vector<std::vector<int32_t>>* type_ids, SpanInput spans) {
  // The record and its control block in one recycled block (common/recycler.h).
  auto g = std::allocate_shared<Gather>(RecyclingAllocator<Gather>());
  const size_t n = chunks.size();
  g->result.ranges = std::move(chunks);
  g->result.responses = ResponseLists().Take();
  g->result.responses.resize(n);
  g->remaining = n;
  g->done = std::move(done);
  if (n == 0) return g->done(std::move(g->result));
  // The whole request is accepted or refused at once, against the gateway's own bound.
  int64_t total = 0;
  for (const auto& [b, e] : g->result.ranges) {
    for (size_t i = b; i < e; ++i) total += static_cast<int64_t>(seqs[i].size());
  }
  if (Status st = replicas->Reserve(total); !st.ok()) return g->done(st);
  for (size_t c = 0; c < n; ++c) {
    // Read before chunk c is sent: until the last one is, no answer can complete the request
    // and move g->result away (after it, the loop reads nothing of g->result).
    const auto [b, e] = g->result.ranges[c];
    // A recycled message: its buffers (ids, lengths) are reused from an earlier chunk.
    std::shared_ptr<v1::EmbedRequest> shared = wire::TakeEmbedRequest();
    v1::EmbedRequest& req = *shared;
    req.set_protocol_version(1);
    req.set_request_id(request_id);
    *req.mutable_options() = options;
    int64_t tokens = 0;
    for (size_t i = b; i < e; ++i) tokens += static_cast<int64_t>(seqs[i].size());
    std::string* ids = req.mutable_token_ids();
    ids->resize(static_cast<size_t>(tokens) * 4);
    char* p = ids->data();
    for (size_t i = b; i < e; ++i) {
      // The wire format is little-endian int32, which is the host layout on x86-64 and arm64.
      std::memcpy(p, seqs[i].data(), seqs[i].size() * 4);
      p += seqs[i].size() * 4;
      req.add_lengths(static_cast<uint32_t>(seqs[i].size()));
    }
    if (type_ids != nullptr) {
      std::string* types = req.mutable_token_type_ids();
      types->resize(static_cast<size_t>(tokens) * 4);
      char* t = types->data();
      for (size_t i = b; i < e; ++i) {
        std::memcpy(t, (*type_ids)[i].data(), (*type_ids)[i].size() * 4);
        t += (*type_ids)[i].size() * 4;
      }
    }
    if (spans.spans != nullptr) {
      req.set_span_pooling(spans.pooling);
      for (size_t i = b; i < e; ++i) {
        const auto& sp = (*spans.spans)[i];
        req.add_span_counts(static_cast<uint32_t>(sp.size() / 2));
        for (uint32_t v : sp) req.add_spans(v);
      }
    }
    std::shared_ptr<trace::Span> span;  // only for traced requests
    std::string traceparent;
    if (trace.valid()) {
      span = std::make_shared<trace::Span>(
          trace::Span::Child("chunk", trace, trace::SpanKind::kClient));
      span->SetInt("petal.chunk.index", static_cast<int64_t>(c));
      span->SetInt("petal.chunk.sequences", static_cast<int64_t>(e - b));
      span->SetInt("petal.chunk.tokens", tokens);
      traceparent = trace::FormatTraceparent(span->context());
    }
    replicas->Embed(
        std::move(shared), tokens,
        [g, c, span](StatusOr<v1::EmbedResponse> r) {
          if (span) {
            if (!r.ok()) span->SetError(r.status().ToString());
            span->End();
          }
          {
            std::lock_guard<std::mutex> lock(g->mu);
            if (r.ok()) {
              g->result.responses[c] = std::move(r).value();
            } else if (g->error.ok()) {
              g->error = r.status();
            }
          }
          if (g->remaining.fetch_sub(1) != 1) return;
          if (!g->error.ok()) return g->done(g->error);
          g->done(std::move(g->result));
        },
        std::move(traceparent));
  }
}

}  // namespace petal::gateway
