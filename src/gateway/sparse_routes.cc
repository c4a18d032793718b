// POST /embed_sparse (TEI shape) on a sparse (SPLADE) model: texts are tokenized as for /embed
// (prompts, truncation), chunked over the replicas, and each vocabulary-sized row the engine
// returns (max over tokens of log(1 + relu(MLM logits)); docs/models.md "Sparse embeddings")
// becomes its non-zero entries, [{"index", "value"}, ...] in index order, one list per input.
// Which models may ask it is the route table's (gateway.cc). Rows cross the wire dense for now.
// Thread-safety: handlers run on I/O or worker threads; all state they share is the gateway's.
#include <boost/asio/post.hpp>

#include "gateway/embed_format.h"
#include "gateway/gateway.h"
#include "gateway/json_writer.h"
#include "gateway/route_errors.h"
#include "trace/trace.h"

namespace petal::gateway {

void Gateway::TeiEmbedSparse(const HttpRequest& req, const ServedModel& m, Reply reply) {
  auto p = std::make_shared<EmbedParams>();
  if (auto err = ParseTeiEmbed(req.body(), options_.max_inputs, p.get())) {
    return reply(ErrorResponse(*err));
  }
  if (p->dimensions != 0) {
    return reply(ErrorResponse(
        {400, "'dimensions' does not apply to sparse embeddings (one entry per token)",
         "dimensions"}));
  }
  auto seqs = std::make_shared<std::vector<std::vector<int32_t>>>();
  const auto t0 = Clock::now();
  if (auto err = ToSequences(p.get(), m, "inputs", seqs.get())) return reply(ErrorResponse(*err));
  int64_t tokens = 0;
  for (const auto& s : *seqs) tokens += static_cast<int64_t>(s.size());
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(seqs->size()), tokens);
  auto chunks = SplitChunks(*seqs, options_.chunk);
  m.metrics.Chunks(static_cast<int64_t>(chunks.size()));
  v1::EmbedOptions so;  // a sparse model takes none: float32 rows of vocab_size
  const size_t vocab = static_cast<size_t>(m.config.vocab_size);
  const auto t1 = Clock::now();
  EmbedChunks(
      m.replicas.get(), *seqs, std::move(chunks), so, NextRequestId(),
      [this, &m, vocab, t1, reply = std::move(reply)](StatusOr<ChunkedResult> r) mutable {
        m.metrics.Inference(Since(t1));
        PostWork([this, &m, vocab, r = std::move(r), reply = std::move(reply)]() mutable {
          if (!r.ok()) return reply(ServerError(r.status(), m.replicas->RetryAfterSeconds()));
          Status st = CheckChunks(*r);
          auto rows = st.ok() ? DecodeRows(*r) : StatusOr<std::vector<std::vector<float>>>(st);
          if (!rows.ok()) return reply(ServerError(rows.status()));
          JsonOut o(64 + rows->size() * 4096);
          o.Raw("[");
          for (size_t i = 0; i < rows->size(); ++i) {
            const auto& row = (*rows)[i];
            if (row.size() != vocab) {
              return reply(ServerError(
                  Internal("the server answered " + std::to_string(row.size()) +
                           " values per input for a vocabulary of " + std::to_string(vocab))));
            }
            o.Raw(i ? ",[" : "[");
            bool first = true;
            for (size_t v = 0; v < row.size(); ++v) {
              if (!(row[v] > 0)) continue;
              o.Raw(first ? "{\"index\":" : ",{\"index\":").Int(static_cast<int64_t>(v));
              o.Raw(",\"value\":").Float(row[v]).Raw("}");
              first = false;
            }
            o.Raw("]");
          }
          o.Raw("]");
          reply(MakeResponse(200, o.Take()));
        });
      },
      trace::Current());
}

}  // namespace petal::gateway
