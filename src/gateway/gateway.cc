// Gateway set-up, the route table and routing, and the small routes (health, readiness, models,
// info, metrics, /openapi.json, /docs). The embedding routes are in embed_routes.cc.
#include "gateway/gateway.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/prometheus_text.h"
#include "gateway/docs_page.h"
#include "gateway/json_writer.h"
#include "gateway/openapi_doc.h"
#include "gateway/route_errors.h"
#include "gateway/task_routes.h"
#include "trace/trace.h"
#include "wire/stats_prometheus.h"

namespace petal::gateway {
namespace {

namespace http = boost::beast::http;

StatusOr<std::pair<std::string, uint16_t>> SplitHostPort(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("listen: expected host:port");
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    return InvalidArgument("listen: bad port in '" + listen + "'");
  }
  if (port < 0 || port > 65535) return InvalidArgument("listen: bad port in '" + listen + "'");
  return std::make_pair(host, static_cast<uint16_t>(port));
}

}  // namespace

using T = Route::Thread;

// Parsing, tokenizing and formatting are CPU work, done on the worker pool so that the I/O
// threads keep serving other connections (and probes) meanwhile; a small embedding request (one
// short text, the online-query case) is cheaper to handle on the I/O thread than the thread
// wake-up a hand-off costs (tens of microseconds, more on virtual machines). /metrics asks every
// replica for its Stats (blocking RPCs): never on an I/O thread.
// The last column says which models a route serves (kAnyTask when absent): the one table the
// task refusals and the start-up hint read (task_routes.h).
constexpr unsigned kEmbed = TaskBit(ModelTask::kEmbed);
constexpr unsigned kScore = TaskBit(ModelTask::kScore);
constexpr unsigned kClassify = TaskBit(ModelTask::kClassify);
constexpr unsigned kSparse = TaskBit(ModelTask::kSparse);
constexpr unsigned kMultiVector = TaskBit(ModelTask::kMultiVector);
const Route Gateway::kRouteTable[] = {
    {"/v1/embeddings", http::verb::post, &Gateway::OpenAiEmbed, T::kIoIfSmall, true, kEmbed},
    {"/embed", http::verb::post, &Gateway::TeiEmbed, T::kIoIfSmall, true, kEmbed},
    {"/v1/contextualizedembeddings", http::verb::post, &Gateway::ContextualEmbed, T::kWorker, true,
     kEmbed},
    {"/v1/score", http::verb::post, &Gateway::Score, T::kWorker, true,
     kEmbed | kScore | kMultiVector},
    {"/rerank", http::verb::post, &Gateway::TeiRerank, T::kWorker, true, kScore},
    {"/v1/rerank", http::verb::post, &Gateway::CohereRerank, T::kWorker, true, kScore},
    {"/embed_sparse", http::verb::post, &Gateway::TeiEmbedSparse, T::kWorker, true, kSparse},
    {"/embed_all", http::verb::post, &Gateway::TeiEmbedAll, T::kWorker, true, kMultiVector},
    {"/predict", http::verb::post, &Gateway::TeiPredict, T::kIoIfSmall, true, kClassify},
    {"/classify", http::verb::post, &Gateway::VllmClassify, T::kIoIfSmall, true, kClassify},
    {"/tokenize", http::verb::post, &Gateway::Tokenize, T::kWorker, true},
    {"/health", http::verb::get, &Gateway::Health, T::kIo, false},
    {"/ready", http::verb::get, &Gateway::Ready, T::kIo, false},
    {"/v1/models", http::verb::get, &Gateway::Models, T::kIo, true},
    {"/info", http::verb::get, &Gateway::Info, T::kIo, true},
    {"/metrics", http::verb::get, &Gateway::Metrics, T::kWorker, false},
    // The API's description and the page that shows it: public like /health, so that a browser
    // can load them; the page's calls carry the key the user enters (Authorize).
    {"/openapi.json", http::verb::get, &Gateway::OpenApi, T::kIo, false},
    {"/docs", http::verb::get, &Gateway::Docs, T::kIo, false},
    {"/docs/swagger-ui.css", http::verb::get, &Gateway::Docs, T::kIo, false},
    {"/docs/swagger-ui-bundle.js", http::verb::get, &Gateway::Docs, T::kIo, false},
    {"/docs/petal-docs.js", http::verb::get, &Gateway::Docs, T::kIo, false},
};

unsigned HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kCancelled:  // the server dropped the call: it is shutting down
      return 503;
    default:
      return 500;
  }
}

StatusOr<std::unique_ptr<Gateway>> Gateway::Start(GatewayOptions options) {
  std::unique_ptr<Gateway> g(new Gateway(std::move(options)));
  GatewayOptions& o = g->options_;
  if (o.servers.empty()) return InvalidArgument("servers: at least one --server is required");
  if (o.max_inputs < 1) return InvalidArgument("max_inputs: must be at least 1");
  PETAL_ASSIGN_OR_RETURN(g->config_, LoadModelConfig(o.model_dir));
  PETAL_ASSIGN_OR_RETURN(g->tokenizer_, Tokenizer::FromModelDir(o.model_dir));
  PETAL_ASSIGN_OR_RETURN(g->prompts_, Prompts::Load(o.model_dir));
  if (o.model_name.empty()) {
    std::filesystem::path p(o.model_dir);
    while (p.has_parent_path() && p.filename().empty()) p = p.parent_path();
    o.model_name = p.filename().string();
  }
  PETAL_ASSIGN_OR_RETURN(auto hp, SplitHostPort(o.listen));
  const unsigned threads =
      o.worker_threads > 0 ? o.worker_threads : std::max(2u, std::thread::hardware_concurrency());
  g->workers_ = std::make_unique<boost::asio::thread_pool>(threads);
  g->tokenizer_threads_ = threads;
  g->tokenizers_ = std::make_unique<boost::asio::thread_pool>(threads);
  g->replicas_ = std::make_unique<ReplicaSet>(o.servers, o.health_interval, o.request_timeout,
                                              o.flow, std::chrono::microseconds(o.reply_poll_us));
  HttpServerOptions ho;
  ho.host = hp.first;
  ho.port = hp.second;
  ho.threads = o.http_threads;
  ho.body_limit = o.body_limit;
  Gateway* self = g.get();
  PETAL_ASSIGN_OR_RETURN(g->http_, HttpServer::Start(ho, [self](HttpRequest&& req, Reply reply) {
                           self->Handle(std::move(req), std::move(reply));
                         }));
  return g;
}

Gateway::~Gateway() {
  // Every request in flight ends by its chunks' deadlines, so this wait is bounded; the HTTP
  // server and the replicas must outlive the completions that reference them.
  if (http_) http_->StopAccepting();
  const auto end = Clock::now() + options_.request_timeout + std::chrono::seconds(5);
  while (inflight_.load() > 0 && Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (http_) http_->Stop();
  if (workers_) workers_->join();
  if (tokenizers_) tokenizers_->join();
}

std::string Gateway::NextRequestId() { return "gw-" + std::to_string(next_id_++); }

std::span<const Route> Gateway::Routes() { return kRouteTable; }

const Route* Gateway::FindRoute(std::string_view path) {
  for (const Route& r : kRouteTable) {
    if (r.path == path) return &r;
  }
  return nullptr;
}

void Gateway::Handle(HttpRequest&& req, Reply reply) {
  const std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  const Route* route = FindRoute(path);
  const std::string_view name = route ? route->path : "other";  // the metrics label
  const auto start = Clock::now();
  inflight_++;
  // Tracing (off unless --otlp-endpoint): the request's server span, child of the caller's
  // `traceparent` when it sent one. Off, `span` stays null and nothing below allocates.
  std::shared_ptr<trace::Span> span;
  trace::SpanContext span_ctx;
  if (trace::Enabled()) {
    const auto tp = req["traceparent"];
    const auto parent = trace::ParseTraceparent(std::string_view(tp.data(), tp.size()));
    span = std::make_shared<trace::Span>(
        trace::Span::Start(std::string(http::to_string(req.method())) + " " + std::string(name),
                           trace::SpanKind::kServer, parent ? &*parent : nullptr));
    span->SetString("http.route", name);
    span_ctx = span->context();
  }
  Reply done = [this, name, start, span, reply = std::move(reply)](HttpResponse res) {
    metrics_.Request(name, res.result_int(),
                     std::chrono::duration<double>(Clock::now() - start).count());
    if (span) {
      span->SetInt("http.response.status_code", res.result_int());
      if (res.result_int() >= 500) span->SetError(std::string(res.reason()));
      span->End();
    }
    reply(std::move(res));
    inflight_--;  // last: the gateway may be destroyed once nothing is in flight
  };
  // Unknown paths need a key too, so that without one the gateway reveals no routes.
  if (!options_.api_keys.empty() && (!route || route->needs_auth)) {
    const auto auth = req[http::field::authorization];
    const std::string_view a(auth.data(), auth.size());
    const bool ok = a.starts_with("Bearer ") &&
                    std::find(options_.api_keys.begin(), options_.api_keys.end(), a.substr(7)) !=
                        options_.api_keys.end();
    if (!ok) {
      HttpResponse res =
          MakeResponse(401, ErrorJson("missing or invalid API key (Authorization: Bearer <key>)",
                                      "authentication_error", ""));
      res.set(http::field::www_authenticate, "Bearer");
      return done(std::move(res));
    }
  }
  if (!route) {
    return done(
        MakeResponse(404, ErrorJson("no route " + std::string(path), "invalid_request_error", "")));
  }
  if (req.method() != route->method) {
    return done(
        MakeResponse(405, ErrorJson(std::string(path) + " accepts " +
                                        std::string(http::to_string(route->method)) + " only",
                                    "invalid_request_error", "")));
  }
  // A route for another kind of model: 400 naming what this one serves (task_routes.h).
  if (auto err = TaskRefusal(Routes(), *route, config_.task, options_.model_name)) {
    return done(ErrorResponse(*err));
  }
  const bool on_io =
      route->thread == Route::Thread::kIo ||
      (route->thread == Route::Thread::kIoIfSmall && req.body().size() <= kInlineBodyBytes);
  try {
    if (on_io) {
      // Handlers read the request's span as trace::Current() (null pointer: untraced, no-op).
      trace::ScopedContext scope(span ? &span_ctx : nullptr);
      return (this->*(route->handler))(req, std::move(done));
    }
    PostWork([this, handler = route->handler, req = std::move(req), span_ctx,
              done = std::move(done)]() mutable {
      try {
        trace::ScopedContext scope(span_ctx.valid() ? &span_ctx : nullptr);
        (this->*handler)(req, std::move(done));
      } catch (const std::exception& e) {
        if (done) done(MakeResponse(500, ErrorJson(e.what(), "server_error", "")));
      }
    });
  } catch (const std::exception& e) {
    // Nothing above is expected to throw; if it does, answer rather than drop the connection
    // (unless `done` was already handed on).
    if (done) done(MakeResponse(500, ErrorJson(e.what(), "server_error", "")));
  }
}

void Gateway::Health(const HttpRequest&, Reply reply) {
  reply(MakeResponse(200, "{\"status\":\"ok\"}"));
}

void Gateway::Ready(const HttpRequest&, Reply reply) {
  const bool up = replicas_->AnyUp();
  reply(MakeResponse(up ? 200 : 503,
                     up ? "{\"status\":\"ready\"}" : "{\"status\":\"no replica is serving\"}"));
}

void Gateway::Models(const HttpRequest&, Reply reply) {
  JsonOut o;
  o.Raw("{\"object\":\"list\",\"data\":[{\"id\":")
      .Str(options_.model_name)
      .Raw(",\"object\":\"model\",\"created\":0,\"owned_by\":\"petal\"}]}");
  reply(MakeResponse(200, o.Take()));
}

void Gateway::Info(const HttpRequest&, Reply reply) {
  JsonOut o;
  o.Raw("{\"model_id\":").Str(options_.model_name);
  o.Raw(",\"model_dir\":").Str(options_.model_dir);
  o.Raw(",\"architecture\":").Str(config_.hf_architecture);
  o.Raw(",\"hidden_size\":").Int(config_.hidden_size);
  o.Raw(",\"max_input_length\":").Int(config_.max_seq_length);
  o.Raw(",\"task\":").Str(ModelTaskName(config_.task));
  if (config_.task == ModelTask::kClassify) {
    o.Raw(",\"labels\":[");
    for (size_t i = 0; i < config_.labels.size(); ++i) o.Raw(i ? "," : "").Str(config_.labels[i]);
    o.Raw("],\"class_activation\":").Str(ClassActivationName(config_.class_activation));
  }
  if (config_.task == ModelTask::kMultiVector) {
    const MultiVectorConfig& mv = config_.multivector;
    o.Raw(",\"token_dim\":").Int(config_.score_outputs);
    o.Raw(",\"query_length\":").Int(mv.query_length);
    o.Raw(",\"document_length\":").Int(mv.document_length);
    o.Raw(",\"do_query_expansion\":").Raw(mv.do_query_expansion ? "true" : "false");
  }
  o.Raw(",\"pooling\":").Str(PoolingModeName(config_.pooling));
  o.Raw(",\"normalize\":").Raw(config_.normalize ? "true" : "false");
  o.Raw(",\"max_client_batch_size\":").Int(static_cast<int64_t>(options_.max_inputs));
  o.Raw(",\"chunk_max_sequences\":").Int(options_.chunk.max_seqs);
  o.Raw(",\"chunk_max_tokens\":").Int(options_.chunk.max_tokens);
  o.Raw(",\"prompts\":[");
  bool first = true;
  for (const auto& [name, text] : prompts_.by_name) {
    if (!first) o.Raw(",");
    first = false;
    o.Str(name);
  }
  o.Raw("],\"output_dtypes\":[\"float32\",\"float16\",\"int8\",\"uint8\",\"binary\",\"ubinary\"]");
  o.Raw(",\"replicas\":[");
  first = true;
  for (const auto& r : replicas_->Snapshot()) {
    if (!first) o.Raw(",");
    first = false;
    o.Raw("{\"address\":").Str(r.address).Raw(",\"up\":").Raw(r.up ? "true" : "false");
    o.Raw(",\"outstanding_tokens\":").Int(r.outstanding_tokens);
    o.Raw(",\"calls\":").Int(static_cast<int64_t>(r.calls));
    o.Raw(",\"failures\":").Int(static_cast<int64_t>(r.failures)).Raw("}");
  }
  o.Raw("]}");
  reply(MakeResponse(200, o.Take()));
}

void Gateway::Metrics(const HttpRequest&, Reply reply) {
  std::string out = metrics_.Render();
  out += "# HELP petal_gateway_replica_up 1 if the replica answered SERVING at its last check.\n";
  out += "# TYPE petal_gateway_replica_up gauge\n";
  std::string outstanding =
      "# HELP petal_gateway_replica_outstanding_tokens Tokens sent and not yet answered.\n"
      "# TYPE petal_gateway_replica_outstanding_tokens gauge\n";
  for (const auto& r : replicas_->Snapshot()) {
    out += "petal_gateway_replica_up{replica=\"" + r.address + "\"} " + (r.up ? "1" : "0") + "\n";
    outstanding += "petal_gateway_replica_outstanding_tokens{replica=\"" + r.address + "\"} " +
                   std::to_string(r.outstanding_tokens) + "\n";
  }
  out += outstanding;
  const auto gauge = [&out](const char* name, const char* help, const std::string& value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name +
           " " + value + "\n";
  };
  gauge("petal_gateway_held_tokens",
        "Tokens of accepted requests not yet answered (queued + sent).",
        std::to_string(replicas_->held_tokens()));
  gauge("petal_gateway_queued_tokens", "Tokens waiting in the gateway for room on a replica.",
        std::to_string(replicas_->queued_tokens()));
  gauge("petal_gateway_max_held_tokens", "The gateway's bound on held tokens (past it: 429).",
        std::to_string(replicas_->max_held_tokens()));
  gauge("petal_gateway_answer_rate_tokens_per_second",
        "Recent tokens answered per second (what a 429's Retry-After is computed from).",
        std::to_string(replicas_->answer_rate()));
  // Each serving replica's own counters; the Stats RPCs are quick, but they are blocking calls,
  // so this route is for scrapers, not for hot paths.
  std::vector<std::string> pages;
  for (auto& [address, stats] : replicas_->Stats()) {
    if (stats.ok()) pages.push_back(wire::StatsToPrometheus(*stats, "server=\"" + address + "\""));
  }
  out += MergePrometheus(pages);
  reply(MakeResponse(200, std::move(out), "text/plain; version=0.0.4"));
}

void Gateway::OpenApi(const HttpRequest&, Reply reply) {
  HttpResponse res = MakeResponse(200, std::string(OpenApiJson()));
  res.set(http::field::access_control_allow_origin, "*");  // for client generators and editors
  reply(std::move(res));
}

void Gateway::Docs(const HttpRequest& req, Reply reply) {
  const std::string_view target(req.target().data(), req.target().size());
  const DocsFile f = FindDocsFile(target.substr(0, target.find('?')));
  HttpResponse res =
      f.body.empty()
          ? MakeResponse(503,
                         "this petal binary was built without the Swagger UI files (see "
                         "docs/dependencies.md: swagger-ui-bundle-v2); /openapi.json is served\n",
                         "text/plain; charset=utf-8")
          : MakeResponse(200, std::string(f.body), f.content_type);
  res.set("Content-Security-Policy", std::string(kDocsCsp));
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  res.set(http::field::cache_control, "no-cache");
  reply(std::move(res));
}

}  // namespace petal::gateway
