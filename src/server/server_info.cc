// See server_info.h.
#include "server/server_info.h"

#include "server/request.h"

namespace petal::server {
namespace {

void FillHistogram(const Histogram& h, v1::Histogram* out) {
  const auto s = h.Read();
  for (double b : s.bounds) out->add_bounds(b);
  for (uint64_t c : s.cumulative) out->add_counts(c);
  out->set_sum(s.sum);
  out->set_count(s.count);
}

}  // namespace

void FillModelInfo(const Engine& engine, const EngineLoopOptions& loop,
                   v1::ModelInfoResponse* resp) {
  const ModelConfig& c = engine.config();
  resp->set_protocol_version(kProtocolVersion);
  resp->set_min_protocol_version(kMinProtocolVersion);
  resp->set_model_dir(c.model_dir);
  resp->set_architecture(ArchitectureName(c.architecture));
  resp->set_hf_architecture(c.hf_architecture);
  resp->set_hidden_size(c.hidden_size);
  resp->set_max_tokens(MaxSequenceTokens(c));
  resp->set_max_seq_length(c.max_seq_length);
  resp->set_vocab_size(c.vocab_size);
  resp->set_pooling(PoolingModeName(c.pooling));
  resp->set_normalize(c.normalize);
  resp->set_int8_mode(Int8ModeName(c.int8_mode));
  resp->set_backend(engine.backend());
  resp->set_max_batch_tokens(loop.limits.max_batch_tokens);
  resp->set_max_batch_seqs(loop.limits.max_batch_seqs);
  resp->set_max_queue_tokens(loop.max_queue_tokens);
  resp->set_max_queue_requests(loop.max_queue_requests);
  resp->set_task(ModelTaskName(c.task));
  if (c.task == ModelTask::kMultiVector) {
    resp->set_score_outputs(static_cast<uint32_t>(c.score_outputs));
    for (auto t : {v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT16, v1::DTYPE_INT8, v1::DTYPE_BINARY,
                   v1::DTYPE_UBINARY}) {
      resp->add_dtypes(t);
    }
  } else if (c.task == ModelTask::kSparse) {
    resp->set_score_outputs(static_cast<uint32_t>(c.score_outputs));
    resp->set_score_head(ScoreHeadName(c.score_head));
    resp->add_dtypes(v1::DTYPE_FLOAT32);
  } else if (c.task == ModelTask::kClassify) {
    resp->set_score_outputs(static_cast<uint32_t>(c.score_outputs));
    resp->set_score_head(ScoreHeadName(c.score_head));
    resp->set_class_activation(ClassActivationName(c.class_activation));
    for (const auto& l : c.labels) resp->add_labels(l);
    resp->add_dtypes(v1::DTYPE_FLOAT32);
  } else if (c.task == ModelTask::kScore) {
    resp->set_score_outputs(static_cast<uint32_t>(c.score_outputs));
    resp->set_score_activation(c.score_activation == ScoreActivation::kIdentity ? "identity"
                                                                                : "sigmoid");
    resp->set_score_head(ScoreHeadName(c.score_head));
    resp->add_dtypes(v1::DTYPE_FLOAT32);
  } else {
    for (auto t : {v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT16, v1::DTYPE_INT8, v1::DTYPE_BINARY,
                   v1::DTYPE_UBINARY, v1::DTYPE_INT8_TANH}) {
      resp->add_dtypes(t);
    }
  }
}

void FillStats(const ServerMetrics& m, Clock::time_point started, const EngineLoop* loop,
               v1::StatsResponse* resp) {
  resp->set_protocol_version(kProtocolVersion);
  resp->set_uptime_us(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count());
  resp->set_requests(m.requests.load());
  resp->set_requests_ok(m.requests_ok.load());
  resp->set_requests_rejected(m.requests_rejected.load());
  resp->set_requests_invalid(m.requests_invalid.load());
  resp->set_requests_cancelled(m.requests_cancelled.load());
  resp->set_requests_expired(m.requests_expired.load());
  resp->set_requests_failed(m.requests_failed.load());
  resp->set_sequences(m.sequences.load());
  resp->set_tokens(m.tokens.load());
  resp->set_batches(m.batches.load());
  resp->set_sequences_dropped(m.sequences_dropped.load());
  if (loop != nullptr) {
    const QueueGauges g = loop->Gauges();
    resp->set_queue_requests(g.queue_requests);
    resp->set_queue_tokens(g.queue_tokens);
    resp->set_pending_sequences(g.pending_sequences);
    resp->set_inflight_batches(g.inflight_batches);
    for (const auto& [k, v] : loop->EngineStats()) (*resp->mutable_engine())[k] = v;
  }
  FillHistogram(m.request_latency_s, resp->mutable_request_latency_s());
  FillHistogram(m.queue_wait_s, resp->mutable_queue_wait_s());
  FillHistogram(m.step_latency_s, resp->mutable_step_latency_s());
  FillHistogram(m.batch_tokens, resp->mutable_batch_tokens());
  FillHistogram(m.batch_sequences, resp->mutable_batch_sequences());
}

}  // namespace petal::server
