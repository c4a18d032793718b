// `petal server`: the gRPC inference server; `petal client`: a small command-line client for it
// (embed pre-tokenized ids, model info, stats, health; `client bench` is `petal bench grpc`).
#include <signal.h>

#include <simdjson.h>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/bench_flags.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/local_replicas.h"
#include "cli/model_arg.h"
#include "cli/trace_flags.h"
#include "common/log.h"
#include "common/malloc_policy.h"
#include "server/fake_engine.h"
#include "server/server.h"
#include "wire/client.h"
#include "wire/stats_prometheus.h"

namespace petal::cli {
namespace {

struct ServerArgs {
  std::string model;
  std::string listen = "0.0.0.0:50051";
  EngineOptions engine;
  int64_t max_queue_tokens = int64_t{1} << 23;  // engine_loop.h says why
  int max_queue_requests = 4096;
  int max_inflight = 2;
  int idle_spin_us = -1;            // -1: auto (spin on the CUDA engine, not on the CPU one)
  double batch_hold_lead_us = 500;  // EngineLoopOptions::batch_hold_lead_us
  int grpc_poll_us = 0;             // server.h: ServerOptions::grpc_poll_us
  int grace_ms = 30000;
  bool fake = false;
  int fake_latency_us = 0;
  int fake_token_ns = 0;
  int fake_vocab_size = 1000;
  int fake_hidden_size = 32;
  int fake_max_tokens = 512;
  bool fake_hashed_rows = false;
  std::string otlp_endpoint;
};

server::EngineLoopOptions LoopOptions(const ServerArgs& a) {
  server::EngineLoopOptions o;
  o.limits = {a.engine.cuda.max_tokens, a.engine.cuda.max_seqs};
  o.max_queue_tokens = a.max_queue_tokens;
  o.max_queue_requests = a.max_queue_requests;
  o.max_inflight_batches = a.max_inflight;
  // Spinning keeps batch-1 latency free of a thread wake-up, but on the CPU engine the core it
  // burns is one the model needs.
  const bool gpu =
      !a.fake && (a.engine.backend == "cuda" || (a.engine.backend == "auto" && CudaAvailable()));
  o.idle_spin_us = a.idle_spin_us >= 0 ? a.idle_spin_us : (gpu ? 2000 : 0);
  o.batch_hold_lead_us = a.batch_hold_lead_us;
  return o;
}

// The engine `petal server` serves for `a` (the FakeEngine with --fake-engine).
StatusOr<std::unique_ptr<Engine>> BuildEngine(const ServerArgs& a) {
  if (a.fake) {
    server::FakeEngineOptions fo;
    fo.per_batch = std::chrono::microseconds(a.fake_latency_us);
    fo.per_token = std::chrono::nanoseconds(a.fake_token_ns);
    fo.vocab_size = a.fake_vocab_size;
    fo.hidden_size = a.fake_hidden_size;
    fo.max_positions = a.fake_max_tokens;
    fo.hashed_rows = a.fake_hashed_rows;
    fo.result_slots = ResultSlotsFor(a.max_inflight);
    return std::unique_ptr<Engine>(std::make_unique<server::FakeEngine>(fo));
  }
  EngineOptions eo = a.engine;
  // One result slot per batch the loop may hold un-waited (--max-inflight-batches).
  eo.cuda.ring_slots = std::max(eo.cuda.ring_slots, ResultSlotsFor(a.max_inflight));
  // The engine must hold the longest sequence the server accepts even when the scheduler's
  // token budget is smaller (such a sequence runs in a batch of its own).
  if (auto cfg = LoadModelConfig(a.model); cfg.ok()) {
    eo.cuda.max_tokens = std::max(eo.cuda.max_tokens, cfg->max_position_embeddings);
  }
  return CreateEngine(a.model, eo);
}

int RunServer(const ServerArgs& a) {
  // Signals are taken synchronously by this thread (sigwait); block them before any thread starts
  // so gRPC's and the engine loop's threads inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  Tracing tracing;  // outlives the server
  if (!tracing.Start(a.otlp_endpoint, "petal-server")) return 1;

  server::ServerOptions so;
  so.listen = a.listen;
  so.loop = LoopOptions(a);
  so.grpc_poll_us = a.grpc_poll_us;
  auto srv = server::EmbedServer::Start(so);
  if (!srv.ok()) {
    Log("error", "cannot start server", {{"error", srv.status().ToString()}});
    return 1;
  }
  Log("info", "listening; loading model",
      {{"listen", a.listen},
       {"port", std::to_string((*srv)->port())},
       {"model", a.fake ? "fake" : a.model}});
  auto built = BuildEngine(a);
  if (!built.ok()) {
    Log("error", "cannot load model", {{"model", a.model}, {"error", built.status().ToString()}});
    (*srv)->Shutdown(std::chrono::milliseconds(0));
    return 1;
  }
  std::unique_ptr<Engine> engine = std::move(built).value();
  const ModelConfig& c = engine->config();
  Log("info", "serving",
      {{"model", a.fake ? "fake" : a.model},
       {"backend", engine->backend()},
       {"architecture", ArchitectureName(c.architecture)},
       {"hidden", std::to_string(c.hidden_size)},
       {"max_tokens", std::to_string(c.max_position_embeddings)},
       {"listen", a.listen},
       {"port", std::to_string((*srv)->port())},
       {"max_batch_tokens", std::to_string(so.loop.limits.max_batch_tokens)},
       {"max_batch_seqs", std::to_string(so.loop.limits.max_batch_seqs)},
       {"max_queue_tokens", std::to_string(so.loop.max_queue_tokens)},
       {"max_queue_requests", std::to_string(so.loop.max_queue_requests)}});
  if (engine->backend() == "cpu") {
    Log("info", "cpu engine", {{"detail", engine->Describe()}});
    NoteCpuEngine();
  }
  ApplyServingMallocPolicyAndLog();
  (*srv)->AttachEngine(std::move(engine));

  int sig = 0;
  sigwait(&signals, &sig);
  Log("info", "signal received; draining",
      {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"},
       {"grace_ms", std::to_string(a.grace_ms)}});
  (*srv)->Shutdown(std::chrono::milliseconds(a.grace_ms));
  Log("info", "stopped");
  return 0;
}

void AddServerFlags(CLI::App* app, ServerArgs* a) {
  app->add_option("--model", a->model,
                  "Model folder (config.json + safetensors) or hub id ORG/NAME[@REV]");
  app->add_option("--listen", a->listen, "Address to listen on, host:port (port 0 picks one)")
      ->capture_default_str();
  AddEngineFlags(app, &a->engine);
  app->add_option("--max-queue-tokens", a->max_queue_tokens,
                  "Most tokens admitted and not yet answered; beyond it RESOURCE_EXHAUSTED")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--max-queue-requests", a->max_queue_requests,
                  "Most requests admitted and not yet answered; beyond it RESOURCE_EXHAUSTED")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--max-inflight-batches", a->max_inflight,
                  "Batches enqueued on the engine at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--grpc-poll-us", a->grpc_poll_us,
                  "Poll the gRPC sockets on a spare thread for this long after each request and "
                  "answer (0: gRPC's threads sleep between events)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--idle-spin-us", a->idle_spin_us,
                  "How long the scheduler polls for work before sleeping (-1: 2000 on the CUDA "
                  "engine, 0 on the CPU engine)")
      ->capture_default_str();
  app->add_option("--batch-hold-lead-us", a->batch_hold_lead_us,
                  "With batches already on the engine, hold a partial next batch until about this "
                  "long before the engine runs out of work, so it fills (-1: never hold)")
      ->capture_default_str();
  app->add_option("--shutdown-grace-ms", a->grace_ms,
                  "On SIGTERM/SIGINT, how long in-flight requests may take before being cancelled")
      ->capture_default_str();
  app->add_flag("--fake-engine", a->fake,
                "Serve the deterministic FakeEngine (no model; for tests)");
  app->add_option("--fake-latency-us", a->fake_latency_us, "FakeEngine: simulated time per batch");
  app->add_option("--fake-token-ns", a->fake_token_ns,
                  "FakeEngine: simulated time per token, on top of --fake-latency-us (batches "
                  "complete one after another, as on a GPU stream)")
      ->check(CLI::Range(0, 1000000));
  app->add_option(
         "--fake-vocab-size", a->fake_vocab_size,
         "FakeEngine: token ids it accepts (a real tokenizer in front needs its vocabulary)")
      ->check(CLI::Range(2, 1 << 24))
      ->capture_default_str();
  app->add_option("--fake-hidden-size", a->fake_hidden_size,
                  "FakeEngine: floats per row (a model's hidden size, to measure formatting)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app->add_option("--fake-max-tokens", a->fake_max_tokens,
                  "FakeEngine: the longest sequence it accepts (its model's context length)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app->add_flag("--fake-hashed-rows", a->fake_hashed_rows,
                "FakeEngine: rows from a hash of each sequence (no work per token), to measure the "
                "path around the engine");
  AddTraceFlag(app, &a->otlp_endpoint);
}

std::function<int()> SetupServer(CLI::App* app) {
  auto a = std::make_shared<ServerArgs>();
  AddServerFlags(app, a.get());
  return [a] {
    if (a->model.empty() && !a->fake) {
      std::fprintf(stderr, "error: --model is required (or --fake-engine)\n");
      return 2;
    }
    if (!a->fake && !ResolveModelFlag("petal server", &a->model)) return 1;
    return RunServer(*a);
  };
}

// Parses '[[101,2023,102],[101,102]]'.
StatusOr<std::vector<std::vector<int32_t>>> ParseIds(const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return InvalidArgument("--ids: not valid JSON");
  simdjson::dom::array outer;
  if (doc.get_array().get(outer)) return InvalidArgument("--ids: expected a list of lists of ints");
  std::vector<std::vector<int32_t>> seqs;
  for (simdjson::dom::element inner : outer) {
    simdjson::dom::array arr;
    if (inner.get_array().get(arr))
      return InvalidArgument("--ids: expected a list of lists of ints");
    auto& s = seqs.emplace_back();
    for (simdjson::dom::element v : arr) {
      int64_t id;
      if (v.get_int64().get(id)) return InvalidArgument("--ids: token ids must be integers");
      s.push_back(static_cast<int32_t>(id));
    }
  }
  return seqs;
}

struct ClientArgs {
  std::string server = "127.0.0.1:50051";
  std::string ids;
  uint32_t dims = 0;
  std::string dtype = "float32";
  int timeout_ms = 0;
  petal::bench::GrpcBenchArgs bench;  // `petal client bench`, an alias of `petal bench grpc`
  bool prometheus = false;
};

int Fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
  return 1;
}

int RunClientEmbed(const ClientArgs& a) {
  auto seqs = ParseIds(a.ids);
  if (!seqs.ok()) return Fail(seqs.status());
  v1::EmbedOptions opts;
  opts.set_dimensions(a.dims);
  const std::map<std::string, v1::DType> dtypes = {
      {"float32", v1::DTYPE_FLOAT32}, {"float16", v1::DTYPE_FLOAT16},
      {"int8", v1::DTYPE_INT8},       {"binary", v1::DTYPE_BINARY},
      {"ubinary", v1::DTYPE_UBINARY}, {"int8_tanh", v1::DTYPE_INT8_TANH}};
  opts.set_dtype(dtypes.at(a.dtype));  // CLI11 has checked membership
  wire::EmbedClient client(a.server);
  auto resp = client.Embed(wire::MakeEmbedRequest(*seqs, opts, "cli"),
                           std::chrono::milliseconds(a.timeout_ms));
  if (!resp.ok()) return Fail(resp.status());
  auto rows = wire::DecodeEmbeddings(*resp);
  if (!rows.ok()) return Fail(rows.status());
  std::printf(
      "{\"shape\": [%u, %u], \"dtype\": \"%s\", \"queue_us\": %llu, \"total_us\": %llu, "
      "\"embeddings\": [",
      resp->shape(0), resp->dimensions(), a.dtype.c_str(),
      static_cast<unsigned long long>(resp->queue_us()),
      static_cast<unsigned long long>(resp->total_us()));
  for (size_t r = 0; r < rows->size(); ++r) {
    std::printf("%s[", r ? ", " : "");
    for (size_t d = 0; d < (*rows)[r].size(); ++d)
      std::printf("%s%.7g", d ? ", " : "", (*rows)[r][d]);
    std::printf("]");
  }
  std::printf("]}\n");
  return 0;
}

std::function<int()> SetupClient(CLI::App* app) {
  auto a = std::make_shared<ClientArgs>();
  app->require_subcommand(1);
  app->add_option("--server", a->server, "Server address host:port")->capture_default_str();
  auto* embed = app->add_subcommand("embed", "Embed pre-tokenized sequences; prints JSON");
  embed->add_option("--ids", a->ids, "Token ids as JSON, e.g. '[[101,2023,102]]'")->required();
  embed->add_option("--dimensions", a->dims, "Matryoshka dimensions (0 = full)");
  embed->add_option("--dtype", a->dtype, "float32, float16, int8, binary, ubinary or int8_tanh")
      ->check(CLI::IsMember({"float32", "float16", "int8", "binary", "ubinary", "int8_tanh"}))
      ->capture_default_str();
  embed->add_option("--timeout-ms", a->timeout_ms, "Deadline (0 = none)");
  auto* info = app->add_subcommand("info", "Print the server's ModelInfo");
  auto* stats = app->add_subcommand("stats", "Print the server's Stats");
  stats->add_flag("--prometheus", a->prometheus, "In the Prometheus text format");
  auto* health = app->add_subcommand("health", "Exit 0 iff the server reports SERVING");
  auto* bench = app->add_subcommand("bench", "Alias of `petal bench grpc`");
  AddGrpcBenchFlags(bench, &a->bench);
  return [a, embed, info, stats, health, bench]() -> int {
    wire::EmbedClient client(a->server);
    if (embed->parsed()) return RunClientEmbed(*a);
    if (bench->parsed()) {
      petal::bench::GrpcBenchArgs b = a->bench;
      b.server = a->server;
      return petal::bench::RunBenchGrpc(b);
    }
    if (info->parsed() || stats->parsed()) {
      std::string text;
      if (info->parsed()) {
        auto r = client.ModelInfo();
        if (!r.ok()) return Fail(r.status());
        text = r->DebugString();
      } else {
        auto r = client.Stats();
        if (!r.ok()) return Fail(r.status());
        text = a->prometheus ? wire::StatsToPrometheus(*r) : r->DebugString();
      }
      std::printf("%s", text.c_str());
      return 0;
    }
    if (health->parsed()) {
      auto s = client.Serving();
      if (!s.ok()) return Fail(s.status());
      std::printf("%s\n", *s ? "SERVING" : "NOT_SERVING");
      return *s ? 0 : 1;
    }
    return 2;
  };
}

}  // namespace

StatusOr<std::shared_ptr<server::LocalReplica>> StartLocalReplica(
    const std::vector<std::string>& server_flags, bool owns_device) {
  CLI::App app("petal server (in-process replica)");
  ServerArgs a;
  AddServerFlags(&app, &a);
  std::vector<std::string> args(server_flags.rbegin(), server_flags.rend());  // CLI11: reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(std::string("replica flags: ") + e.what());
  }
  if (a.model.empty() && !a.fake) return InvalidArgument("replica flags: --model is required");
  PETAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, BuildEngine(a));
  Log("info", "local replica serving",
      {{"model", a.fake ? "fake" : a.model}, {"backend", engine->backend()}});
  if (engine->backend() == "cpu") NoteCpuEngine();  // serve's malloc policy (malloc_policy.h)
  // After an engine fault: a new engine from the same flags. A CUDA engine that cannot be built
  // (the fault left a sticky error in the context) is built again after a device reset, when
  // this replica is the device's only user.
  const bool cuda = !a.fake && engine->backend() == "cuda";
  server::EngineBuilder rebuild = [a, cuda, owns_device]() -> StatusOr<std::unique_ptr<Engine>> {
    StatusOr<std::unique_ptr<Engine>> e = BuildEngine(a);
    if (e.ok() || !cuda || !owns_device) return e;
    Log("error", "local replica: rebuild failed; resetting the device",
        {{"device", std::to_string(a.engine.cuda.device)}, {"error", e.status().ToString()}});
    PETAL_RETURN_IF_ERROR(ResetCudaDevice(a.engine.cuda.device));
    return BuildEngine(a);
  };
  return server::LocalReplica::Create(std::move(engine), LoopOptions(a), std::move(rebuild));
}

}  // namespace petal::cli

PETAL_REGISTER_COMMAND(server, "server", "Run the gRPC inference server", petal::cli::SetupServer);
PETAL_REGISTER_COMMAND(client, "client", "Talk to a running server (embed, info, stats, health)",
                       petal::cli::SetupClient);
