// Sparse (SPLADE) embeddings: POST /embed_sparse (TEI shape) and POST /v1/embeddings with
// "sparse": true on a sparse model. Texts are tokenized as for /embed (prompts, truncation),
// chunked over the replicas, and each input's vocabulary-sized vector (max over tokens of
// log(1 + relu(MLM logits)); docs/models.md "Sparse embeddings") is answered as its non-zero
// entries in index order: TEI's [{"index", "value"}, ...] per input, or OpenAI's list with
// "embedding": {"indices": [...], "values": [...]}. Servers are asked for sparse rows
// (EmbedOptions.sparse: only the non-zeros cross the wire); dense rows from an older server give
// the same entries (wire/sparse_rows.h). Which models may ask which route is the route table's
// (gateway.cc); /v1/embeddings sends sparse models here (embed_routes.cc). On an inference-free
// SPLADE model (a Router with a static query module), "query" texts (prompt_name, else
// input_type) are encoded here in the gateway (sparse_static.h) and answered in the same shape.
// Thread-safety: handlers run on I/O or worker threads; all state they share is the gateway's.
#include <boost/asio/post.hpp>

#include "gateway/embed_format.h"
#include "gateway/gateway.h"
#include "gateway/json_writer.h"
#include "gateway/route_errors.h"
#include "gateway/server_timing.h"
#include "gateway/task_routes.h"
#include "trace/trace.h"
#include "wire/sparse_rows.h"

namespace petal::gateway {
namespace {

// The options of `p` that do not apply to sparse rows (or a model that has none), as a 400.
std::optional<RequestError> SparseOptionError(const EmbedParams& p, const ServedModel& m,
                                              bool openai) {
  if (m.config.task != ModelTask::kSparse) {
    return RequestError{400,
                        "'sparse' needs a sparse embedding model (SPLADE); model '" + m.name() +
                            "' is " + std::string(TaskNoun(m.config.task)),
                        "sparse"};
  }
  if (openai && !p.sparse) {
    return RequestError{400,
                        "model '" + m.name() +
                            "' is a sparse embedding model (SPLADE): send \"sparse\": true for "
                            "its non-zero entries (or use /embed_sparse)",
                        "sparse"};
  }
  auto no = [](const char* field) {
    return RequestError{400, std::string("'") + field + "' does not apply to sparse embeddings",
                        field};
  };
  if (p.dimensions != 0) return no("dimensions");
  if (p.base64) return no("encoding_format");
  if (p.output != OutputType::kFloat32) return no("output_dtype");
  if (p.long_input_mean) return no("long_input");
  return std::nullopt;
}

}  // namespace

HttpResponse Gateway::SparseRowsResponse(const std::vector<wire::SparseRow>& rows, bool openai,
                                         const std::string& model, int64_t tokens) const {
  size_t entries = 0;
  for (const auto& row : rows) entries += row.indices.size();
  const size_t json_bytes = entries * (openai ? 16 : 32);  // about, per entry
  JsonOut o(64 + json_bytes);
  o.Raw(openai ? "{\"object\":\"list\",\"data\":[" : "[");
  FormatSliced(
      rows.size(), json_bytes,
      [&](size_t i, JsonOut* out) {
        const wire::SparseRow& row = rows[i];
        if (openai) {
          out->Raw("{\"object\":\"embedding\",\"index\":").Int(static_cast<int64_t>(i));
          out->Raw(",\"embedding\":{\"indices\":[");
          for (size_t k = 0; k < row.indices.size(); ++k) {
            if (k) out->Raw(",");
            out->Int(row.indices[k]);
          }
          out->Raw("],\"values\":").FloatArray(row.values).Raw("}}");
        } else {
          out->Raw("[");
          for (size_t k = 0; k < row.indices.size(); ++k) {
            out->Raw(k ? ",{\"index\":" : "{\"index\":").Int(row.indices[k]);
            out->Raw(",\"value\":").Float(row.values[k]).Raw("}");
          }
          out->Raw("]");
        }
      },
      &o);
  if (openai) {
    o.Raw("],\"model\":").Str(model);
    o.Raw(",\"usage\":{\"prompt_tokens\":").Int(tokens);
    o.Raw(",\"total_tokens\":").Int(tokens).Raw("}}");
  } else {
    o.Raw("]");
  }
  return MakeResponse(200, o.Take());
}

void Gateway::EmbedSparseStatic(EmbedParams* p, const ServedModel& m, bool openai, Reply reply) {
  const auto t0 = Clock::now();
  const char* field = openai ? "input" : "inputs";
  const int max_len = m.MaxInputTokens();
  std::vector<std::vector<int32_t>> seqs;
  if (p->inputs.pretokenized) {
    seqs = std::move(p->inputs.ids);
    if (auto err = CheckVocabulary(seqs, static_cast<int64_t>(m.static_query->size()), field)) {
      return reply(ErrorResponse(*err));
    }
  } else {
    auto prefix = m.prompts.Prefix(p->prompt_name, p->input_type);
    if (!prefix.ok()) return reply(ErrorResponse({400, prefix.status().message(), "prompt_name"}));
    EncodeOptions eo;
    eo.add_special_tokens = false;  // as SparseStaticEmbedding tokenizes
    seqs.resize(p->inputs.texts.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      const std::string_view text = p->inputs.texts[i];
      const std::string at = std::string(field) + "[" + std::to_string(i) + "]";
      if (text.empty())
        return reply(ErrorResponse({400, "'" + at + "' is an empty string", field}));
      auto ids = prefix->empty() ? m.tokenizer->Encode(text, eo)
                                 : m.tokenizer->Encode(*prefix + std::string(text), eo);
      if (!ids.ok()) {
        return reply(ErrorResponse({400, "'" + at + "': " + ids.status().message(), field}));
      }
      seqs[i] = std::move(ids).value();
    }
  }
  int64_t tokens = 0;
  std::vector<wire::SparseRow> rows;
  rows.reserve(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    auto& s = seqs[i];
    if (s.size() > static_cast<size_t>(max_len)) {
      if (!p->truncate) {
        return reply(ErrorResponse(
            {413,
             "'" + std::string(field) + "[" + std::to_string(i) + "]' has " +
                 std::to_string(s.size()) + " tokens; the model's maximum context length is " +
                 std::to_string(max_len) + " (send \"truncate\": true to cut it)",
             field}));
      }
      if (p->truncate_left) s.erase(s.begin(), s.end() - max_len);
      s.resize(max_len);
    }
    tokens += static_cast<int64_t>(s.size());
    rows.push_back(m.static_query->Encode(s, p->max_active_dims));
  }
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(seqs.size()), tokens);
  HttpResponse res =
      SparseRowsResponse(rows, openai, p->model.empty() ? m.name() : p->model, tokens);
  ServerTiming timing;
  timing.Add("gateway", Since(t0));
  res.set("Server-Timing", ToBeast(timing.value()));
  reply(std::move(res));
}

void Gateway::TeiEmbedSparse(const HttpRequest& req, const ServedModel& m, Reply reply) {
  auto p = std::make_shared<EmbedParams>();
  if (auto err = ParseTeiEmbed(req.body(), m.max_inputs, p.get())) {
    return reply(ErrorResponse(*err));
  }
  EmbedSparse(std::move(p), m, false, std::move(reply));
}

void Gateway::EmbedSparse(std::shared_ptr<EmbedParams> p, const ServedModel& m, bool openai,
                          Reply reply) {
  if (auto err = SparseOptionError(*p, m, openai)) return reply(ErrorResponse(*err));
  // A Router model's "query" texts: its static query module, no engine (sparse_static.h).
  const std::string& route = p->prompt_name.empty() ? p->input_type : p->prompt_name;
  if (m.static_query && route == "query") {
    return EmbedSparseStatic(p.get(), m, openai, std::move(reply));
  }
  auto seqs = std::make_shared<std::vector<std::vector<int32_t>>>();
  const auto t0 = Clock::now();
  if (auto err = ToSequences(p.get(), m, openai ? "input" : "inputs", seqs.get())) {
    return reply(ErrorResponse(*err));
  }
  int64_t tokens = 0;
  for (const auto& s : *seqs) tokens += static_cast<int64_t>(s.size());
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(seqs->size()), tokens);
  auto timing = std::make_shared<ServerTiming>();
  timing->Add("tokenize", Since(t0));
  auto chunks = SplitChunks(*seqs, m.chunk);
  m.metrics.Chunks(static_cast<int64_t>(chunks.size()));
  v1::EmbedOptions so;  // a sparse model's options: sparse rows of vocab_size, their top-k
  so.set_sparse(true);
  so.set_max_active_dims(p->max_active_dims);
  const int64_t vocab = m.config.vocab_size;
  const std::string model = p->model.empty() ? m.name() : p->model;
  const auto t1 = Clock::now();
  EmbedChunks(
      m.replicas.get(), *seqs, std::move(chunks), so, NextRequestId(),
      [this, &m, vocab, openai, model, tokens, t0, t1, timing,
       reply = std::move(reply)](StatusOr<ChunkedResult> r) mutable {
        m.metrics.Inference(Since(t1));
        if (r.ok()) AddReplicaTimes(timing.get(), Since(t1), *r);
        PostWork([this, &m, vocab, openai, model, tokens, t0, timing, r = std::move(r),
                  reply = std::move(reply)]() mutable {
          if (!r.ok()) return reply(ServerError(r.status(), m.replicas->RetryAfterSeconds()));
          const auto f0 = Clock::now();
          // Every chunk's rows decoded first, then formatted in slices.
          std::vector<wire::SparseRow> rows;
          for (size_t c = 0; c < r->ranges.size(); ++c) {
            const v1::EmbedResponse& resp = r->responses[c];
            const auto n = static_cast<int64_t>(r->ranges[c].second - r->ranges[c].first);
            auto decoded = wire::DecodeSparseRows(resp, n);
            if (!decoded.ok()) {
              return reply(ServerError(Internal("server answer: " + decoded.status().message())));
            }
            if (resp.dimensions() != static_cast<uint64_t>(vocab)) {
              return reply(ServerError(
                  Internal("the server answered rows of " + std::to_string(resp.dimensions()) +
                           " values for a vocabulary of " + std::to_string(vocab))));
            }
            for (auto& row : *decoded) rows.push_back(std::move(row));
          }
          HttpResponse res = SparseRowsResponse(rows, openai, model, tokens);
          timing->Add("format", Since(f0));
          timing->Add("gateway", Since(t0));
          res.set("Server-Timing", ToBeast(timing->value()));
          reply(std::move(res));
        });
      },
      trace::Current());
}

}  // namespace petal::gateway
