// The ranking routes: POST /rerank (TEI), POST /v1/rerank (Cohere / Jina) and /v1/score on a
// ranking model (pair scores). The query is paired with every document (tokenizer pair template
// or the LM reranker's prompt: tokenizer/rank_input.h), the pairs are chunked and balanced over
// the replicas like embeddings (a pair is one sequence), and the logits come back as scores.
// Which models may ask these routes is the route table's (gateway.cc, task_routes.h).
#include <boost/asio/post.hpp>

#include <algorithm>
#include <numeric>

#include "gateway/embed_format.h"
#include "gateway/gateway.h"
#include "gateway/json_writer.h"
#include "gateway/route_errors.h"
#include "tokenizer/rank_input.h"
#include "trace/trace.h"
#include "wire/codec.h"

namespace petal::gateway {

std::optional<RequestError> Gateway::ToPairs(const RerankParams& p, const ServedModel& m,
                                             const char* field,
                                             std::vector<std::vector<int32_t>>* seqs,
                                             std::vector<std::vector<int32_t>>* types) {
  RankInputOptions ro;
  ro.templ = m.config.score_head == ScoreHead::kLmYesNo ? RankTemplate::kQwen3Reranker
                                                        : RankTemplate::kPair;
  ro.max_length = m.MaxInputTokens();
  ro.truncate = p.truncate;
  ro.instruction = p.instruction;
  const std::string f = field;
  const size_t n = p.documents.size();
  seqs->resize(n);
  types->resize(n);
  auto run = [&](size_t begin, size_t end) -> std::optional<RequestError> {
    EncodeScratch scratch;
    for (size_t i = begin; i < end; ++i) {
      auto e = EncodeRankPair(*m.tokenizer, p.query, p.documents[i], ro, &scratch);
      const std::string at = "'" + f + "[" + std::to_string(i) + "]'";
      if (!e.ok() && e.status().code() == StatusCode::kOutOfRange) {
        return RequestError{
            413, at + ": " + e.status().message() + " (send \"truncate\": true to cut it)", f};
      }
      if (!e.ok()) return RequestError{400, at + ": " + e.status().message(), f};
      (*seqs)[i] = std::move(e->ids);
      (*types)[i] = std::move(e->type_ids);
    }
    return std::nullopt;
  };
  // Large lists in slices on the tokenizer pool, as ToSequences.
  return RunSliced(n, run, TextBytes(p.documents) + n * p.query.size());
}

namespace {

struct Scored {
  size_t index;
  double score;
};

// The documents' scores from the chunks' logits: the model's activation, or the raw logit.
StatusOr<std::vector<Scored>> Scores(const ChunkedResult& r, bool raw, bool identity) {
  PETAL_RETURN_IF_ERROR(CheckChunks(r));
  PETAL_ASSIGN_OR_RETURN(auto rows, DecodeRows(r));
  std::vector<Scored> out;
  out.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].empty() || rows[i].size() > 2) return Internal("a score row of bad width");
    out.push_back({i, wire::ScoreFromLogits(rows[i].data(), static_cast<int>(rows[i].size()),
                                            !raw && !identity)});
  }
  return out;
}

void SortByScore(std::vector<Scored>* s) {
  std::stable_sort(s->begin(), s->end(),
                   [](const Scored& a, const Scored& b) { return a.score > b.score; });
}

}  // namespace

void Gateway::TeiRerank(const HttpRequest& req, const ServedModel& m, Reply reply) {
  auto p = std::make_shared<RerankParams>();
  if (auto err = ParseTeiRerank(req.body(), m.max_inputs, p.get())) {
    return reply(ErrorResponse(*err));
  }
  RunRerank(p, m, RerankShape::kTei, "texts", std::move(reply));
}

void Gateway::CohereRerank(const HttpRequest& req, const ServedModel& m, Reply reply) {
  auto p = std::make_shared<RerankParams>();
  if (auto err = ParseCohereRerank(req.body(), m.max_inputs, p.get())) {
    return reply(ErrorResponse(*err));
  }
  RunRerank(p, m, RerankShape::kCohere, "documents", std::move(reply));
}

void Gateway::RunRerank(std::shared_ptr<RerankParams> p, const ServedModel& m, RerankShape shape,
                        const char* field, Reply reply) {
  auto seqs = std::make_shared<std::vector<std::vector<int32_t>>>();
  auto types = std::make_shared<std::vector<std::vector<int32_t>>>();
  const auto t0 = Clock::now();
  if (auto err = ToPairs(*p, m, field, seqs.get(), types.get())) return reply(ErrorResponse(*err));
  int64_t tokens = 0;
  for (const auto& s : *seqs) tokens += static_cast<int64_t>(s.size());
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(seqs->size()), tokens);
  auto chunks = SplitChunks(*seqs, m.chunk);
  m.metrics.Chunks(static_cast<int64_t>(chunks.size()));
  v1::EmbedOptions so;  // a ranking model takes none: float32 logits
  const bool identity = m.config.score_activation == ScoreActivation::kIdentity;
  const std::string model = p->model.empty() ? m.name() : p->model;
  const auto t1 = Clock::now();
  EmbedChunks(
      m.replicas.get(), *seqs, std::move(chunks), so, NextRequestId(),
      [this, &m, p, shape, identity, model, tokens, t1, types,
       reply = std::move(reply)](StatusOr<ChunkedResult> r) mutable {
        m.metrics.Inference(Since(t1));
        PostWork([this, &m, p, shape, identity, model, tokens, r = std::move(r),
                  reply = std::move(reply)]() mutable {
          if (!r.ok()) return reply(ServerError(r.status(), m.replicas->RetryAfterSeconds()));
          auto scores = Scores(*r, p->raw_scores, identity);
          if (!scores.ok()) return reply(ServerError(scores.status()));
          JsonOut o(64 + scores->size() * 48);
          if (shape == RerankShape::kScore) {
            // /v1/score: as the cosine route answers, in document order unless top_k.
            if (p->top_n > 0) {
              SortByScore(&*scores);
              if (scores->size() > p->top_n) scores->resize(p->top_n);
            }
            o.Raw("{\"object\":\"list\",\"data\":[");
            for (size_t i = 0; i < scores->size(); ++i) {
              if (i) o.Raw(",");
              o.Raw("{\"object\":\"score\",\"index\":")
                  .Int(static_cast<int64_t>((*scores)[i].index));
              o.Raw(",\"score\":").Double((*scores)[i].score).Raw("}");
            }
            o.Raw("],\"model\":").Str(model);
            o.Raw(",\"usage\":{\"prompt_tokens\":").Int(tokens);
            o.Raw(",\"total_tokens\":").Int(tokens).Raw("}}");
            return reply(MakeResponse(200, o.Take()));
          }
          SortByScore(&*scores);
          if (p->top_n > 0 && scores->size() > p->top_n) scores->resize(p->top_n);
          const bool tei = shape == RerankShape::kTei;
          o.Raw(tei ? "[" : "{\"model\":");
          if (!tei) o.Str(model).Raw(",\"results\":[");
          for (size_t i = 0; i < scores->size(); ++i) {
            const Scored& s = (*scores)[i];
            if (i) o.Raw(",");
            o.Raw("{\"index\":").Int(static_cast<int64_t>(s.index));
            o.Raw(tei ? ",\"score\":" : ",\"relevance_score\":").Double(s.score);
            if (p->return_text) {
              o.Raw(tei ? ",\"text\":" : ",\"document\":{\"text\":").Str(p->documents[s.index]);
              if (!tei) o.Raw("}");
            }
            o.Raw("}");
          }
          if (tei) {
            o.Raw("]");
          } else {
            o.Raw("],\"usage\":{\"prompt_tokens\":").Int(tokens);
            o.Raw(",\"total_tokens\":").Int(tokens).Raw("}}");
          }
          reply(MakeResponse(200, o.Take()));
        });
      },
      trace::Current(), types.get());
}

}  // namespace petal::gateway
