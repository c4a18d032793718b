#include "server/request.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "wire/messages.h"
#include "wire/recycled.h"
#include "wire/sparse_rows.h"

namespace petal::server {
namespace {

std::string Num(uint64_t v) { return std::to_string(v); }

// Fills job->cu_spans / job->spans from the request's pooling spans, and makes span rows
// normalised by the codec where the model (or the request) asks for it: the engine returns them
// raw.
Status ParseSpans(const v1::EmbedRequest& req, const ModelConfig& config,
                  const std::vector<int32_t>& cu, EmbedJob* job) {
  if (req.span_counts_size() == 0) {
    if (req.spans_size() != 0) return InvalidArgument("spans: given without span_counts");
    return Status::Ok();
  }
  if (config.HasHead())
    return InvalidArgument(
        "span_counts: pooling spans are for embedding models, not ranking models, classifiers "
        "or multi-vector models");
  const int n = static_cast<int>(cu.size()) - 1;
  if (req.span_counts_size() != n) {
    return InvalidArgument("span_counts: " + Num(req.span_counts_size()) + " entries for " +
                           Num(n) + " sequences (one per sequence)");
  }
  int32_t pooling = 0;
  switch (req.span_pooling()) {
    case v1::SPAN_POOLING_MEAN:
      pooling = 0;  // cpu::Pooling::kMean
      break;
    case v1::SPAN_POOLING_MODEL:
      pooling = static_cast<int32_t>(config.pooling);
      break;
    default:
      return InvalidArgument("span_pooling: unknown value " + std::to_string(req.span_pooling()));
  }
  job->cu_spans.assign(n + 1, 0);
  uint64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t k = req.span_counts(i);
    if (k == 0 || k > static_cast<uint32_t>(kMaxSpansPerSequence)) {
      return InvalidArgument("span_counts[" + Num(i) + "]: " + Num(k) + " spans (1.." +
                             Num(kMaxSpansPerSequence) + " per sequence)");
    }
    total += k;
    job->cu_spans[i + 1] = static_cast<int32_t>(total);
  }
  if (static_cast<uint64_t>(req.spans_size()) != 2 * total) {
    return InvalidArgument("spans: " + Num(req.spans_size()) + " values for " + Num(total) +
                           " spans (2 per span: start, end)");
  }
  job->spans.resize(3 * total);
  for (int i = 0; i < n; ++i) {
    const uint32_t len = static_cast<uint32_t>(cu[i + 1] - cu[i]);
    for (int k = job->cu_spans[i]; k < job->cu_spans[i + 1]; ++k) {
      const uint32_t a = req.spans(2 * k), b = req.spans(2 * k + 1);
      if (a >= b || b > len) {
        return InvalidArgument("spans[" + Num(2 * k) + "]: [" + Num(a) + ", " + Num(b) +
                               ") is empty or outside sequence " + Num(i) + " of " + Num(len) +
                               " tokens");
      }
      job->spans[3 * k] = static_cast<int32_t>(a);
      job->spans[3 * k + 1] = static_cast<int32_t>(b);
      job->spans[3 * k + 2] = pooling;  // raw: the codec normalises (below)
    }
  }
  if (req.options().normalize() == v1::NORMALIZE_DEFAULT) job->format.normalize = config.normalize;
  return Status::Ok();
}

}  // namespace

int MaxSequenceTokens(const ModelConfig& config) {
  return config.max_position_embeddings > 0 ? config.max_position_embeddings
                                            : config.max_seq_length;
}

int GrpcCode(StatusCode code) { return static_cast<int>(code); }  // StatusCode mirrors gRPC's

StatusOr<EmbedJob> JobFromRequest(const v1::EmbedRequest& req, const ModelConfig& config) {
  const uint32_t version = req.protocol_version() == 0 ? 1 : req.protocol_version();
  if (version < kMinProtocolVersion || version > kProtocolVersion) {
    return InvalidArgument("protocol_version: " + Num(version) +
                           " is not supported (server speaks " + Num(kMinProtocolVersion) + ".." +
                           Num(kProtocolVersion) + ")");
  }
  EmbedJob job;
  job.request_id = req.request_id();
  const auto& opts = req.options();

  // Options first: they are cheap to check and independent of the payload.
  PETAL_ASSIGN_OR_RETURN(job.format.dtype, wire::DTypeFromProto(opts.dtype()));
  // A model whose own int8 is round(127 tanh(x)) (pplx-embed-v1) answers INT8 in that form; the
  // response's dtype says which one was used, and INT8_TANH can also be asked for by name.
  if (job.format.dtype == wire::OutputDType::kInt8 && config.int8_mode == Int8Mode::kTanh) {
    job.format.dtype = wire::OutputDType::kInt8Tanh;
  }
  if (config.task == ModelTask::kMultiVector) {
    // One L2-normalised vector per token (normalised by the engine): any output type, full
    // dimensions only.
    if (opts.dimensions() != 0 || opts.normalize() == v1::NORMALIZE_FALSE ||
        job.format.dtype == wire::OutputDType::kInt8Tanh) {
      return InvalidArgument(
          "options: this model is a multi-vector (ColBERT) model (it returns one L2-normalised "
          "vector of " +
          std::to_string(config.score_outputs) +
          " values per token); dimensions, NORMALIZE_FALSE and INT8_TANH do not apply");
    }
    job.format.dims = config.score_outputs;
    job.format.normalize = false;
    job.per_token = true;
  } else if (config.HasHead()) {
    // A ranking model or classifier returns its logits as float32; the embedding options do not
    // apply.
    if (job.format.dtype != wire::OutputDType::kFloat32 || opts.dimensions() != 0 ||
        opts.normalize() != v1::NORMALIZE_DEFAULT) {
      const bool classify = config.task == ModelTask::kClassify;
      const bool sparse = config.task == ModelTask::kSparse;
      return InvalidArgument(std::string("options: this model is a ") +
                             (classify ? "sequence classifier"
                              : sparse ? "sparse (SPLADE) embedding model"
                                       : "ranking model") +
                             " (it returns " + std::to_string(config.score_outputs) +
                             " float32 logits per sequence" + (classify ? ", one per class" : "") +
                             "); dtype, dimensions and normalize must be left unset");
    }
    job.format.dims = config.score_outputs;
    job.format.normalize = false;
  }
  if (opts.sparse()) {  // the non-zero entries only (FillResponse packs them)
    if (config.task != ModelTask::kSparse) {
      return InvalidArgument("options.sparse: only sparse (SPLADE) models answer sparse rows");
    }
    job.format.sparse = true;
  }
  if (opts.max_active_dims() != 0) {
    if (config.task != ModelTask::kSparse) {
      return InvalidArgument(
          "options.max_active_dims: only sparse (SPLADE) models keep their top values");
    }
    // As SparseEncoder: more than the vocabulary keeps every non-zero.
    job.max_active_dims = static_cast<int32_t>(
        std::min<uint64_t>(opts.max_active_dims(), static_cast<uint64_t>(config.vocab_size)));
  }
  const uint32_t hidden = static_cast<uint32_t>(config.hidden_size);
  if (config.HasHead()) {
    // options checked above
  } else if (opts.dimensions() > hidden) {
    return InvalidArgument("options.dimensions: " + Num(opts.dimensions()) +
                           " exceeds the model's hidden size " + Num(hidden));
  }
  if (!config.HasHead()) {
    job.format.dims =
        opts.dimensions() == 0 ? config.hidden_size : static_cast<int>(opts.dimensions());
  }
  // A ranking model, classifier or multi-vector model takes the NORMALIZE_FALSE path: its rows
  // leave the codec as the engine wrote them.
  switch (config.HasHead() ? static_cast<int>(v1::NORMALIZE_FALSE)
                           : static_cast<int>(opts.normalize())) {
    case v1::NORMALIZE_DEFAULT:
    case v1::NORMALIZE_TRUE:
      // The engine already normalised full rows when the model does; only truncation (or a model
      // that does not normalise) needs it again.
      job.format.normalize =
          opts.normalize() == v1::NORMALIZE_TRUE ||
          wire::RenormalizeByDefault(config.normalize, job.format.dims, config.hidden_size);
      break;
    case v1::NORMALIZE_FALSE:
      // Span rows leave the engine raw: a caller combining windows normalises them itself.
      if (config.normalize && !config.HasHead() && req.span_counts_size() == 0) {
        return InvalidArgument(
            "options.normalize: NORMALIZE_FALSE is not available for this model: its pipeline "
            "L2-normalises embeddings before they leave the engine");
      }
      job.format.normalize = false;
      break;
    default:
      return InvalidArgument("options.normalize: unknown value " +
                             std::to_string(opts.normalize()));
  }

  const int n = req.lengths_size();
  if (n == 0) return InvalidArgument("lengths: at least one sequence is required");
  const std::string& bytes = req.token_ids();
  if (bytes.size() % 4 != 0) {
    return InvalidArgument("token_ids: " + Num(bytes.size()) +
                           " bytes is not a multiple of 4 (packed little-endian int32)");
  }
  const int max_len = MaxSequenceTokens(config);
  uint64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t len = req.lengths(i);
    if (len == 0) return InvalidArgument("lengths[" + Num(i) + "]: sequence is empty");
    if (max_len > 0 && len > static_cast<uint32_t>(max_len)) {
      return InvalidArgument("lengths[" + Num(i) + "]: " + Num(len) +
                             " tokens exceeds the model's maximum of " + Num(max_len));
    }
    total += len;
  }
  if (total * 4 != bytes.size()) {
    return InvalidArgument("lengths: sum to " + Num(total) + " tokens but token_ids holds " +
                           Num(bytes.size() / 4) + " (" + Num(bytes.size()) + " bytes)");
  }
  // Recycled buffers (wire/recycled.h); the engine loop gives them back when the job is done.
  job.token_ids = wire::TakeIntBuffer();
  job.cu_seqlens = wire::TakeIntBuffer();
  job.token_ids.resize(total);
  std::memcpy(job.token_ids.data(), bytes.data(), bytes.size());  // little-endian host
  job.cu_seqlens.resize(n + 1);
  job.cu_seqlens[0] = 0;
  for (int i = 0; i < n; ++i)
    job.cu_seqlens[i + 1] = job.cu_seqlens[i] + static_cast<int32_t>(req.lengths(i));
  const std::string& types = req.token_type_ids();
  if (!types.empty()) {
    if (types.size() != bytes.size()) {
      return InvalidArgument("token_type_ids: " + Num(types.size() / 4) + " ids for " + Num(total) +
                             " tokens (empty, or one per token id)");
    }
    job.token_type_ids.resize(total);
    std::memcpy(job.token_type_ids.data(), types.data(), types.size());
    const int32_t limit = std::max(config.type_vocab_size, 1);
    for (size_t t = 0; t < total; ++t) {
      if (job.token_type_ids[t] < 0 || job.token_type_ids[t] >= limit) {
        return InvalidArgument("token_type_ids[" + Num(t) +
                               "]: " + std::to_string(job.token_type_ids[t]) + " is outside [0, " +
                               std::to_string(limit) + ") (the model's type_vocab_size)");
      }
    }
  }
  PETAL_RETURN_IF_ERROR(ParseSpans(req, config, job.cu_seqlens, &job));
  const int32_t vocab = config.vocab_size;
  for (size_t t = 0; t < job.token_ids.size(); ++t) {
    const int32_t id = job.token_ids[t];
    if (id < 0 || id >= vocab) {
      // Locate the sequence only on the error path.
      int s = 0;
      while (job.cu_seqlens[s + 1] <= static_cast<int32_t>(t)) ++s;
      return InvalidArgument("token_ids[" + Num(t) + "] (sequence " + Num(s) + ", position " +
                             Num(t - job.cu_seqlens[s]) + "): id " + std::to_string(id) +
                             " is outside the vocabulary [0, " + Num(vocab) + ")");
    }
  }
  return job;
}

void FillResponse(const std::string& request_id, EmbedResult* result, v1::EmbedResponse* resp) {
  resp->set_protocol_version(kProtocolVersion);
  resp->set_request_id(request_id);
  if (result->format.sparse) {  // a sparse model's rows: their non-zero entries only
    wire::PackSparseRows(result->sparse_rows, result->format.dims, resp);
    result->sparse_rows.clear();
  } else {
    resp->set_dtype(wire::DTypeToProto(result->format.dtype));
    resp->add_shape(static_cast<uint32_t>(result->rows));
    resp->add_shape(static_cast<uint32_t>(wire::ElementsPerRow(result->format)));
    resp->set_dimensions(static_cast<uint32_t>(result->format.dims));
    // A swap, not a move: a recycled `resp` hands its old buffer to `result`, whose owner
    // recycles it in turn (the engine loop, wire/recycled.h).
    resp->mutable_data()->swap(result->data);
  }
  for (float s : result->scales) resp->add_scales(s);
  resp->set_queue_us(static_cast<uint64_t>(result->queue_us));
  resp->set_total_us(static_cast<uint64_t>(result->total_us));
}

std::shared_ptr<trace::Span> StartEmbedSpan(std::string_view traceparent, EmbedJob* job) {
  if (!trace::Enabled()) return nullptr;
  std::optional<trace::SpanContext> parent;
  if (!traceparent.empty()) parent = trace::ParseTraceparent(traceparent);
  auto span = std::make_shared<trace::Span>(trace::Span::Start(
      "petal.v1.Embedder/Embed", trace::SpanKind::kServer, parent ? &*parent : nullptr));
  span->SetInt("petal.sequences", job->num_seqs());
  span->SetInt("petal.tokens", static_cast<int64_t>(job->token_ids.size()));
  job->trace = span->context();
  return span;
}

}  // namespace petal::server
