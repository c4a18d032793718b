// Gateway set-up, the route table and routing (the request's model: model_select.h), and the
// small static routes (health, /openapi.json, /docs). Readiness, models, info and metrics are in
// info_routes.cc, the embedding routes in embed_routes.cc.
#include "gateway/gateway.h"

#include <algorithm>
#include <cctype>
#include <thread>

#include "common/recycler.h"
#include "gateway/docs_page.h"
#include "gateway/json_writer.h"
#include "gateway/model_select.h"
#include "gateway/openapi_doc.h"
#include "gateway/route_errors.h"
#include "gateway/task_routes.h"
#include "trace/trace.h"

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

// The value of `key` in the target's query string, percent-decoded ("" when absent).
std::string QueryParam(std::string_view target, std::string_view key) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return "";
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const std::string_view pair = rest.substr(0, rest.find('&'));
    rest.remove_prefix(std::min(rest.size(), pair.size() + 1));
    if (!pair.starts_with(key) || pair.size() <= key.size() || pair[key.size()] != '=') continue;
    std::string out;
    const std::string_view v = pair.substr(key.size() + 1);
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '%' && i + 2 < v.size() && std::isxdigit(static_cast<unsigned char>(v[i + 1])) &&
          std::isxdigit(static_cast<unsigned char>(v[i + 2]))) {
        out += static_cast<char>(std::stoi(std::string(v.substr(i + 1, 2)), nullptr, 16));
        i += 2;
      } else {
        out += v[i] == '+' ? ' ' : v[i];
      }
    }
    return out;
  }
  return "";
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
    {"/v1/embeddings", http::verb::post, &Gateway::OpenAiEmbed, T::kIoIfSmall, true,
     kEmbed | kSparse},  // sparse models with "sparse": true (sparse_routes.cc)
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
    {"/tokenize", http::verb::post, &Gateway::Tokenize, T::kWorker, true, kAnyTask, true},
    {"/health", http::verb::get, &Gateway::Health, T::kIo, false},
    {"/ready", http::verb::get, &Gateway::Ready, T::kIo, false},
    {"/v1/models", http::verb::get, &Gateway::Models, T::kIo, true},
    {"/info", http::verb::get, &Gateway::Info, T::kIo, true, kAnyTask, true},
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
  if (o.models.empty()) {
    if (o.servers.empty()) return InvalidArgument("servers: at least one --server is required");
    ModelOptions one;
    one.model_dir = o.model_dir;
    one.model_name = o.model_name;
    one.servers = o.servers;
    o.models.push_back(std::move(one));
  } else if (!o.model_dir.empty() || !o.servers.empty()) {
    return InvalidArgument("give the models either as `models` or as model_dir and servers");
  }
  if (o.max_inputs < 1) return InvalidArgument("max_inputs: must be at least 1");
  const ReplicaSettings shared{o.health_interval, o.request_timeout, o.flow,
                               std::chrono::microseconds(o.reply_poll_us)};
  for (const ModelOptions& mo : o.models) {
    // Its own limits, else the gateway's.
    ReplicaSettings rs = shared;
    rs.flow.max_held_tokens = mo.max_held_tokens.value_or(o.flow.max_held_tokens);
    // Each model holds its own tokens; the memory-sized default is shared out between them.
    if (rs.flow.max_held_tokens <= 0 && o.models.size() > 1) {
      rs.flow.max_held_tokens = DefaultMaxHeldTokens() / static_cast<int64_t>(o.models.size());
    }
    const size_t max_inputs = mo.max_inputs.value_or(o.max_inputs);
    if (max_inputs < 1) {
      return InvalidArgument("max_inputs: model '" + mo.model_dir + "': must be at least 1");
    }
    PETAL_ASSIGN_OR_RETURN(auto m, LoadServedModel(mo, rs));
    m->max_inputs = max_inputs;
    m->chunk.max_seqs = mo.chunk_max_seqs.value_or(o.chunk.max_seqs);
    m->chunk.max_tokens = mo.chunk_max_tokens.value_or(o.chunk.max_tokens);
    for (const auto& other : g->names_) {
      if (other.name == m->name()) {
        return InvalidArgument("two models are named '" + m->name() +
                               "': give each its own --model-name");
      }
    }
    g->names_.push_back(m->names);
    g->models_.push_back(std::move(m));
  }
  o.model_dir = o.models[0].model_dir;
  o.model_name = g->models_[0]->name();
  PETAL_ASSIGN_OR_RETURN(auto hp, SplitHostPort(o.listen));
  const unsigned threads =
      o.worker_threads > 0 ? o.worker_threads : std::max(2u, std::thread::hardware_concurrency());
  g->workers_ = std::make_unique<boost::asio::thread_pool>(threads);
  g->tokenizer_threads_ = threads;
  g->tokenizers_ = std::make_unique<boost::asio::thread_pool>(threads);
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
  // What the answer needs, in one recycled block (no allocation): `done` holds only its address,
  // so it fits inline in the Reply. `metrics` is the model's once Run has picked it (set before
  // the handler runs, read when it answers); requests that use no model count in the gateway's.
  struct Answer {
    Gateway* gateway;
    std::string_view name;
    Clock::time_point start;
    std::shared_ptr<trace::Span> span;
    GatewayMetrics* metrics;
    Reply reply;
  };
  RecycledPtr<Answer> answer =
      MakeRecycled<Answer>(Answer{this, name, start, std::move(span), &metrics_, std::move(reply)});
  GatewayMetrics** metrics = &answer->metrics;  // lives as long as `done` (until it answers)
  Reply done = [a = std::move(answer)](HttpResponse res) {
    a->metrics->Request(a->name, res.result_int(),
                        std::chrono::duration<double>(Clock::now() - a->start).count());
    if (a->span) {
      a->span->SetInt("http.response.status_code", res.result_int());
      if (res.result_int() >= 500) a->span->SetError(std::string(res.reason()));
      a->span->End();
    }
    a->reply(std::move(res));
    // Last: the gateway may be destroyed once nothing is in flight.
    a->gateway->inflight_--;
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
  const bool on_io =
      route->thread == Route::Thread::kIo ||
      (route->thread == Route::Thread::kIoIfSmall && req.body().size() <= kInlineBodyBytes);
  try {
    if (on_io) {
      // Handlers read the request's span as trace::Current() (null pointer: untraced, no-op).
      trace::ScopedContext scope(span_ctx.valid() ? &span_ctx : nullptr);
      return Run(*route, req, metrics, std::move(done));
    }
    PostWork(
        [this, route, req = std::move(req), span_ctx, metrics, done = std::move(done)]() mutable {
          try {
            trace::ScopedContext scope(span_ctx.valid() ? &span_ctx : nullptr);
            Run(*route, req, metrics, std::move(done));
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

void Gateway::Run(const Route& route, const HttpRequest& req, GatewayMetrics** metrics,
                  Reply reply) {
  const bool per_model = route.per_model || route.tasks != kAnyTask;
  if (!per_model) return (this->*(route.handler))(req, *models_[0], std::move(reply));
  // Only with several models is the request's `model` read here: one model serves every
  // request, whatever it names (model_select.h).
  std::string requested;
  if (models_.size() > 1) {
    if (req.method() == http::verb::get) {
      const std::string_view target(req.target().data(), req.target().size());
      requested = QueryParam(target, "model");
    } else {
      requested = PeekModelField(req.body());
    }
  }
  const ModelChoice c = SelectModel(names_, requested, route.path, route.tasks);
  if (c.error) return reply(ErrorResponse(*c.error));
  const ServedModel& m = *models_[c.index];
  *metrics = &m.metrics;
  // A route for another kind of model: 400 naming what this one serves (task_routes.h).
  if (auto err = TaskRefusal(Routes(), route, m.config.task, m.name())) {
    return reply(ErrorResponse(*err));
  }
  (this->*(route.handler))(req, m, std::move(reply));
}

void Gateway::Health(const HttpRequest&, const ServedModel&, Reply reply) {
  reply(MakeResponse(200, "{\"status\":\"ok\"}"));
}

void Gateway::OpenApi(const HttpRequest&, const ServedModel&, Reply reply) {
  HttpResponse res = MakeResponse(200, std::string(OpenApiJson()));
  res.set(http::field::access_control_allow_origin, "*");  // for client generators and editors
  reply(std::move(res));
}

void Gateway::Docs(const HttpRequest& req, const ServedModel&, Reply reply) {
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
