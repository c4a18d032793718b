// The routes that describe the gateway: readiness (/ready), the served models (/v1/models), one
// model's settings (/info, ?model= with several), and the Prometheus page (/metrics, every
// family of a model labelled model="<name>"). Thread-safety: as the gateway's handlers (read-only
// state, internally synchronised replicas and metrics).
#include "common/prometheus_text.h"
#include "gateway/gateway.h"
#include "gateway/json_writer.h"
#include "wire/stats_prometheus.h"

namespace petal::gateway {
namespace {

// A Prometheus label value: backslash, quote and newline escaped.
std::string PrometheusLabelValue(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

}  // namespace

bool Gateway::AllModelsUp() const {
  for (const auto& m : models_) {
    if (!m->replicas->AnyUp()) return false;
  }
  return true;
}

void Gateway::Ready(const HttpRequest&, const ServedModel&, Reply reply) {
  // Ready when every model can answer; with several, a 503 names those that cannot.
  JsonOut down;
  size_t n_down = 0;
  for (const auto& m : models_) {
    if (m->replicas->AnyUp()) continue;
    down.Raw(n_down++ ? "," : "").Str(m->name());
  }
  if (n_down == 0) return reply(MakeResponse(200, "{\"status\":\"ready\"}"));
  if (models_.size() == 1)
    return reply(MakeResponse(503, "{\"status\":\"no replica is serving\"}"));
  reply(
      MakeResponse(503, "{\"status\":\"no replica is serving\",\"models\":[" + down.Take() + "]}"));
}

void Gateway::Models(const HttpRequest&, const ServedModel&, Reply reply) {
  JsonOut o;
  o.Raw("{\"object\":\"list\",\"data\":[");
  for (size_t i = 0; i < models_.size(); ++i) {
    const ServedModel& m = *models_[i];
    o.Raw(i ? ",{\"id\":" : "{\"id\":").Str(m.name());
    o.Raw(",\"object\":\"model\",\"created\":0,\"owned_by\":\"petal\",\"task\":")
        .Str(ModelTaskName(m.config.task))
        .Raw("}");
  }
  o.Raw("]}");
  reply(MakeResponse(200, o.Take()));
}

void Gateway::Info(const HttpRequest&, const ServedModel& m, Reply reply) {
  const ModelConfig& c = m.config;
  JsonOut o;
  o.Raw("{\"model_id\":").Str(m.name());
  o.Raw(",\"model_dir\":").Str(m.dir);
  o.Raw(",\"architecture\":").Str(c.hf_architecture);
  o.Raw(",\"hidden_size\":").Int(c.hidden_size);
  o.Raw(",\"max_input_length\":").Int(c.max_seq_length);
  o.Raw(",\"task\":").Str(ModelTaskName(c.task));
  if (c.task == ModelTask::kClassify) {
    o.Raw(",\"labels\":[");
    for (size_t i = 0; i < c.labels.size(); ++i) o.Raw(i ? "," : "").Str(c.labels[i]);
    o.Raw("],\"class_activation\":").Str(ClassActivationName(c.class_activation));
  }
  if (c.task == ModelTask::kMultiVector) {
    const MultiVectorConfig& mv = c.multivector;
    o.Raw(",\"token_dim\":").Int(c.score_outputs);
    o.Raw(",\"query_length\":").Int(mv.query_length);
    o.Raw(",\"document_length\":").Int(mv.document_length);
    o.Raw(",\"do_query_expansion\":").Raw(mv.do_query_expansion ? "true" : "false");
  }
  o.Raw(",\"pooling\":").Str(PoolingModeName(c.pooling));
  o.Raw(",\"normalize\":").Raw(c.normalize ? "true" : "false");
  o.Raw(",\"max_client_batch_size\":").Int(static_cast<int64_t>(m.max_inputs));
  o.Raw(",\"chunk_max_sequences\":").Int(m.chunk.max_seqs);
  o.Raw(",\"chunk_max_tokens\":").Int(m.chunk.max_tokens);
  o.Raw(",\"prompts\":[");
  bool first = true;
  for (const auto& [name, text] : m.prompts.by_name) {
    if (!first) o.Raw(",");
    first = false;
    o.Str(name);
  }
  o.Raw("],\"output_dtypes\":[\"float32\",\"float16\",\"int8\",\"uint8\",\"binary\",\"ubinary\"]");
  o.Raw(",\"replicas\":[");
  first = true;
  for (const auto& r : m.replicas->Snapshot()) {
    if (!first) o.Raw(",");
    first = false;
    o.Raw("{\"address\":").Str(r.address).Raw(",\"up\":").Raw(r.up ? "true" : "false");
    o.Raw(",\"outstanding_tokens\":").Int(r.outstanding_tokens);
    o.Raw(",\"calls\":").Int(static_cast<int64_t>(r.calls));
    o.Raw(",\"failures\":").Int(static_cast<int64_t>(r.failures)).Raw("}");
  }
  o.Raw("]");
  if (models_.size() > 1) {  // the others are one ?model= away
    o.Raw(",\"models\":[");
    for (size_t i = 0; i < models_.size(); ++i) o.Raw(i ? "," : "").Str(models_[i]->name());
    o.Raw("]");
  }
  o.Raw("}");
  reply(MakeResponse(200, o.Take()));
}

void Gateway::Metrics(const HttpRequest&, const ServedModel&, Reply reply) {
  // One page per model (and one for requests that used none), merged so that each family
  // appears once; a model's samples carry model="<name>".
  std::vector<std::string> pages = {metrics_.Render("", false)};
  for (const auto& m : models_) {
    const std::string label = "model=\"" + PrometheusLabelValue(m->name()) + "\"";
    PrometheusText t(label);
    t.Header("petal_gateway_replica_up", "gauge",
             "1 if the replica answered SERVING at its last check.");
    const auto snapshot = m->replicas->Snapshot();
    for (const auto& r : snapshot) {
      t.Sample("petal_gateway_replica_up", r.up ? 1 : 0, "replica=\"" + r.address + "\"");
    }
    t.Header("petal_gateway_replica_outstanding_tokens", "gauge",
             "Tokens sent and not yet answered.");
    for (const auto& r : snapshot) {
      t.Sample("petal_gateway_replica_outstanding_tokens",
               static_cast<double>(r.outstanding_tokens), "replica=\"" + r.address + "\"");
    }
    const ReplicaSet& rs = *m->replicas;
    t.Scalar("petal_gateway_held_tokens", "gauge",
             "Tokens of accepted requests not yet answered (queued + sent).",
             static_cast<double>(rs.held_tokens()));
    t.Scalar("petal_gateway_queued_tokens", "gauge",
             "Tokens waiting in the gateway for room on a replica.",
             static_cast<double>(rs.queued_tokens()));
    t.Scalar("petal_gateway_max_held_tokens", "gauge",
             "The gateway's bound on held tokens (past it: 429).",
             static_cast<double>(rs.max_held_tokens()));
    t.Scalar("petal_gateway_answer_rate_tokens_per_second", "gauge",
             "Recent tokens answered per second (what a 429's Retry-After is computed from).",
             rs.answer_rate());
    pages.push_back(m->metrics.Render(label, true) + t.Take());
    // Each serving replica's own counters; the Stats RPCs are quick, but they are blocking
    // calls, so this route is for scrapers, not for hot paths.
    for (auto& [address, stats] : m->replicas->Stats()) {
      if (stats.ok()) {
        pages.push_back(wire::StatsToPrometheus(*stats, label + ",server=\"" + address + "\""));
      }
    }
  }
  reply(MakeResponse(200, MergePrometheus(pages), "text/plain; version=0.0.4"));
}

}  // namespace petal::gateway
