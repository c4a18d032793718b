// `petal gateway`: the HTTP gateway in front of one or more running `petal server`s.
#include <signal.h>

#include <cstdio>

#include "cli/command.h"
#include "cli/gateway_flags.h"
#include "cli/model_arg.h"
#include "cli/trace_flags.h"
#include "common/log.h"
#include "gateway/gateway.h"

namespace petal::cli {
namespace {

std::function<int()> SetupGateway(CLI::App* app) {
  auto o = std::make_shared<gateway::GatewayOptions>();
  app->add_option("--server", o->servers, "Inference server host:port (repeat for replicas)")
      ->required();
  AddGatewayFlags(app, o.get());
  auto otlp = std::make_shared<std::string>();
  AddTraceFlag(app, otlp.get());
  return [o, otlp] {
    if (o->model_dir.empty()) {
      std::fprintf(stderr, "error: --model is required\n");
      return 2;
    }
    if (!ResolveModelFlag("petal gateway", &o->model_dir, &o->model_name)) return 1;
    // Signals are taken synchronously by this thread; block them before any thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    Tracing tracing;  // outlives the gateway
    if (!tracing.Start(*otlp, "petal-gateway")) return 1;
    auto g = gateway::Gateway::Start(*o);
    if (!g.ok()) {
      Log("error", "cannot start gateway", {{"error", g.status().ToString()}});
      return 1;
    }
    LogGatewayStarted(*o, (*g)->port(), (*g)->config().task);
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
