// Routes whose inputs are pooled by spans (span_plan.h): POST /v1/contextualizedembeddings (late
// chunking: every chunk of a document embedded in the context of the whole document) and the
// "long_input": "mean" path of POST /v1/embeddings. Both send windows with pooling spans, get
// the spans' raw fp32 pooled states back (NORMALIZE_FALSE, full dimensions), combine them per
// output (token-weighted), and only then truncate, normalise and quantise (wire/codec.h), so a
// chunk cut by a window seam is treated exactly like any other.
#include <boost/asio/post.hpp>

#include <cstring>

#include "gateway/embed_format.h"
#include "gateway/gateway.h"
#include "gateway/json_writer.h"
#include "gateway/route_errors.h"
#include "gateway/span_plan.h"
#include "wire/codec.h"
#include "wire/messages.h"

namespace petal::gateway {
namespace {

// The output format of combined rows: the model's normalisation after Matryoshka truncation,
// the requested type (int8 in the model's own int8 form).
StatusOr<wire::OutputFormat> CombinedFormat(const ModelConfig& c, uint32_t dims, OutputType t) {
  wire::OutputFormat f;
  f.dims = dims == 0 ? c.hidden_size : static_cast<int>(dims);
  f.normalize = c.normalize;
  PETAL_ASSIGN_OR_RETURN(f.dtype, wire::DTypeFromProto(WireDType(t)));
  if (f.dtype == wire::OutputDType::kInt8 && c.int8_mode == Int8Mode::kTanh)
    f.dtype = wire::OutputDType::kInt8Tanh;
  return f;
}

// One output row as its "embedding" (and linear int8's "scale") members.
void WriteCombinedRow(JsonOut* o, const float* row, const wire::OutputFormat& f, OutputType t,
                      bool base64) {
  std::string bytes(wire::BytesPerRow(f), '\0');
  float scale = 0;
  wire::EncodeRow(row, f, reinterpret_cast<uint8_t*>(bytes.data()), &scale);
  o->Raw(",\"embedding\":");
  WriteRow(o, bytes, t, base64);
  if (f.dtype == wire::OutputDType::kInt8) o->Raw(",\"scale\":").Float(scale);
}

}  // namespace

void Gateway::RunSpanPlan(std::shared_ptr<SpanPlan> plan, const ServedModel& m,
                          v1::SpanPooling pooling, const trace::SpanContext& tc,
                          UniqueFunction<void(StatusOr<std::vector<float>>)> done) {
  v1::EmbedOptions so;
  so.set_dtype(v1::DTYPE_FLOAT32);
  so.set_normalize(v1::NORMALIZE_FALSE);  // raw span states: combined before normalising
  auto chunks = SplitChunks(plan->seqs, m.chunk);
  m.metrics.Chunks(static_cast<int64_t>(chunks.size()));
  const int dim = m.config.hidden_size;
  const auto t1 = Clock::now();
  EmbedChunks(
      m.replicas.get(), plan->seqs, std::move(chunks), so, NextRequestId(),
      [this, &m, plan, dim, t1, done = std::move(done)](StatusOr<ChunkedResult> r) mutable {
        m.metrics.Inference(Since(t1));
        if (!r.ok()) return done(r.status());
        // Gather the span rows in plan order, checking each answer's shape.
        std::vector<float> rows(plan->target.size() * static_cast<size_t>(dim));
        size_t at = 0;
        for (size_t c = 0; c < r->ranges.size(); ++c) {
          int64_t want = 0;
          for (size_t i = r->ranges[c].first; i < r->ranges[c].second; ++i)
            want += static_cast<int64_t>(plan->spans[i].size() / 2);
          const v1::EmbedResponse& resp = r->responses[c];
          auto f = wire::ResponseFormat(resp, want);
          if (!f.ok()) return done(Internal("server answer: " + f.status().message()));
          if (f->dtype != wire::OutputDType::kFloat32 || f->dims != dim ||
              at + static_cast<size_t>(want) * dim > rows.size())
            return done(Internal("server answer: span rows are not float32 of the full size"));
          std::memcpy(rows.data() + at, resp.data().data(), resp.data().size());
          at += static_cast<size_t>(want) * dim;
        }
        if (at != rows.size()) return done(Internal("server answer: missing span rows"));
        // Combining is cheap next to formatting, and both run on a worker (not gRPC's thread).
        PostWork([plan, dim, rows = std::move(rows), done = std::move(done)]() mutable {
          done(CombineSpanRows(*plan, rows.data(), dim));
        });
      },
      tc, nullptr, SpanInput{&plan->spans, pooling});
}

std::optional<RequestError> Gateway::PlanDocuments(const ContextualParams& p, const ServedModel& m,
                                                   SpanPlan* plan) {
  const int max_len = m.MaxInputTokens();
  std::vector<int32_t> prefix, suffix, prompt;
  if (Status s = ModelSpecialTokens(*m.tokenizer, &prefix, &suffix); !s.ok())
    return RequestError{500, s.message(), ""};
  auto prompt_text = m.prompts.Prefix(p.prompt_name, p.input_type);
  if (!prompt_text.ok()) return RequestError{400, prompt_text.status().message(), "prompt_name"};
  EncodeOptions eo;
  eo.add_special_tokens = false;
  if (!prompt_text->empty()) {
    auto ids = m.tokenizer->Encode(*prompt_text, eo);
    if (!ids.ok()) return RequestError{400, ids.status().message(), "prompt_name"};
    prompt = std::move(ids).value();
  }
  const int cap =
      WindowCapacity(max_len, static_cast<int>(prefix.size()), static_cast<int>(suffix.size()));
  if (cap < 2) return RequestError{500, "the model's maximum length leaves no room for text", ""};
  // Default overlap: a quarter of a window (docs/api.md).
  const int overlap = p.overlap >= 0 ? p.overlap : cap / 4;
  if (overlap >= cap) {
    return RequestError{400,
                        "'window_overlap' is " + std::to_string(overlap) +
                            " tokens; it must be below the " + std::to_string(cap) +
                            " text tokens of a window",
                        "window_overlap"};
  }
  for (size_t d = 0; d < p.documents.size(); ++d) {
    std::vector<std::vector<int32_t>> chunks(p.documents[d].size());
    int64_t tokens = static_cast<int64_t>(prompt.size());
    for (size_t j = 0; j < chunks.size(); ++j) {
      const std::string where = "input[" + std::to_string(d) + "][" + std::to_string(j) + "]";
      auto ids = m.tokenizer->Encode(p.documents[d][j], eo);
      if (!ids.ok())
        return RequestError{400, "'" + where + "': " + ids.status().message(), "input"};
      if (ids->empty()) return RequestError{400, "'" + where + "' has no tokens", "input"};
      tokens += static_cast<int64_t>(ids->size());
      if (tokens > kMaxDocumentTokens) {
        return RequestError{413,
                            "'input[" + std::to_string(d) + "]' has more than " +
                                std::to_string(kMaxDocumentTokens) + " tokens",
                            "input"};
      }
      chunks[j] = std::move(ids).value();
    }
    plan->Append(PlanLateChunks(chunks, prompt, prefix, suffix, max_len, overlap));
  }
  return std::nullopt;
}

void Gateway::ContextualEmbed(const HttpRequest& req, const ServedModel& m, Reply reply) {
  const trace::SpanContext tc = trace::Current();
  auto p = std::make_shared<ContextualParams>();
  if (auto err = ParseContextualEmbed(req.body(), p.get())) return reply(ErrorResponse(*err));
  if (p->dimensions > static_cast<uint32_t>(m.config.hidden_size)) {
    return reply(ErrorResponse({400,
                                "'dimensions' is " + std::to_string(p->dimensions) +
                                    "; the model has " + std::to_string(m.config.hidden_size),
                                "dimensions"}));
  }
  auto format = CombinedFormat(m.config, p->dimensions, p->output);
  if (!format.ok()) return reply(ErrorResponse({400, format.status().message(), "output_dtype"}));
  auto plan = std::make_shared<SpanPlan>();
  const auto t0 = Clock::now();
  if (auto err = PlanDocuments(*p, m, plan.get())) return reply(ErrorResponse(*err));
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(plan->seqs.size()), plan->tokens);
  RunSpanPlan(plan, m, v1::SPAN_POOLING_MEAN, tc,
              [this, &m, p, plan, f = *format,
               reply = std::move(reply)](StatusOr<std::vector<float>> rows) mutable {
                if (!rows.ok()) return reply(ServerError(rows.status()));
                const int dim = m.config.hidden_size;
                JsonOut o(64 + static_cast<size_t>(plan->outputs) * 32);
                o.Raw("{\"object\":\"list\",\"data\":[");
                size_t row = 0;
                for (size_t d = 0; d < p->documents.size(); ++d) {
                  if (d) o.Raw(",");
                  o.Raw("{\"object\":\"list\",\"index\":").Int(static_cast<int64_t>(d));
                  o.Raw(",\"data\":[");
                  for (size_t j = 0; j < p->documents[d].size(); ++j, ++row) {
                    if (j) o.Raw(",");
                    o.Raw("{\"object\":\"embedding\",\"index\":").Int(static_cast<int64_t>(j));
                    WriteCombinedRow(&o, rows->data() + row * dim, f, p->output, p->base64);
                    o.Raw("}");
                  }
                  o.Raw("]}");
                }
                o.Raw("],\"model\":").Str(p->model.empty() ? m.name() : p->model);
                o.Raw(",\"usage\":{\"prompt_tokens\":").Int(plan->tokens);
                o.Raw(",\"total_tokens\":").Int(plan->tokens).Raw("}}");
                reply(MakeResponse(200, o.Take()));
              });
}

void Gateway::EmbedLongInputs(std::shared_ptr<EmbedParams> p, const ServedModel& m, Reply reply) {
  const trace::SpanContext tc = trace::Current();
  auto format = CombinedFormat(m.config, p->dimensions, p->output);
  if (!format.ok()) return reply(ErrorResponse({400, format.status().message(), "output_dtype"}));
  const int max_len = m.MaxInputTokens();
  std::vector<int32_t> prefix, suffix;
  auto plan = std::make_shared<SpanPlan>();
  const auto t0 = Clock::now();
  if (p->inputs.pretokenized) {
    // Ids are sent as they are: windows are plain slices of them.
    for (size_t i = 0; i < p->inputs.ids.size(); ++i)
      plan->Append(PlanLongInput(p->inputs.ids[i], {}, {}, max_len));
  } else {
    if (Status s = ModelSpecialTokens(*m.tokenizer, &prefix, &suffix); !s.ok())
      return reply(ErrorResponse({500, s.message(), ""}));
    auto prompt = m.prompts.Prefix(p->prompt_name, p->input_type);
    if (!prompt.ok()) return reply(ErrorResponse({400, prompt.status().message(), "prompt_name"}));
    EncodeOptions eo;
    eo.add_special_tokens = false;
    for (size_t i = 0; i < p->inputs.texts.size(); ++i) {
      const std::string where = "input[" + std::to_string(i) + "]";
      if (p->inputs.texts[i].empty())
        return reply(ErrorResponse({400, "'" + where + "' is an empty string", "input"}));
      auto ids = m.tokenizer->Encode(*prompt + std::string(p->inputs.texts[i]), eo);
      if (!ids.ok())
        return reply(ErrorResponse({400, "'" + where + "': " + ids.status().message(), "input"}));
      if (ids->empty())
        return reply(ErrorResponse({400, "'" + where + "' has no tokens", "input"}));
      if (static_cast<int64_t>(ids->size()) > kMaxDocumentTokens) {
        return reply(ErrorResponse({413,
                                    "'" + where + "' has " + std::to_string(ids->size()) +
                                        " tokens; long_input takes at most " +
                                        std::to_string(kMaxDocumentTokens),
                                    "input"}));
      }
      plan->Append(PlanLongInput(*ids, prefix, suffix, max_len));
    }
  }
  m.metrics.Tokenized(Since(t0), static_cast<int64_t>(plan->seqs.size()), plan->tokens);
  RunSpanPlan(plan, m, v1::SPAN_POOLING_MODEL, tc,
              [this, &m, p, plan, f = *format,
               reply = std::move(reply)](StatusOr<std::vector<float>> rows) mutable {
                if (!rows.ok()) return reply(ServerError(rows.status()));
                const int dim = m.config.hidden_size;
                JsonOut o(64 + static_cast<size_t>(plan->outputs) * 32);
                o.Raw("{\"object\":\"list\",\"data\":[");
                for (int i = 0; i < plan->outputs; ++i) {
                  if (i) o.Raw(",");
                  o.Raw("{\"object\":\"embedding\",\"index\":").Int(i);
                  WriteCombinedRow(&o, rows->data() + static_cast<size_t>(i) * dim, f, p->output,
                                   p->base64);
                  o.Raw("}");
                }
                o.Raw("],\"model\":").Str(p->model.empty() ? m.name() : p->model);
                o.Raw(",\"usage\":{\"prompt_tokens\":").Int(plan->tokens);
                o.Raw(",\"total_tokens\":").Int(plan->tokens).Raw("}}");
                reply(MakeResponse(200, o.Take()));
              });
}

}  // namespace petal::gateway
