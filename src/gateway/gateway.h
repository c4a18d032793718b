// Gateway: the HTTP front of Petal. Owns the served models (served_model.h: each one's tokenizer
// and config, since the gateway tokenizes and servers receive ids, and its ReplicaSet of
// inference servers), the HTTP server and the metrics; picks each request's model
// (model_select.h) and routes the request (OpenAI /v1/embeddings, TEI-style /embed, /predict and
// /tokenize, vLLM-style /classify, /v1/score, health, readiness, info and metrics, the OpenAPI
// document and the /docs page; see docs/api.md).
//
// Thread-safety: handlers run concurrently on the HTTP I/O threads and on gRPC completion
// threads; all shared state is immutable after Start or internally synchronised. Start and the
// destructor are called by the owning thread.
#pragma once

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/function_ref.h"
#include "common/status.h"
#include "gateway/chunker.h"
#include "gateway/http_server.h"
#include "gateway/json_writer.h"
#include "gateway/metrics.h"
#include "gateway/replica_set.h"
#include "gateway/request_parse.h"
#include "gateway/served_model.h"
#include "model/config.h"
#include "trace/trace.h"

namespace petal::gateway {

struct GatewayOptions {
  // The one model (the common case): as ModelOptions' fields (served_model.h).
  std::string model_dir;             // tokenizer.json + config.json (+ sentence-transformers files)
  std::string model_name;            // reported as `model`; default: model_dir's last component
  std::vector<std::string> servers;  // inference servers, host:port
  // Several models, in order (the first that serves a route answers requests naming no model:
  // model_select.h); when set, model_dir and servers must be empty. Each model gets its own
  // replicas with `flow`; a default (0) max_held_tokens is the memory-sized bound split evenly.
  // max_inputs, chunk and flow.max_held_tokens below are every model's, except where a model's
  // ModelOptions sets its own.
  std::vector<ModelOptions> models;
  std::string listen = "127.0.0.1:8080";
  int http_threads = 2;
  int worker_threads = 0;  // parsing, tokenization, formatting; 0 = hardware threads (at least 2)
  ChunkLimits chunk;
  FlowOptions flow;  // how many tokens the gateway holds and sends per replica (replica_set.h)
  // >= 0: replies are collected by a polling thread that spins while calls are out and this many
  // microseconds after the last (saves a thread wake-up per call; costs a core while busy);
  // < 0 (the default): gRPC's callback threads. Measured no faster on the H200 (performance.md).
  int reply_poll_us = -1;
  size_t max_inputs = 2048;       // inputs per request (at least 1; /v1/score: query included)
  size_t body_limit = 32u << 20;  // request body bytes; beyond: 413
  std::chrono::milliseconds health_interval{1000};
  // Each request's deadline: queued in the gateway plus on the servers (past it: 429 if still
  // queued in the gateway, 504 if on a server).
  std::chrono::milliseconds request_timeout{60000};
  // If not empty, every route but /health, /ready and /metrics needs
  // `Authorization: Bearer <one of these>` (else 401).
  std::vector<std::string> api_keys;
};

class Gateway;
struct SpanPlan;  // span_plan.h

// The total size of `texts` in bytes: the work estimate Gateway::RunSliced slices by.
template <typename Texts>  // std::string or std::string_view items
size_t TextBytes(const Texts& texts) {
  size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();
  return bytes;
}

// Which models a route serves, as a set of ModelTask bits; kAnyTask (0): every model (health,
// docs, tokenize, ...). A route asked of a model whose task it does not serve is answered 400
// naming the routes that do (task_routes.h), before its handler runs.
constexpr unsigned TaskBit(ModelTask t) { return 1u << static_cast<unsigned>(t); }
inline constexpr unsigned kAnyTask = 0;

// One row of the gateway's route table (Gateway::kRouteTable in gateway.cc): every route is
// declared there and nowhere else. Handlers all take the request and the reply; the table says
// where they may run.
struct Route {
  enum class Thread {
    kIo,         // cheap and non-blocking: run on the HTTP I/O thread
    kIoIfSmall,  // on the I/O thread when the body is at most kInlineBodyBytes, else a worker
    kWorker,     // CPU work or blocking calls: always handed to the worker pool
  };
  std::string_view path;  // exact match on the target's path (query string ignored)
  boost::beast::http::verb method;
  // `model`: the request's model (model_select.h); routes that use none get the first.
  void (Gateway::*handler)(const HttpRequest& req, const ServedModel& model, Reply reply);
  Thread thread;
  bool needs_auth;            // needs `Authorization: Bearer <key>` when the gateway has API keys
  unsigned tasks = kAnyTask;  // the models it serves (TaskBit of each task), or kAnyTask
  // kAnyTask routes that still use one model (/tokenize: its tokenizer; /info): the request picks
  // it, as task routes' requests do, and its metrics carry that model's label. Task routes always
  // do.
  bool per_model = false;
};

class Gateway {
 public:
  // Request bodies up to this size may be handled on the I/O thread (Route::Thread::kIoIfSmall).
  static constexpr size_t kInlineBodyBytes = 8 * 1024;
  // The route table; FindRoute returns its row for `path`, or null.
  static std::span<const Route> Routes();
  static const Route* FindRoute(std::string_view path);

  // Loads the tokenizer and config, checks the replicas once and starts listening. The gateway
  // starts even if no replica is serving yet (/ready says 503 until one is).
  static StatusOr<std::unique_ptr<Gateway>> Start(GatewayOptions options);
  // Stops accepting, waits for requests in flight (bounded by the request timeout), stops.
  ~Gateway();

  uint16_t port() const { return http_->port(); }
  // The first (or only) model's config and replicas.
  const ModelConfig& config() const { return models_[0]->config; }
  const ReplicaSet& replicas() const { return *models_[0]->replicas; }
  // Every served model, in order.
  const std::vector<std::unique_ptr<ServedModel>>& models() const { return models_; }
  // True when every model has a replica serving.
  bool AllModelsUp() const;

 private:
  explicit Gateway(GatewayOptions options) : options_(std::move(options)) {}
  using Clock = std::chrono::steady_clock;

  using M = const ServedModel&;
  void Handle(HttpRequest&& req, Reply reply);
  // Picks the request's model (an error answers it), refuses a route the model cannot serve
  // and runs the handler; on the thread the route runs on (the body is read to find `model`).
  void Run(const Route& route, const HttpRequest& req, GatewayMetrics** metrics, Reply reply);
  // Route handlers (rows of the table in gateway.cc).
  void OpenAiEmbed(const HttpRequest& req, M m, Reply reply) {
    Embed(req, m, true, std::move(reply));
  }
  void TeiEmbed(const HttpRequest& req, M m, Reply reply) {
    Embed(req, m, false, std::move(reply));
  }
  void Score(const HttpRequest& req, M m, Reply reply);
  void Tokenize(const HttpRequest& req, M m, Reply reply);
  void Health(const HttpRequest& req, M m, Reply reply);
  void Ready(const HttpRequest& req, M m, Reply reply);
  void Models(const HttpRequest& req, M m, Reply reply);
  void Info(const HttpRequest& req, M m, Reply reply);
  void Metrics(const HttpRequest& req, M m, Reply reply);
  void OpenApi(const HttpRequest& req, M m, Reply reply);
  void Docs(const HttpRequest& req, M m, Reply reply);  // /docs and its files
  void Embed(const HttpRequest& req, M m, bool openai, Reply reply);
  // Pooling-span routes (contextual_routes.cc): late chunking, and /v1/embeddings' long_input.
  void ContextualEmbed(const HttpRequest& req, M m, Reply reply);
  void EmbedLongInputs(std::shared_ptr<EmbedParams> p, M m, Reply reply);
  // Tokenizes the documents' chunks and plans their windows; an error names the field.
  std::optional<RequestError> PlanDocuments(const ContextualParams& p, M m, SpanPlan* plan);
  // Sends the plan's windows with their spans and gives `done` the combined raw rows
  // ([plan->outputs, hidden_size], not normalised), on a worker thread; or the first error.
  void RunSpanPlan(std::shared_ptr<SpanPlan> plan, M m, v1::SpanPooling pooling,
                   const trace::SpanContext& tc,
                   UniqueFunction<void(StatusOr<std::vector<float>>)> done);
  // Ranking routes (rerank_routes.cc).
  void TeiRerank(const HttpRequest& req, M m, Reply reply);
  void CohereRerank(const HttpRequest& req, M m, Reply reply);
  enum class RerankShape { kTei, kCohere, kScore };
  void RunRerank(std::shared_ptr<RerankParams> p, M m, RerankShape shape, const char* field,
                 Reply reply);
  // TEI's /embed_sparse on a sparse (SPLADE) model, and /v1/embeddings with "sparse": true
  // (sparse_routes.cc): checks the options that do not apply, then embeds and answers the
  // non-zero entries in the route's shape.
  void TeiEmbedSparse(const HttpRequest& req, M m, Reply reply);
  void EmbedSparse(std::shared_ptr<EmbedParams> p, M m, bool openai, Reply reply);
  // "query" texts of a Router model with a static query module (sparse_static.h), in the gateway.
  void EmbedSparseStatic(EmbedParams* p, M m, bool openai, Reply reply);
  HttpResponse SparseRowsResponse(const std::vector<wire::SparseRow>& rows, bool openai,
                                  const std::string& model, int64_t tokens) const;
  // Multi-vector (ColBERT) models (multivector_routes.cc): TEI's /embed_all, and /v1/score by
  // MaxSim; texts shaped as PyLate does, queries or documents; errors name `field`[i].
  void TeiEmbedAll(const HttpRequest& req, M m, Reply reply);
  void MaxSimScore(ScoreParams sp, M m, Reply reply);
  std::optional<RequestError> ToTokenSequences(EmbedParams* p, M m, const char* field,
                                               bool is_query,
                                               std::vector<std::vector<int32_t>>* seqs);
  // Classification routes (classify_routes.cc): TEI's /predict and vLLM's /classify.
  void TeiPredict(const HttpRequest& req, M m, Reply reply);
  void VllmClassify(const HttpRequest& req, M m, Reply reply);
  enum class ClassifyShape { kTei, kVllm };
  void RunClassify(std::shared_ptr<ClassifyParams> p, M m, ClassifyShape shape, const char* field,
                   Reply reply);
  // Each input's ids (and, when it has pairs, token types); errors name `field`[i].
  std::optional<RequestError> ToClassifyInputs(const ClassifyParams& p, M m, const char* field,
                                               std::vector<std::vector<int32_t>>* seqs,
                                               std::vector<std::vector<int32_t>>* types);
  // The query paired with every document (ids and token types); errors name `field`[i].
  std::optional<RequestError> ToPairs(const RerankParams& p, M m, const char* field,
                                      std::vector<std::vector<int32_t>>* seqs,
                                      std::vector<std::vector<int32_t>>* types);
  static const Route kRouteTable[];  // gateway.cc
  // Turns texts (or ids) into checked token sequences; an error is the HTTP answer to send.
  std::optional<RequestError> ToSequences(EmbedParams* p, M m, const char* field,
                                          std::vector<std::vector<int32_t>>* seqs);
  // Options for the servers from the request; an error names the field.
  // Runs run(begin, end) over [0, n): in slices on the tokenizer pool when the work is large
  // (this thread waits; the slices never do, so the pools cannot deadlock), else inline. The
  // work's size is `bytes` of input when given (one slice per kBytesPerSlice), else n items (one
  // per kTextsPerSlice). Returns the first error in input order.
  using SliceFn = FunctionRef<std::optional<RequestError>(size_t, size_t)>;
  std::optional<RequestError> RunSliced(size_t n, SliceFn run, size_t bytes = 0) const;
  size_t Slices(size_t n, size_t bytes) const;  // how many slices RunSliced makes
  // Appends items 0..n-1 to `out`, comma-separated, each written by write(i, out); in slices on
  // the tokenizer pool (RunSliced) when the answer is about `bytes` or more of JSON.
  using ItemFn = FunctionRef<void(size_t, JsonOut*)>;
  void FormatSliced(size_t n, size_t bytes, ItemFn write, JsonOut* out) const;
  std::optional<RequestError> ServerOptions(const EmbedParams& p, M m, v1::EmbedOptions* o) const;
  std::string NextRequestId();
  // Posts fn to the worker pool. Holds an in-flight count across post(): a fast worker may
  // answer (and end) the request before post() returns on this thread, and the destructor must
  // not destroy the pool while a thread is still inside post().
  template <typename Fn>
  void PostWork(Fn&& fn) {
    inflight_++;
    boost::asio::post(*workers_, std::forward<Fn>(fn));
    inflight_--;
  }

  GatewayOptions options_;
  std::vector<std::unique_ptr<ServedModel>> models_;  // at least one, in the order given
  std::vector<ModelNames> names_;                     // models_[i]->names, for SelectModel
  std::unique_ptr<boost::asio::thread_pool> workers_;
  // Slices of large requests' tokenization; its tasks never block.
  std::unique_ptr<boost::asio::thread_pool> tokenizers_;
  size_t tokenizer_threads_ = 1;
  static constexpr size_t kTextsPerSlice = 32;  // fewer texts per slice cost more than they save
  static constexpr size_t kBytesPerSlice = 8 * 1024;  // ~2,000 tokens: ~0.1 ms of work
  // Results of up to this many rows are formatted on the gRPC completion thread (no hand-off).
  static constexpr size_t kInlineFormatRows = 4;
  GatewayMetrics metrics_;  // requests that use no model (health, docs, unknown names, ...)
  std::atomic<int64_t> inflight_{0};
  std::atomic<uint64_t> next_id_{0};
  std::unique_ptr<HttpServer> http_;  // last: destroyed (stopped) first
};

// A server's Status as the HTTP status to answer with (429 queue full, 503 unavailable, ...).
unsigned HttpStatusFor(const Status& s);

}  // namespace petal::gateway
