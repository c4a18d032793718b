// The classification routes of a sequence classifier: POST /predict (TEI) and POST /classify
// (vLLM). Inputs are single texts or, on /predict, (text, text_pair) pairs (the tokenizer's pair
// template, as the rerank routes build them); they are chunked and balanced over the replicas
// like embeddings, and each row of logits comes back as the model's class probabilities (softmax,
// or a sigmoid per class for multi-label models; wire::ClassProbabilities) or, on request, the
// raw logits. Which models may ask these routes is the route table's (gateway.cc).
// Thread-safety: handlers run on I/O or worker threads; all state they share is the gateway's.
#include <boost/asio/post.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "gateway/embed_format.h"
#include "gateway/gateway.h"
#include "gateway/json_writer.h"
#include "gateway/route_errors.h"
#include "tokenizer/rank_input.h"
#include "trace/trace.h"
#include "wire/codec.h"

namespace petal::gateway {

void Gateway::TeiPredict(const HttpRequest& req, const ServedModel& m, Reply reply) {
  auto p = std::make_shared<ClassifyParams>();
  if (auto err = ParsePredict(req.body(), m.max_inputs, p.get())) {
    return reply(ErrorResponse(*err));
  }
  RunClassify(p, m, ClassifyShape::kTei, "inputs", std::move(reply));
}

void Gateway::VllmClassify(const HttpRequest& req, const ServedModel& m, Reply reply) {
  auto p = std::make_shared<ClassifyParams>();
  if (auto err = ParseClassify(req.body(), m.max_inputs, p.get())) {
    return reply(ErrorResponse(*err));
  }
  RunClassify(p, m, ClassifyShape::kVllm, "input", std::move(reply));
}

std::optional<RequestError> Gateway::ToClassifyInputs(const ClassifyParams& p, const ServedModel& m,
                                                      const char* field,
                                                      std::vector<std::vector<int32_t>>* seqs,
                                                      std::vector<std::vector<int32_t>>* types) {
  const int max_len = m.MaxInputTokens();
  const std::string f = field;
  RankInputOptions ro;  // pairs: the tokenizer's pair template, longest_first truncation
  ro.max_length = max_len;
  ro.truncate = p.truncate;
  EncodeOptions eo;
  eo.max_length = p.truncate ? max_len : 0;
  const size_t n = p.texts.size();
  seqs->resize(n);
  if (p.has_pairs) types->resize(n);
  auto run = [&](size_t begin, size_t end) -> std::optional<RequestError> {
    EncodeScratch scratch;
    for (size_t i = begin; i < end; ++i) {
      const std::string at = "'" + f + "[" + std::to_string(i) + "]'";
      if (p.has_pairs && p.is_pair[i]) {
        auto e = EncodeRankPair(*m.tokenizer, p.texts[i], p.second[i], ro, &scratch);
        if (!e.ok() && e.status().code() == StatusCode::kOutOfRange) {
          return RequestError{
              413, at + ": " + e.status().message() + " (send \"truncate\": true to cut it)", f};
        }
        if (!e.ok()) return RequestError{400, at + ": " + e.status().message(), f};
        (*seqs)[i] = std::move(e->ids);
        (*types)[i] = std::move(e->type_ids);
        continue;
      }
      auto ids = m.tokenizer->Encode(p.texts[i], eo);
      if (!ids.ok()) return RequestError{400, at + ": " + ids.status().message(), f};
      if (ids->empty()) return RequestError{400, at + " has no tokens", f};
      if (ids->size() > static_cast<size_t>(max_len)) {
        return RequestError{413,
                            at + " has " + std::to_string(ids->size()) +
                                " tokens; the model's maximum context length is " +
                                std::to_string(max_len) + " (send \"truncate\": true to cut it)",
                            f};
      }
      if (p.has_pairs) (*types)[i].assign(ids->size(), 0);
      (*seqs)[i] = std::move(ids).value();
    }
    return std::nullopt;
  };
  // Large batches in slices on the tokenizer pool.
  return RunSliced(n, run, TextBytes(p.texts) + TextBytes(p.second));
}

namespace {

// Every input's row of num_labels values: probabilities (or the logits when `raw`).
StatusOr<std::vector<std::vector<double>>> ClassRows(const ChunkedResult& r, size_t labels,
                                                     bool sigmoid, bool raw) {
  PETAL_RETURN_IF_ERROR(CheckChunks(r));
  PETAL_ASSIGN_OR_RETURN(auto rows, DecodeRows(r));
  std::vector<std::vector<double>> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].size() != labels) {
      return Internal("the server answered " + std::to_string(rows[i].size()) +
                      " logits per input for a model of " + std::to_string(labels) + " labels");
    }
    out[i].resize(labels);
    if (raw) {
      std::copy(rows[i].begin(), rows[i].end(), out[i].begin());
    } else {
      wire::ClassProbabilities(rows[i].data(), static_cast<int>(labels), sigmoid, out[i].data());
    }
  }
  return out;
}

// A value as JSON: a raw logit in float32's shortest form (it is a float32), a probability as
// the double it was computed in.
void Value(JsonOut* o, double v, bool raw) {
  if (raw) {
    o->Float(static_cast<float>(v));
  } else {
    o->Double(v);
  }
}

// TEI: [{"score", "label"}, ...] per input, highest score first ([[...], ...] for a batch).
std::string TeiJson(const std::vector<std::vector<double>>& rows,
                    const std::vector<std::string>& labels, bool single, bool raw) {
  JsonOut o(32 + rows.size() * labels.size() * 40);
  if (!single) o.Raw("[");
  std::vector<size_t> order(labels.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return rows[i][a] > rows[i][b]; });
    o.Raw(i ? ",[" : "[");
    for (size_t k = 0; k < order.size(); ++k) {
      o.Raw(k ? ",{\"score\":" : "{\"score\":");
      Value(&o, rows[i][order[k]], raw);
      o.Raw(",\"label\":").Str(labels[order[k]]).Raw("}");
    }
    o.Raw("]");
  }
  if (!single) o.Raw("]");
  return o.Take();
}

// vLLM: {"id", "object": "list", "created", "model", "data": [{"index", "label" (the most
// probable class), "probs", "num_classes"}], "usage"}.
std::string VllmJson(const std::vector<std::vector<double>>& rows,
                     const std::vector<std::string>& labels, const std::string& id,
                     const std::string& model, int64_t tokens, bool raw) {
  JsonOut o(128 + rows.size() * (64 + labels.size() * 24));
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  o.Raw("{\"id\":").Str(id).Raw(",\"object\":\"list\",\"created\":").Int(created);
  o.Raw(",\"model\":").Str(model).Raw(",\"data\":[");
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t best =
        static_cast<size_t>(std::max_element(rows[i].begin(), rows[i].end()) - rows[i].begin());
    o.Raw(i ? ",{\"index\":" : "{\"index\":").Int(static_cast<int64_t>(i));
    o.Raw(",\"label\":").Str(labels[best]).Raw(",\"probs\":[");
    for (size_t k = 0; k < rows[i].size(); ++k) {
      o.Raw(k ? "," : "");
      Value(&o, rows[i][k], raw);
    }
    o.Raw("],\"num_classes\":").Int(static_cast<int64_t>(labels.size())).Raw("}");
  }
  o.Raw("],\"usage\":{\"prompt_tokens\":").Int(tokens).Raw(",\"total_tokens\":").Int(tokens);
  o.Raw(",\"completion_tokens\":0,\"prompt_tokens_details\":null}}");
  return o.Take();
}

}  // namespace

void Gateway::RunClassify(std::shared_ptr<ClassifyParams> p, const ServedModel& m,
                          ClassifyShape shape, const char* field, Reply reply) {
  auto seqs = std::make_shared<std::vector<std::vector<int32_t>>>();
  auto types = std::make_shared<std::vector<std::vector<int32_t>>>();
  const auto t0 = Clock::now();
  if (auto err = ToClassifyInputs(*p, m, field, seqs.get(), types.get())) {
    return reply(ErrorResponse(*err));
  }
  int64_t tokens = 0;
  for (const auto& s : *seqs) tokens += static_cast<int64_t>(s.size());
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(seqs->size()), tokens);
  auto chunks = SplitChunks(*seqs, m.chunk);
  m.metrics.Chunks(static_cast<int64_t>(chunks.size()));
  v1::EmbedOptions so;  // a classifier takes none: float32 logits
  const std::string model = p->model.empty() ? m.name() : p->model;
  const std::string id = NextRequestId();
  const auto t1 = Clock::now();
  EmbedChunks(
      m.replicas.get(), *seqs, std::move(chunks), so, id,
      [this, &m, p, shape, model, id, tokens, t1, types,
       reply = std::move(reply)](StatusOr<ChunkedResult> r) mutable {
        m.metrics.Inference(Since(t1));
        auto format = [this, &m, p, shape, model, id, tokens, r = std::move(r),
                       reply = std::move(reply)]() mutable {
          if (!r.ok()) return reply(ServerError(r.status(), m.replicas->RetryAfterSeconds()));
          const bool sigmoid = m.config.class_activation == ClassActivation::kSigmoid;
          auto rows = ClassRows(*r, m.config.labels.size(), sigmoid, p->raw_scores);
          if (!rows.ok()) return reply(ServerError(rows.status()));
          reply(MakeResponse(200, shape == ClassifyShape::kTei
                                      ? TeiJson(*rows, m.config.labels, p->single, p->raw_scores)
                                      : VllmJson(*rows, m.config.labels, "classify-" + id, model,
                                                 tokens, p->raw_scores)));
        };
        // A few rows (or an error) are cheaper to format here than the hand-off to a worker.
        if (p->texts.size() <= kInlineFormatRows) return format();
        PostWork(std::move(format));
      },
      trace::Current(), p->has_pairs ? types.get() : nullptr);
}

}  // namespace petal::gateway
