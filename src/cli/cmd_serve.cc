// `petal serve`: the one-command deployment: the gateway and, per --model, its replicas, with
// `--replicas N` (any backend) or `--gpus all|N|LIST` (one replica per GPU). How the gateway
// reaches a replica (`--replica-transport`):
//  - local: the replica's engine runs in this process (RunLocal; server/local_replica.h): no gRPC
//    hop; a replica rebuilds its own engine after an engine fault; a crash ends the gateway too;
//  - unix / tcp: one `petal server` child process per replica (re-executing this binary) on a Unix
//    domain socket in a private temporary folder, or a loopback port; with --gpus each child sees
//    only its GPU through CUDA_VISIBLE_DEVICES. A replica that dies is restarted on its address (at
//    most once a second);
//  - auto (the default): local, except when several CPU-engine replicas (or fake ones) would
//    share this process: unix then, so that each keeps its own OpenMP threads.
// SIGINT/SIGTERM stop the gateway first (no new requests; in-flight ones finish), then the
// replicas, which drain themselves.
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include "cli/command.h"
#include "cli/gateway_flags.h"
#include "cli/gpu_memory.h"
#include "cli/gpu_select.h"
#include "cli/local_replicas.h"
#include "cli/serve_children.h"
#include "cli/trace_flags.h"
#include "common/log.h"
#include "common/malloc_policy.h"
#include "engine/cuda/cuda_engine.h"
#include "gateway/gateway.h"
#include "wire/client.h"
#include "wire/replica_transport.h"

namespace petal::cli {
namespace {

struct ServeArgs {
  gateway::GatewayOptions gateway;  // its `models` get their replicas' addresses
  ModelFlags models;
  int replicas = 1;
  std::string backend = "auto";
  std::vector<int> devices;  // replica i gets devices[i % size] (none: the server's default)
  std::string gpus;          // --gpus: one replica per GPU (empty: as without)
  std::vector<std::string> server_args;
  std::string quantize = "none";  // passed to every replica as --quantize
  std::string fp8_scales;         // passed to every replica as --fp8-scales when set
  std::string otlp_endpoint;      // tracing: the gateway's and every replica's exporter
  bool fake = false;
  int start_timeout_s = 600;
  int grace_ms = 30000;
  int port = -1;                   // overrides --listen's port
  std::string transport = "auto";  // gateway-to-replica hop: auto, local, unix or tcp
};

// `petal server`'s flags for replica i of a model: engine, device, tracing, --server-arg.
std::vector<std::string> ReplicaFlags(const ServeArgs& a, const std::string& model_dir, int i) {
  std::vector<std::string> f;
  if (a.fake) {
    f.push_back("--fake-engine");
  } else {
    f = {"--model", model_dir, "--backend", a.backend, "--quantize", a.quantize};
    if (!a.fp8_scales.empty()) f.insert(f.end(), {"--fp8-scales", a.fp8_scales});
  }
  if (!a.devices.empty())
    f.insert(f.end(), {"--device", std::to_string(a.devices[i % a.devices.size()])});
  if (!a.otlp_endpoint.empty()) f.insert(f.end(), {"--otlp-endpoint", a.otlp_endpoint});
  f.insert(f.end(), a.server_args.begin(), a.server_args.end());
  return f;
}

// --replica-transport local: every replica is an engine in this process (server::LocalReplica,
// registered as local:replica-<i>, numbered across models), no child processes: a replica
// rebuilds its own engine after a fault, and SIGUSR1 drills that on replica-0 (local_replica.h
// says what cannot be contained). With --gpus, a model's replica i runs on the i-th chosen GPU
// (--device).
struct Locals {
  std::vector<std::shared_ptr<server::LocalReplica>> replicas;
  ~Locals() { Stop(); }
  void Stop() {
    for (size_t i = 0; i < replicas.size(); ++i) {
      wire::UnregisterLocalReplica("replica-" + std::to_string(i));
      replicas[i]->Shutdown();
    }
    replicas.clear();
  }
};

// Several models on shared GPUs: their estimated weights and engine reserves against each GPU's
// free memory (gpu_memory.h), before any engine starts; false (reported) when they cannot fit.
// Skipped (true) for one model, the CPU and FakeEngine, and where the estimate cannot be made.
bool SharedGpusFit(const ServeArgs& a, const std::vector<std::string>& gpus) {
  const bool gpu = a.backend == "cuda" || (a.backend == "auto" && CudaDeviceCount() > 0);
  if (a.fake || !gpu || a.gateway.models.size() < 2) return true;
  const char* parent_visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::map<int, std::vector<EngineFootprint>> per_device;
  for (const auto& model : a.gateway.models) {
    auto bytes = EstimateWeightBytes(model.model_dir);
    if (!bytes.ok()) return true;  // loading the model will say what is wrong with it
    for (int i = 0; i < a.replicas; ++i) {
      int device = 0;  // replicas without --gpus use the first visible GPU
      if (!gpus.empty()) {
        auto d = DeviceIndexOf(gpus[i], parent_visible ? parent_visible : "");
        if (!d.ok()) return true;  // StartLocals / the children report it
        device = *d;
      }
      per_device[device].push_back(
          {model.model_name.empty() ? model.model_dir : model.model_name, *bytes});
    }
  }
  for (const auto& [device, engines] : per_device) {
    uint64_t free_bytes = 0, total_bytes = 0;
    if (!CudaMemoryInfo(device, &free_bytes, &total_bytes).ok()) continue;
    if (Status s = CheckEnginesFit(engines, free_bytes, device); !s.ok()) {
      Log("error", "cannot serve these models together", {{"error", s.message()}});
      return false;
    }
    Log("info", "models share a GPU",
        {{"gpu", std::to_string(device)},
         {"engines", std::to_string(engines.size())},
         {"free_mib", std::to_string(free_bytes >> 20)}});
  }
  return true;
}

// Starts a.replicas local replicas per model and adds their addresses to the model's; false
// (reported) if one cannot start.
bool StartLocals(ServeArgs& a, const std::vector<std::string>& gpus, Locals* locals) {
  const char* parent_visible = std::getenv("CUDA_VISIBLE_DEVICES");
  for (int k = 0; k < a.replicas * static_cast<int>(a.gateway.models.size()); ++k) {
    gateway::ModelOptions& model = a.gateway.models[k / a.replicas];
    const int i = k % a.replicas;
    std::vector<std::string> flags = ReplicaFlags(a, model.model_dir, i);
    if (!gpus.empty()) {
      auto d = DeviceIndexOf(gpus[i], parent_visible ? parent_visible : "");
      if (!d.ok()) {
        std::fprintf(stderr, "error: %s\n", d.status().message().c_str());
        return false;
      }
      flags.insert(flags.end(), {"--device", std::to_string(*d)});
    }
    // A GPU is a replica's own only when no other replica, of this model or another, uses it.
    const bool own_gpu = a.gateway.models.size() == 1 && (!gpus.empty() || a.replicas == 1);
    auto r = StartLocalReplica(flags, /*owns_device=*/own_gpu);
    if (!r.ok()) {
      Log("error", "cannot start local replica",
          {{"replica", std::to_string(k)}, {"error", r.status().ToString()}});
      return false;
    }
    const std::string name = "replica-" + std::to_string(k);
    locals->replicas.push_back(*r);
    wire::RegisterLocalReplica(name, *r);
    model.servers.push_back(std::string(wire::kLocalAddressPrefix) + name);
  }
  return true;
}

// --replica-transport auto: local for GPU replicas and for a single engine, unix when several
// CPU (or fake) engines would otherwise share one process.
std::string AutoTransport(const ServeArgs& a) {
  const bool gpu = !a.fake && (a.backend == "cuda" || (!a.gpus.empty() && a.gpus != "0") ||
                               (a.backend == "auto" && CudaDeviceCount() > 0));
  const size_t engines = static_cast<size_t>(a.replicas) * a.gateway.models.size();
  return gpu || engines <= 1 ? "local" : "unix";
}

int RunServe(ServeArgs& a) {
  if (a.transport == "auto") a.transport = AutoTransport(a);
  Log("info", "replica transport", {{"transport", a.transport}});
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGCHLD);
  if (a.transport == "local") sigaddset(&signals, SIGUSR1);  // the fault drill (local_replica.h)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // One replica per GPU: each child sees only its GPU, as its device 0.
  std::vector<std::string> gpus;
  if (!a.gpus.empty()) {
    const char* parent_visible = std::getenv("CUDA_VISIBLE_DEVICES");
    auto g = ResolveGpus(a.gpus, CudaDeviceCount(), parent_visible ? parent_visible : "");
    if (!g.ok()) {
      std::fprintf(stderr, "error: %s\n", g.status().message().c_str());
      return 2;
    }
    gpus = std::move(g).value();
    if (!gpus.empty()) {
      a.replicas = static_cast<int>(gpus.size());
      a.backend = "cuda";
      if (a.transport != "local") a.devices = {0};  // each child sees only its GPU
    }
  }
  if (!SharedGpusFit(a, gpus)) return 1;
  Locals locals;
  if (a.transport == "local" && !StartLocals(a, gpus, &locals)) return 1;
  ApplyServingMallocPolicyAndLog();  // after the local engines
  // Unix sockets live in a folder only this user can enter, removed on the way out.
  std::string socket_dir;
  if (a.transport == "unix") {
    char tmpl[] = "/tmp/petal-serve-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::fprintf(stderr, "error: cannot create a folder for the replicas' sockets in /tmp\n");
      return 1;
    }
    socket_dir = tmpl;
  }
  struct RemoveSockets {
    const std::string& dir;
    ~RemoveSockets() {
      if (!dir.empty()) std::filesystem::remove_all(dir);
    }
  } remove_sockets{socket_dir};
  // Replicas are numbered across models: model m's replica i is child m * a.replicas + i.
  std::vector<Child> children(a.transport == "local" ? 0 : a.replicas * a.gateway.models.size());
  for (int k = 0; k < static_cast<int>(children.size()); ++k) {
    Child& c = children[k];
    c.model = k / a.replicas;
    const int i = k % a.replicas;
    if (!gpus.empty()) {
      c.gpu = gpus[i];
      c.env = EnvWith("CUDA_VISIBLE_DEVICES", c.gpu);
    }
    if (socket_dir.empty()) {
      const int port = FreePort();
      c.address = port == 0 ? "" : "127.0.0.1:" + std::to_string(port);
    } else {
      c.address = "unix:" + socket_dir + "/replica-" + std::to_string(k) + ".sock";
    }
    c.argv = {"petal",
              "server",
              "--listen",
              c.address,
              "--shutdown-grace-ms",
              std::to_string(a.grace_ms)};
    const std::vector<std::string> flags = ReplicaFlags(a, a.gateway.models[c.model].model_dir, i);
    c.argv.insert(c.argv.end(), flags.begin(), flags.end());
    if (c.address.empty() || !StartChild(&c)) {
      StopChildren(&children, 0);
      return 1;
    }
    a.gateway.models[c.model].servers.push_back(c.address);
  }
  // Wait for every replica to load its model (a replica that exits here is a start failure).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.start_timeout_s);
  for (auto& c : children) {
    while (true) {
      // A fresh channel per attempt: a channel that failed to connect backs off for seconds
      // before trying again, which would delay start-up well past the replica being ready.
      wire::EmbedClient client(c.address);
      int status;
      if (waitpid(c.pid, &status, WNOHANG) == c.pid) {
        Log("error", "replica exited while starting", {{"address", c.address}});
        c.pid = -1;
        StopChildren(&children, 0);
        return 1;
      }
      auto s = client.Serving();
      if (s.ok() && *s) break;
      if (std::chrono::steady_clock::now() > deadline) {
        Log("error", "replica not serving in time", {{"address", c.address}});
        StopChildren(&children, 0);
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  Tracing tracing;  // outlives the gateway
  if (!tracing.Start(a.otlp_endpoint, "petal-gateway")) {
    StopChildren(&children, 0);
    return 1;
  }
  auto g = gateway::Gateway::Start(a.gateway);
  if (!g.ok()) {
    Log("error", "cannot start gateway", {{"error", g.status().ToString()}});
    StopChildren(&children, 0);
    return 1;
  }
  LogGatewayStarted(a.gateway, **g);
  int sig = 0;
  while (true) {
    sigwait(&signals, &sig);
    if (sig == SIGUSR1 && !locals.replicas.empty()) {
      Log("info", "SIGUSR1: fault drill on local replica-0 (its engine is rebuilt)");
      locals.replicas[0]->InjectFault();
      continue;
    }
    if (sig != SIGCHLD) break;
    ReapAndRestart(&children);
  }
  Log("info", "signal received; stopping gateway, then replicas",
      {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  g->reset();
  StopChildren(&children, a.grace_ms);
  locals.Stop();
  Log("info", "stopped");
  return 0;
}

std::function<int()> SetupServe(CLI::App* app) {
  auto a = std::make_shared<ServeArgs>();
  a->models.models = {"models/all-MiniLM-L6-v2"};
  a->gateway.listen = "127.0.0.1:8080";
  AddGatewayFlags(app, &a->gateway, &a->models);
  auto* replicas = app->add_option("--replicas", a->replicas,
                                   "Inference server processes per model (any backend; see also "
                                   "--gpus)")
                       ->check(CLI::Range(1, 64))
                       ->capture_default_str();
  app->add_option("--backend", a->backend, "Engine backend of the replicas: auto, cpu or cuda")
      ->capture_default_str();
  auto* devices =
      app->add_option("--devices", a->devices, "CUDA devices; replica i uses devices[i % count]")
          ->delimiter(',');
  app->add_option("--gpus", a->gpus,
                  "One replica per GPU (and model: several models share the GPUs), each pinned "
                  "through CUDA_VISIBLE_DEVICES: all, a count N, or a list like 0,2 (0: none, as "
                  "without the flag)")
      ->excludes(replicas)
      ->excludes(devices);
  app->add_option(
      "--server-arg", a->server_args,
      "Extra argument for every `petal server` (repeat, e.g. --server-arg=--no-graphs)");
  app->add_option("--quantize", a->quantize,
                  "Replicas' dense layers: none (bf16) or fp8 (CUDA, Qwen3; more fp8 options via "
                  "--server-arg, e.g. --server-arg=--fp8-layers=mlp)")
      ->check(CLI::IsMember({"none", "fp8"}))
      ->capture_default_str();
  app->add_option("--fp8-scales", a->fp8_scales,
                  "--quantize fp8: static activation scales from DIR/fp8_scales.json (petal "
                  "calibrate), passed to every replica");
  app->add_flag("--fake-engine", a->fake, "Replicas serve the FakeEngine (for tests)");
  app->add_option("--start-timeout-s", a->start_timeout_s, "Longest wait for replicas to serve")
      ->capture_default_str();
  app->add_option("--shutdown-grace-ms", a->grace_ms, "Replicas' drain time on shutdown")
      ->capture_default_str();
  app->add_option("--port", a->port, "HTTP port (shorthand for --listen 127.0.0.1:PORT)");
  app->add_option("--replica-transport", a->transport,
                  "Gateway-to-replica hop: local (engines in this process: no gRPC hop, no "
                  "process isolation), unix (a server process per replica, gRPC over a domain "
                  "socket in a private /tmp folder), tcp (the same over loopback ports) or auto "
                  "(local, except unix for several CPU-engine replicas)")
      ->check(CLI::IsMember({"auto", "local", "unix", "tcp"}))
      ->capture_default_str();
  AddTraceFlag(app, &a->otlp_endpoint);
  return [a] {
    if (!a->gpus.empty() && a->gpus != "0" && (a->fake || a->backend == "cpu")) {
      std::fprintf(stderr, "error: --gpus runs CUDA replicas; it cannot go with %s\n",
                   a->fake ? "--fake-engine" : "--backend cpu");
      return 2;
    }
    if (a->port >= 0) {
      const std::string& l = a->gateway.listen;
      a->gateway.listen = l.substr(0, l.rfind(':')) + ":" + std::to_string(a->port);
    }
    // The gateway tokenizes from this folder even in front of fake replicas.
    if (!ResolveModels("petal serve", a->models, &a->gateway)) return 1;
    return RunServe(*a);
  };
}

}  // namespace
}  // namespace petal::cli

PETAL_REGISTER_COMMAND(serve, "serve",
                       "Start N inference servers and the HTTP gateway in front of them",
                       petal::cli::SetupServe);
