// The embedding routes: POST /v1/embeddings (OpenAI), POST /embed (TEI-style), POST /v1/score and
// POST /tokenize. A request is parsed and tokenized on an HTTP I/O thread, its chunks go to the
// replicas asynchronously, and the answer is formatted back on the I/O pool (not on gRPC's
// completion threads, which must stay free to deliver other answers).
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cmath>
#include <latch>
#include <numeric>

#include "gateway/embed_call.h"
#include "gateway/embed_format.h"
#include "gateway/gateway.h"
#include "gateway/json_writer.h"
#include "gateway/route_errors.h"
#include "gateway/server_timing.h"
#include "trace/trace.h"
#include "wire/codec.h"

namespace petal::gateway {
namespace {

// Cosine scores of rows 1.. against row 0, as the /v1/score answer.
StatusOr<std::string> ScoreJson(const ChunkedResult& r, const std::string& model, size_t top_k,
                                int64_t tokens) {
  PETAL_RETURN_IF_ERROR(CheckChunks(r));
  PETAL_ASSIGN_OR_RETURN(auto rows, DecodeRows(r));
  if (rows.empty()) return Internal("no rows for the query");
  const auto& q = rows[0];
  std::vector<std::pair<size_t, double>> scores;
  for (size_t d = 1; d < rows.size(); ++d) {
    if (rows[d].size() != q.size()) return Internal("rows of different dimensions");
    scores.emplace_back(
        d - 1, wire::CosineSimilarity(q.data(), rows[d].data(), static_cast<int>(q.size())));
  }
  return ScoreListJson(std::move(scores), top_k, model, tokens);
}

}  // namespace

std::optional<RequestError> Gateway::ServerOptions(const EmbedParams& p, const ServedModel& m,
                                                   v1::EmbedOptions* o) const {
  if (p.max_active_dims != 0) {
    return RequestError{400,
                        "'max_active_dims' applies to sparse embeddings only (a SPLADE model's "
                        "/embed_sparse, or /v1/embeddings with \"sparse\": true)",
                        "max_active_dims"};
  }
  if (p.dimensions > static_cast<uint32_t>(m.config.hidden_size)) {
    return RequestError{400,
                        "'dimensions' is " + std::to_string(p.dimensions) + "; the model has " +
                            std::to_string(m.config.hidden_size),
                        "dimensions"};
  }
  o->set_dimensions(p.dimensions);
  if (p.normalize.has_value()) {
    if (!*p.normalize && m.config.normalize) {
      return RequestError{400, "'normalize': this model always returns normalised embeddings",
                          "normalize"};
    }
    o->set_normalize(*p.normalize ? v1::NORMALIZE_TRUE : v1::NORMALIZE_FALSE);
  }
  o->set_dtype(WireDType(p.output));
  return std::nullopt;
}

std::optional<RequestError> Gateway::ToSequences(EmbedParams* p, const ServedModel& m,
                                                 const char* field,
                                                 std::vector<std::vector<int32_t>>* seqs) {
  const int max_len = m.MaxInputTokens();
  const std::string f = field;
  auto too_long = [&](size_t i, size_t n) {
    return RequestError{
        413,
        "'" + f + "[" + std::to_string(i) + "]' has " + std::to_string(n) +
            " tokens; the model's maximum context length is " + std::to_string(max_len) +
            " (send \"truncate\": true to cut it" +
            (f == "input" ? ", or \"long_input\": \"mean\" to embed it in windows)" : ")"),
        f};
  };
  if (p->inputs.pretokenized) {
    if (auto err = CheckVocabulary(p->inputs.ids, m.tokenizer->vocab_size(), f)) return err;
    for (size_t i = 0; i < p->inputs.ids.size(); ++i) {
      auto& s = p->inputs.ids[i];
      if (s.size() > static_cast<size_t>(max_len)) {
        if (!p->truncate) return too_long(i, s.size());
        if (p->truncate_left) s.erase(s.begin(), s.end() - max_len);
        s.resize(max_len);
      }
    }
    *seqs = std::move(p->inputs.ids);
    return std::nullopt;
  }
  auto prefix_or = m.prompts.Prefix(p->prompt_name, p->input_type);
  if (!prefix_or.ok()) return RequestError{400, prefix_or.status().message(), "prompt_name"};
  const std::string prefix = std::move(prefix_or).value();
  EncodeOptions eo;
  eo.add_special_tokens = true;
  eo.max_length = p->truncate ? max_len : 0;
  eo.truncate_left = p->truncate_left;
  const size_t n = p->inputs.texts.size();
  // Sequences already there keep their buffers (a recycled call's are empty): encoding into them
  // allocates nothing once they are large enough.
  seqs->resize(n);
  // Tokenizes texts [begin, end); stops at the first bad one. Each thread encodes with its own
  // scratch (and prompt buffer), kept from request to request.
  auto run = [&](size_t begin, size_t end) -> std::optional<RequestError> {
    thread_local EncodeScratch scratch;
    thread_local std::string prompted;
    for (size_t i = begin; i < end; ++i) {
      if (p->inputs.texts[i].empty()) {
        return RequestError{400, "'" + f + "[" + std::to_string(i) + "]' is an empty string", f};
      }
      std::string_view text = p->inputs.texts[i];
      if (!prefix.empty()) text = prompted.assign(prefix).append(text);
      std::vector<int32_t>& ids = (*seqs)[i];
      if (Status st = m.tokenizer->EncodeInto(text, eo, &scratch, &ids); !st.ok()) {
        return RequestError{400, "'" + f + "[" + std::to_string(i) + "]': " + st.message(), f};
      }
      if (ids.empty()) {
        return RequestError{400, "'" + f + "[" + std::to_string(i) + "]' has no tokens", f};
      }
      if (ids.size() > static_cast<size_t>(max_len)) return too_long(i, ids.size());
    }
    return std::nullopt;
  };
  return RunSliced(n, run, TextBytes(p->inputs.texts));
}

size_t Gateway::Slices(size_t n, size_t bytes) const {
  return std::min<size_t>(tokenizer_threads_,
                          bytes ? std::min(n, bytes / kBytesPerSlice) : n / kTextsPerSlice);
}

std::optional<RequestError> Gateway::RunSliced(size_t n, SliceFn run, size_t bytes) const {
  const size_t slices = Slices(n, bytes);
  if (slices < 2) return run(0, n);
  std::vector<std::optional<RequestError>> errors(slices);
  std::latch done(static_cast<std::ptrdiff_t>(slices - 1));
  for (size_t s = 1; s < slices; ++s) {
    boost::asio::post(*tokenizers_, [&, s] {
      errors[s] = run(n * s / slices, n * (s + 1) / slices);
      done.count_down();
    });
  }
  errors[0] = run(0, n / slices);
  done.wait();
  // The first bad input in request order is the one reported, as in the sequential path.
  for (auto& e : errors) {
    if (e) return e;
  }
  return std::nullopt;
}

void Gateway::FormatSliced(size_t n, size_t bytes, ItemFn write, JsonOut* out) const {
  if (Slices(n, bytes) < 2) {  // one slice: straight into `out` (a single embedding's path)
    for (size_t i = 0; i < n; ++i) {
      if (i) out->Raw(",");
      write(i, out);
    }
    return;
  }
  // Each slice formats into its own string, kept at its first item's index; joined in order.
  std::vector<std::string> parts(n);
  RunSliced(
      n,
      [&](size_t begin, size_t end) -> std::optional<RequestError> {
        JsonOut o(bytes / std::max<size_t>(n, 1) * (end - begin) + 64);
        for (size_t i = begin; i < end; ++i) {
          if (i) o.Raw(",");
          write(i, &o);
        }
        parts[begin] = o.Take();
        return std::nullopt;
      },
      bytes);
  size_t total = out->str().size();
  for (const auto& part : parts) total += part.size();
  out->str().reserve(total);
  for (const auto& part : parts) out->Raw(part);
}

void Gateway::Embed(const HttpRequest& req, const ServedModel& m, bool openai, Reply reply) {
  const trace::SpanContext tc = trace::Current();  // invalid when the request is not traced
  const auto entry = Clock::now();
  // The request's state lives until its answer is formatted, recycled; `p` shares it.
  std::shared_ptr<EmbedCall> call = TakeEmbedCall();
  std::shared_ptr<EmbedParams> p(call, &call->params);
  const char* field = openai ? "input" : "inputs";
  trace::Span parse = trace::Span::Child("parse", tc);
  auto err = openai ? ParseOpenAiEmbed(req.body(), m.max_inputs, p.get())
                    : ParseTeiEmbed(req.body(), m.max_inputs, p.get());
  // A sparse (SPLADE) model on /v1/embeddings answers with "sparse": true only (an explicit
  // field: its rows are not dense vectors); "sparse" on an embedder is refused there.
  if (!err && openai && (p->sparse || m.config.task == ModelTask::kSparse)) {
    parse.End();
    return EmbedSparse(std::move(p), m, true, std::move(reply));
  }
  v1::EmbedOptions so;
  if (!err) err = ServerOptions(*p, m, &so);
  parse.End();
  if (!err && p->long_input_mean) return EmbedLongInputs(std::move(p), m, std::move(reply));
  std::vector<std::vector<int32_t>>* seqs = &call->seqs;
  const auto t0 = Clock::now();
  trace::Span tokenize = trace::Span::Child("tokenize", tc);
  if (!err) err = ToSequences(p.get(), m, field, seqs);
  tokenize.SetInt("petal.inputs", static_cast<int64_t>(seqs->size()));
  tokenize.End();
  if (err) return reply(ErrorResponse(*err));
  int64_t tokens = 0;
  for (const auto& s : *seqs) tokens += static_cast<int64_t>(s.size());
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(seqs->size()), tokens);
  auto chunks = SplitChunks(*seqs, m.chunk);
  m.metrics.Chunks(static_cast<int64_t>(chunks.size()));
  const auto t1 = Clock::now();
  ServerTiming* timing = &call->timing;
  timing->Add("parse", std::chrono::duration<double>(t0 - entry).count());
  timing->Add("tokenize", std::chrono::duration<double>(t1 - t0).count());
  EmbedChunks(
      m.replicas.get(), *seqs, std::move(chunks), so, NextRequestId(),
      [this, &m, call, p = p.get(), openai, tokens, t1, tc, entry, timing,
       reply = std::move(reply)](StatusOr<ChunkedResult> r) mutable {
        const double replica_s = Since(t1);
        m.metrics.Inference(replica_s);
        timing->Add("replica", replica_s);
        size_t rows = 0;
        if (r.ok()) {
          uint64_t queue_us = 0, server_us = 0;
          for (const auto& resp : r->responses) {
            queue_us = std::max(queue_us, resp.queue_us());
            server_us = std::max(server_us, resp.total_us());
            rows += resp.shape_size() > 0 ? resp.shape(0) : 0;
          }
          m.metrics.Queue(static_cast<double>(queue_us) * 1e-6);
          timing->Add("server", static_cast<double>(server_us) * 1e-6);
          timing->Add("queue", static_cast<double>(queue_us) * 1e-6);
        }
        auto format = [this, &m, call = std::move(call), p, openai, tokens, tc, entry, timing,
                       r = std::move(r), reply = std::move(reply)]() mutable {
          const auto f0 = Clock::now();
          trace::Span format_span = trace::Span::Child("format", tc);
          if (!r.ok()) return reply(ServerError(r.status(), m.replicas->RetryAfterSeconds()));
          if (Status s = CheckChunks(*r); !s.ok()) return reply(ServerError(s));
          struct RowRef {
            std::string_view row;
            float scale;
            bool int8;  // the server's rows are linear int8
          };
          // This thread's list, reused from answer to answer. Named through a reference: the
          // slices may run on other threads and must read this thread's list, not their own.
          thread_local std::vector<RowRef> thread_refs;
          std::vector<RowRef>& refs = thread_refs;
          refs.clear();
          size_t row_bytes = 0;
          ForEachRow(*r, [&](std::string_view row, float scale, const v1::EmbedResponse& resp) {
            refs.push_back({row, scale, resp.dtype() == v1::DTYPE_INT8});
            row_bytes += row.size();
          });
          // ~3 bytes of JSON per byte of a float32 row: the slices' work estimate.
          const size_t json_bytes = 3 * row_bytes;
          JsonOut o(64 + json_bytes);
          if (openai) {
            o.Raw("{\"object\":\"list\",\"data\":[");
            const bool scaled = p->output == OutputType::kInt8 || p->output == OutputType::kUint8;
            FormatSliced(
                refs.size(), json_bytes,
                [&](size_t i, JsonOut* out) {
                  out->Raw("{\"object\":\"embedding\",\"index\":").Int(static_cast<int64_t>(i));
                  out->Raw(",\"embedding\":");
                  WriteRow(out, refs[i].row, p->output, p->base64);
                  // Linear int8 is per-row scaled: x ~= q * scale (uint8: (u - 128) * scale). A
                  // model with tanh int8 (pplx-embed-v1) answers round(127 tanh(x)), which has no
                  // scale.
                  if (scaled && refs[i].int8) out->Raw(",\"scale\":").Float(refs[i].scale);
                  out->Raw("}");
                },
                &o);
            o.Raw("],\"model\":").Str(p->model.empty() ? m.name() : p->model);
            o.Raw(",\"usage\":{\"prompt_tokens\":").Int(tokens);
            o.Raw(",\"total_tokens\":").Int(tokens).Raw("}}");
          } else {
            o.Raw("[");
            FormatSliced(
                refs.size(), json_bytes,
                [&](size_t i, JsonOut* out) { WriteRow(out, refs[i].row, p->output, false); }, &o);
            o.Raw("]");
          }
          format_span.End();
          HttpResponse res = MakeResponse(200, o.Take());
          timing->Add("format", Since(f0));
          timing->Add("gateway", Since(entry));
          res.set("Server-Timing", ToBeast(timing->value()));
          reply(std::move(res));
        };
        // A few rows (or an error) are cheaper to format here than the hand-off to a worker.
        if (rows <= kInlineFormatRows) return format();
        PostWork(std::move(format));
      },
      tc);
}

void Gateway::Score(const HttpRequest& req, const ServedModel& m, Reply reply) {
  const trace::SpanContext tc = trace::Current();
  ScoreParams sp;
  if (m.config.task == ModelTask::kScore) {
    // A ranking model scores each (query, document) pair itself.
    if (auto err = ParseScore(req.body(), m.max_inputs, &sp)) {
      return reply(ErrorResponse(*err));
    }
    auto p = std::make_shared<RerankParams>();
    p->model = std::move(sp.model);
    p->query = std::move(sp.query);
    p->documents = std::move(sp.documents);
    p->top_n = sp.top_k;
    p->truncate = sp.truncate;
    if (p->query.empty()) return reply(ErrorResponse({400, "'query' is an empty string", "query"}));
    return RunRerank(p, m, RerankShape::kScore, "documents", std::move(reply));
  }
  if (m.config.task == ModelTask::kMultiVector) {
    // A multi-vector model ranks by MaxSim over the query's and each document's token vectors.
    if (auto err = ParseScore(req.body(), m.max_inputs - 1, &sp)) {
      return reply(ErrorResponse(*err));
    }
    return MaxSimScore(std::move(sp), m, std::move(reply));
  }
  if (auto err = ParseScore(req.body(), m.max_inputs - 1, &sp)) {
    return reply(ErrorResponse(*err));
  }
  // The query and the documents are tokenized separately so that errors name the right field
  // and index, then embedded as one request (the query is row 0).
  EmbedParams query, docs;
  // Views of sp's strings, which outlive their use here.
  query.inputs.texts.push_back(sp.query);
  docs.inputs.texts.assign(sp.documents.begin(), sp.documents.end());
  auto seqs = std::make_shared<std::vector<std::vector<int32_t>>>();
  std::vector<std::vector<int32_t>> doc_seqs;
  const auto t0 = Clock::now();
  if (auto err = ToSequences(&query, m, "query", seqs.get())) return reply(ErrorResponse(*err));
  if (auto err = ToSequences(&docs, m, "documents", &doc_seqs)) return reply(ErrorResponse(*err));
  for (auto& d : doc_seqs) seqs->push_back(std::move(d));
  int64_t tokens = 0;
  for (const auto& s : *seqs) tokens += static_cast<int64_t>(s.size());
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(seqs->size()), tokens);
  v1::EmbedOptions so;
  so.set_dtype(v1::DTYPE_FLOAT32);
  const std::string model = sp.model.empty() ? m.name() : sp.model;
  const size_t top_k = sp.top_k;
  auto chunks = SplitChunks(*seqs, m.chunk);
  m.metrics.Chunks(static_cast<int64_t>(chunks.size()));
  const auto t1 = Clock::now();
  EmbedChunks(
      m.replicas.get(), *seqs, std::move(chunks), so, NextRequestId(),
      [this, &m, model, top_k, tokens, t1,
       reply = std::move(reply)](StatusOr<ChunkedResult> r) mutable {
        m.metrics.Inference(Since(t1));
        PostWork(
            [this, &m, model, top_k, tokens, r = std::move(r), reply = std::move(reply)]() mutable {
              if (!r.ok()) return reply(ServerError(r.status(), m.replicas->RetryAfterSeconds()));
              auto json = ScoreJson(*r, model, top_k, tokens);
              if (!json.ok()) return reply(ServerError(json.status()));
              reply(MakeResponse(200, std::move(json).value()));
            });
      },
      tc);
}

void Gateway::Tokenize(const HttpRequest& req, const ServedModel& m, Reply reply) {
  TokenizeParams tp;
  if (auto err = ParseTokenize(req.body(), m.max_inputs, &tp)) {
    return reply(ErrorResponse(*err));
  }
  EncodeOptions eo;
  eo.add_special_tokens = tp.add_special_tokens;
  JsonOut o;
  o.Raw("[");
  for (size_t i = 0; i < tp.texts.size(); ++i) {
    auto ids = m.tokenizer->Encode(tp.texts[i], eo);
    if (!ids.ok()) {
      return reply(ErrorResponse(
          {400, "'inputs[" + std::to_string(i) + "]': " + ids.status().message(), "inputs"}));
    }
    if (i) o.Raw(",");
    o.Raw("[");
    for (size_t j = 0; j < ids->size(); ++j) {
      if (j) o.Raw(",");
      o.Raw("{\"id\":").Int((*ids)[j]).Raw(",\"text\":").Str(m.tokenizer->IdToToken((*ids)[j]));
      o.Raw("}");
    }
    o.Raw("]");
  }
  o.Raw("]");
  reply(MakeResponse(200, o.Take()));
}

}  // namespace petal::gateway
