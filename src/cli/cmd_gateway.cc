// `petal gateway`: the HTTP gateway in front of one or more running `petal server`s, for one model
// or several (`--model A --model B --server A=HOST:PORT --server B=HOST:PORT`).
#include <signal.h>

#include <cstdio>

#include "cli/command.h"
#include "cli/gateway_flags.h"
#include "cli/trace_flags.h"
#include "common/log.h"
#include "common/malloc_policy.h"
#include "gateway/gateway.h"
#include "gateway/model_select.h"

namespace petal::cli {
namespace {

std::function<int()> SetupGateway(CLI::App* app) {
  auto o = std::make_shared<gateway::GatewayOptions>();
  auto servers = std::make_shared<std::vector<std::string>>();
  auto models = std::make_shared<ModelFlags>();
  app->add_option("--server", *servers,
                  "Inference server host:port (repeat for replicas); with several --model, "
                  "MODEL=host:port (MODEL: its name, folder name or hub id)")
      ->required();
  AddGatewayFlags(app, o.get(), models.get());
  auto otlp = std::make_shared<std::string>();
  AddTraceFlag(app, otlp.get());
  return [o, servers, models, otlp] {
    if (models->models.empty()) {
      std::fprintf(stderr, "error: --model is required\n");
      return 2;
    }
    if (!ResolveModels("petal gateway", *models, o.get())) return 1;
    std::vector<gateway::ModelNames> names;
    for (const auto& m : o->models) {
      auto n = gateway::NamesOf(m);
      if (!n.ok()) {
        std::fprintf(stderr, "petal gateway: --model %s: %s\n", m.model_dir.c_str(),
                     n.status().ToString().c_str());
        return 1;
      }
      names.push_back(std::move(n).value());
    }
    auto assigned = gateway::AssignServers(names, *servers);
    if (!assigned.ok()) {
      std::fprintf(stderr, "petal gateway: %s\n", assigned.status().message().c_str());
      return 2;
    }
    for (size_t i = 0; i < o->models.size(); ++i) o->models[i].servers = (*assigned)[i];
    // Signals are taken synchronously by this thread; block them before any thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    ApplyServingMallocPolicyAndLog();
    Tracing tracing;  // outlives the gateway
    if (!tracing.Start(*otlp, "petal-gateway")) return 1;
    auto g = gateway::Gateway::Start(*o);
    if (!g.ok()) {
      Log("error", "cannot start gateway", {{"error", g.status().ToString()}});
      return 1;
    }
    LogGatewayStarted(*o, **g);
    int sig = 0;
    sigwait(&signals, &sig);
    Log("info", "signal received; stopping gateway",
        {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    g->reset();
    Log("info", "stopped");
    return 0;
  };
}

}  // namespace
}  // namespace petal::cli

PETAL_REGISTER_COMMAND(gateway, "gateway", "Run the HTTP gateway in front of inference servers",
                       petal::cli::SetupGateway);
