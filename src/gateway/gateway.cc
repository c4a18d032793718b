// Gateway set-up, routing, and the small routes (health, readiness, models, info, metrics). The
// embedding routes are in embed_routes.cc.
#include "gateway/gateway.h"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/file_util.h"
#include "gateway/json_writer.h"
#include "server/prometheus.h"

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

// sentence-transformers' config_sentence_transformers.json: {"prompts": {name: text},
// "default_prompt_name": name}. Absent file: no prompts.
Status LoadPrompts(const std::string& dir, std::map<std::string, std::string>* prompts,
                   std::string* default_name) {
  const std::string path = dir + "/config_sentence_transformers.json";
  if (!FileExists(path)) return Status::Ok();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.load(path).get(doc)) return InvalidArgument(path + ": not valid JSON");
  simdjson::dom::object p;
  if (!doc["prompts"].get_object().get(p)) {
    for (auto [k, v] : p) {
      std::string_view text;
      if (!v.get_string().get(text)) (*prompts)[std::string(k)] = std::string(text);
    }
  }
  std::string_view d;
  if (!doc["default_prompt_name"].get_string().get(d)) *default_name = std::string(d);
  return Status::Ok();
}

const char* RouteName(std::string_view path) {
  static constexpr const char* kRoutes[] = {"/v1/embeddings", "/embed",  "/v1/score",
                                            "/tokenize",      "/health", "/ready",
                                            "/v1/models",     "/info",   "/metrics"};
  for (const char* r : kRoutes) {
    if (path == r) return r;
  }
  return "other";
}

}  // namespace

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
  PETAL_ASSIGN_OR_RETURN(g->config_, LoadModelConfig(o.model_dir));
  PETAL_ASSIGN_OR_RETURN(g->tokenizer_, Tokenizer::FromModelDir(o.model_dir));
  PETAL_RETURN_IF_ERROR(LoadPrompts(o.model_dir, &g->prompts_, &g->default_prompt_));
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
  g->replicas_ = std::make_unique<ReplicaSet>(o.servers, o.health_interval, o.request_timeout);
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

void Gateway::Handle(HttpRequest&& req, Reply reply) {
  const std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  const char* route = RouteName(path);
  const auto start = Clock::now();
  inflight_++;
  Reply done = [this, route, start, reply = std::move(reply)](HttpResponse res) {
    metrics_.Request(route, res.result_int(),
                     std::chrono::duration<double>(Clock::now() - start).count());
    reply(std::move(res));
    inflight_--;  // last: the gateway may be destroyed once nothing is in flight
  };
  if (!options_.api_keys.empty() && path != "/health" && path != "/ready" && path != "/metrics") {
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
  const bool get = req.method() == http::verb::get;
  const bool post = req.method() == http::verb::post;
  auto wrong_method = [&](const char* allowed) {
    done(MakeResponse(405, ErrorJson(std::string(path) + " accepts " + allowed + " only",
                                     "invalid_request_error", "")));
  };
  try {
    if (path == "/v1/embeddings" || path == "/embed" || path == "/v1/score" ||
        path == "/tokenize") {
      if (!post) return wrong_method("POST");
      // Parsing, tokenizing and formatting are CPU work: done on the worker pool so that the
      // I/O threads keep serving other connections (and probes) meanwhile. A small embedding
      // request (one short text, the online-query case) is cheaper to handle here than the
      // thread wake-up a hand-off costs (tens of microseconds, more on virtual machines).
      if ((path == "/v1/embeddings" || path == "/embed") && req.body().size() <= kInlineBodyBytes) {
        return Embed(req, path == "/v1/embeddings", std::move(done));
      }
      boost::asio::post(*workers_, [this, req = std::move(req), p = std::string(path),
                                    done = std::move(done)]() mutable {
        try {
          if (p == "/v1/embeddings") return Embed(req, true, std::move(done));
          if (p == "/embed") return Embed(req, false, std::move(done));
          if (p == "/v1/score") return Score(req, std::move(done));
          return Tokenize(req, std::move(done));
        } catch (const std::exception& e) {
          done(MakeResponse(500, ErrorJson(e.what(), "server_error", "")));
        }
      });
      return;
    }
    if (!get) {
      if (std::string_view(route) != "other") return wrong_method("GET");
      return done(MakeResponse(
          404, ErrorJson("no route " + std::string(path), "invalid_request_error", "")));
    }
    if (path == "/health") return done(MakeResponse(200, "{\"status\":\"ok\"}"));
    if (path == "/ready") {
      const bool up = replicas_->AnyUp();
      return done(MakeResponse(up ? 200 : 503, up ? "{\"status\":\"ready\"}"
                                                  : "{\"status\":\"no replica is serving\"}"));
    }
    if (path == "/v1/models") {
      JsonOut o;
      o.Raw("{\"object\":\"list\",\"data\":[{\"id\":")
          .Str(options_.model_name)
          .Raw(",\"object\":\"model\",\"created\":0,\"owned_by\":\"petal\"}]}");
      return done(MakeResponse(200, o.Take()));
    }
    if (path == "/info") return Info(std::move(done));
    if (path == "/metrics") {
      // Asks every replica for its Stats (blocking RPCs): not on an I/O thread.
      boost::asio::post(*workers_,
                        [this, done = std::move(done)]() mutable { Metrics(std::move(done)); });
      return;
    }
    done(
        MakeResponse(404, ErrorJson("no route " + std::string(path), "invalid_request_error", "")));
  } catch (const std::exception& e) {
    // Nothing below is expected to throw; if it does, answer rather than drop the connection
    // (unless `done` was already handed on).
    if (done) done(MakeResponse(500, ErrorJson(e.what(), "server_error", "")));
  }
}

void Gateway::Info(Reply reply) {
  JsonOut o;
  o.Raw("{\"model_id\":").Str(options_.model_name);
  o.Raw(",\"model_dir\":").Str(options_.model_dir);
  o.Raw(",\"architecture\":").Str(config_.hf_architecture);
  o.Raw(",\"hidden_size\":").Int(config_.hidden_size);
  o.Raw(",\"max_input_length\":").Int(config_.max_seq_length);
  o.Raw(",\"pooling\":").Str(PoolingModeName(config_.pooling));
  o.Raw(",\"normalize\":").Raw(config_.normalize ? "true" : "false");
  o.Raw(",\"max_client_batch_size\":").Int(static_cast<int64_t>(options_.max_inputs));
  o.Raw(",\"chunk_max_sequences\":").Int(options_.chunk.max_seqs);
  o.Raw(",\"chunk_max_tokens\":").Int(options_.chunk.max_tokens);
  o.Raw(",\"prompts\":[");
  bool first = true;
  for (const auto& [name, text] : prompts_) {
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

void Gateway::Metrics(Reply reply) {
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
  // Each serving replica's own counters; the Stats RPCs are quick, but they are blocking calls,
  // so this route is for scrapers, not for hot paths.
  std::vector<std::string> pages;
  for (auto& [address, stats] : replicas_->Stats()) {
    if (stats.ok())
      pages.push_back(server::StatsToPrometheus(*stats, "server=\"" + address + "\""));
  }
  out += MergePrometheus(pages);
  reply(MakeResponse(200, std::move(out), "text/plain; version=0.0.4"));
}

}  // namespace petal::gateway
