// Routes of multi-vector (ColBERT / PyLate) models: TEI's POST /embed_all (every kept token's
// vector per input, [[[f32, ...], ...], ...]) and POST /v1/score's MaxSim mode (the query's token
// vectors against each document's). Texts are shaped as PyLate does (multivector.h: prefix token,
// truncation at query_length / document_length, mask-token query expansion); the servers return
// one L2-normalised row per token; documents drop their skiplist tokens' rows here.
// docs/api.md, docs/models.md "Multi-vector models". Which models may ask is the route table's
// (gateway.cc). Thread-safety: handlers run on I/O or worker threads; the state they share is
// the gateway's.
#include <algorithm>
#include <cstring>
#include <string>

#include "gateway/embed_format.h"
#include "gateway/gateway.h"
#include "gateway/json_writer.h"
#include "gateway/multivector.h"
#include "gateway/route_errors.h"
#include "gateway/server_timing.h"
#include "trace/trace.h"
#include "wire/codec.h"
#include "wire/messages.h"

namespace petal::gateway {
namespace {

using Seqs = std::vector<std::vector<int32_t>>;

// Every token row of a chunked answer in request order (each response holds one row per token
// of its chunk's sequences), checked against the sequences' lengths.
Status TokenRows(const ChunkedResult& r, const Seqs& seqs, std::vector<std::string_view>* rows) {
  for (size_t c = 0; c < r.ranges.size(); ++c) {
    int64_t tokens = 0;
    for (size_t s = r.ranges[c].first; s < r.ranges[c].second; ++s) {
      tokens += static_cast<int64_t>(seqs[s].size());
    }
    const v1::EmbedResponse& resp = r.responses[c];
    auto f = wire::ResponseFormat(resp, tokens);
    if (!f.ok()) return Internal("server answer: " + f.status().message());
    const size_t bytes = tokens ? resp.data().size() / static_cast<size_t>(tokens) : 0;
    for (int64_t i = 0; i < tokens; ++i) {
      rows->push_back(std::string_view(resp.data()).substr(i * bytes, bytes));
    }
  }
  return Status::Ok();
}

}  // namespace

std::optional<RequestError> Gateway::ToTokenSequences(EmbedParams* p, const ServedModel& m,
                                                      const char* field, bool is_query,
                                                      Seqs* seqs) {
  const std::string f = field;
  const TokenInputRule rule = TokenInputFor(m.config, is_query);
  if (p->inputs.pretokenized) {
    // Ids are the model's sequence as sent (markers and expansion are the caller's), cut at the
    // model's length for their kind.
    const size_t max_len = static_cast<size_t>(is_query ? m.config.multivector.query_length
                                                        : m.config.multivector.document_length);
    if (auto err = CheckVocabulary(p->inputs.ids, m.tokenizer->vocab_size(), f)) return err;
    for (size_t i = 0; i < p->inputs.ids.size(); ++i) {
      auto& s = p->inputs.ids[i];
      if (s.size() > max_len) {
        if (p->truncate_left) s.erase(s.begin(), s.end() - max_len);
        s.resize(max_len);
      }
    }
    *seqs = std::move(p->inputs.ids);
    return std::nullopt;
  }
  // PyLate applies a prompt only when named (or the model's default one); "input_type" picks the
  // query / document shaping here, not a prompt.
  auto prefix_or = m.prompts.Prefix(p->prompt_name, "");
  if (!prefix_or.ok()) return RequestError{400, prefix_or.status().message(), "prompt_name"};
  const std::string prompt = std::move(prefix_or).value();
  EncodeOptions eo;
  eo.add_special_tokens = true;
  eo.max_length = rule.max_text_tokens;  // PyLate always truncates at the model's lengths
  eo.truncate_left = p->truncate_left;
  const size_t n = p->inputs.texts.size();
  seqs->resize(n);
  auto run = [&](size_t begin, size_t end) -> std::optional<RequestError> {
    for (size_t i = begin; i < end; ++i) {
      const std::string_view text = p->inputs.texts[i];
      if (text.empty()) {
        return RequestError{400, "'" + f + "[" + std::to_string(i) + "]' is an empty string", f};
      }
      auto ids = prompt.empty() ? m.tokenizer->Encode(text, eo)
                                : m.tokenizer->Encode(prompt + std::string(text), eo);
      if (!ids.ok()) {
        return RequestError{400,
                            "'" + f + "[" + std::to_string(i) + "]': " + ids.status().message(), f};
      }
      if (ids->empty()) {
        return RequestError{400, "'" + f + "[" + std::to_string(i) + "]' has no tokens", f};
      }
      ShapeTokenInput(rule, &ids.value());
      (*seqs)[i] = std::move(ids).value();
    }
    return std::nullopt;
  };
  return RunSliced(n, run, TextBytes(p->inputs.texts));
}

void Gateway::TeiEmbedAll(const HttpRequest& req, const ServedModel& m, Reply reply) {
  auto p = std::make_shared<EmbedParams>();
  if (auto err = ParseTeiEmbed(req.body(), m.max_inputs, p.get())) {
    return reply(ErrorResponse(*err));
  }
  if (p->dimensions != 0) {
    return reply(ErrorResponse(
        {400, "'dimensions' does not apply to multi-vector (token) embeddings", "dimensions"}));
  }
  if (p->normalize.has_value() && !*p->normalize) {
    return reply(ErrorResponse(
        {400, "'normalize': this model always returns L2-normalised token vectors", "normalize"}));
  }
  // PyLate's encode defaults to queries; "input_type": "document" asks for document vectors.
  const bool is_query = p->input_type != "document";
  auto seqs = std::make_shared<Seqs>();
  const auto t0 = Clock::now();
  if (auto err = ToTokenSequences(p.get(), m, "inputs", is_query, seqs.get())) {
    return reply(ErrorResponse(*err));
  }
  int64_t tokens = 0;
  for (const auto& s : *seqs) tokens += static_cast<int64_t>(s.size());
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(seqs->size()), tokens);
  auto chunks = SplitChunks(*seqs, m.chunk);
  m.metrics.Chunks(static_cast<int64_t>(chunks.size()));
  v1::EmbedOptions so;
  so.set_dtype(WireDType(p->output));
  const auto t1 = Clock::now();
  EmbedChunks(
      m.replicas.get(), *seqs, std::move(chunks), so, NextRequestId(),
      [this, &m, p, seqs, is_query, t1,
       reply = std::move(reply)](StatusOr<ChunkedResult> r) mutable {
        m.metrics.Inference(Since(t1));
        PostWork(
            [this, &m, p, seqs, is_query, r = std::move(r), reply = std::move(reply)]() mutable {
              if (!r.ok()) return reply(ServerError(r.status(), m.replicas->RetryAfterSeconds()));
              std::vector<std::string_view> rows;
              if (Status st = TokenRows(*r, *seqs, &rows); !st.ok()) return reply(ServerError(st));
              JsonOut o(64 + rows.size() * 12 * static_cast<size_t>(m.config.score_outputs));
              o.Raw("[");
              size_t row = 0;
              for (size_t i = 0; i < seqs->size(); ++i) {
                o.Raw(i ? ",[" : "[");
                bool first = true;
                for (int32_t id : (*seqs)[i]) {
                  const std::string_view bytes = rows[row++];
                  if (!KeepToken(m.config.multivector, is_query, id)) continue;
                  if (!first) o.Raw(",");
                  WriteRow(&o, bytes, p->output, /*base64=*/false);
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

void Gateway::MaxSimScore(ScoreParams sp, const ServedModel& m, Reply reply) {
  if (sp.query.empty()) return reply(ErrorResponse({400, "'query' is an empty string", "query"}));
  EmbedParams query, docs;
  // Views of sp's strings, which outlive their use here.
  query.inputs.texts.push_back(sp.query);
  docs.inputs.texts.assign(sp.documents.begin(), sp.documents.end());
  auto seqs = std::make_shared<Seqs>();
  Seqs doc_seqs;
  const auto t0 = Clock::now();
  if (auto err = ToTokenSequences(&query, m, "query", true, seqs.get())) {
    return reply(ErrorResponse(*err));
  }
  if (auto err = ToTokenSequences(&docs, m, "documents", false, &doc_seqs)) {
    return reply(ErrorResponse(*err));
  }
  for (auto& d : doc_seqs) seqs->push_back(std::move(d));
  int64_t tokens = 0;
  for (const auto& s : *seqs) tokens += static_cast<int64_t>(s.size());
  auto timing = std::make_shared<ServerTiming>();
  timing->Add("tokenize", Since(t0));
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(seqs->size()), tokens);
  v1::EmbedOptions so;
  so.set_dtype(m.token_vectors_f16 ? v1::DTYPE_FLOAT16 : v1::DTYPE_FLOAT32);
  const size_t row_bytes = static_cast<size_t>(m.config.score_outputs) *
                           (m.token_vectors_f16 ? sizeof(uint16_t) : sizeof(float));
  const std::string model = sp.model.empty() ? m.name() : sp.model;
  const size_t top_k = sp.top_k;
  auto chunks = SplitChunks(*seqs, m.chunk);
  m.metrics.Chunks(static_cast<int64_t>(chunks.size()));
  const auto t1 = Clock::now();
  EmbedChunks(
      m.replicas.get(), *seqs, std::move(chunks), so, NextRequestId(),
      [this, &m, seqs, model, top_k, tokens, t0, t1, timing, row_bytes,
       reply = std::move(reply)](StatusOr<ChunkedResult> r) mutable {
        m.metrics.Inference(Since(t1));
        if (r.ok()) AddReplicaTimes(timing.get(), Since(t1), *r);
        PostWork([this, &m, seqs, model, top_k, tokens, t0, timing, row_bytes, r = std::move(r),
                  reply = std::move(reply)]() mutable {
          if (!r.ok()) return reply(ServerError(r.status(), m.replicas->RetryAfterSeconds()));
          const auto s0 = Clock::now();
          std::vector<std::string_view> rows;
          if (Status st = TokenRows(*r, *seqs, &rows); !st.ok()) return reply(ServerError(st));
          const size_t dim = static_cast<size_t>(m.config.score_outputs);
          // Each sequence's kept vectors, packed: the query's all, a document's without its
          // skiplist tokens.
          auto kept = [&](size_t seq, size_t first_row, bool is_query) {
            std::vector<float> v;
            const auto& ids = (*seqs)[seq];
            for (size_t t = 0; t < ids.size(); ++t) {
              if (!KeepToken(m.config.multivector, is_query, ids[t])) continue;
              const std::string_view b = rows[first_row + t];
              const size_t at = v.size();
              v.resize(at + dim);
              if (row_bytes == dim * sizeof(float)) {
                std::memcpy(v.data() + at, b.data(), dim * sizeof(float));
              } else {
                wire::HalvesToFloats(reinterpret_cast<const uint8_t*>(b.data()), dim,
                                     v.data() + at);
              }
            }
            return v;
          };
          if (rows.empty() || rows[0].size() != row_bytes) {
            return reply(ServerError(Internal(
                "server answer: rows of " + std::to_string(rows.empty() ? 0 : rows[0].size()) +
                " bytes where " + std::to_string(row_bytes) + " were asked for")));
          }
          const std::vector<float> q = kept(0, 0, true);
          const size_t docs = seqs->size() - 1;
          std::vector<size_t> first_row(docs);  // document d's first row in `rows`
          for (size_t d = 0, row = (*seqs)[0].size(); d < docs; ++d) {
            first_row[d] = row;
            row += (*seqs)[d + 1].size();
          }
          std::vector<std::pair<size_t, double>> scores(docs);
          auto score = [&](size_t begin, size_t end) -> std::optional<RequestError> {
            for (size_t d = begin; d < end; ++d) {
              const std::vector<float> v = kept(d + 1, first_row[d], false);
              scores[d] = {d, MaxSim(q.data(), q.size() / dim, v.data(), v.size() / dim, dim)};
            }
            return std::nullopt;
          };
          // One document (~0.1 ms at 32 x 256 vectors of 128) is worth a slice of its own: one
          // query against 100 such documents took ~11 ms on one core.
          RunSliced(docs, score, docs * kBytesPerSlice);
          HttpResponse res =
              MakeResponse(200, ScoreListJson(std::move(scores), top_k, model, tokens));
          timing->Add("maxsim", Since(s0));
          timing->Add("gateway", Since(t0));
          res.set("Server-Timing", ToBeast(timing->value()));
          reply(std::move(res));
        });
      },
      trace::Current());
}

}  // namespace petal::gateway
