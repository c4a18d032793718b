// Command-line flags shared by `petal gateway` and `petal serve` (everything but the server
// list, which `serve` creates itself). Thread-safety: called during start-up only.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "common/log.h"
#include "gateway/gateway.h"
#include "gateway/task_routes.h"

namespace petal::cli {

inline void AddGatewayFlags(CLI::App* app, gateway::GatewayOptions* o) {
  app->add_option("--model", o->model_dir,
                  "Model folder (tokenizer.json, config.json) or hub id ORG/NAME[@REV]")
      ->capture_default_str();
  app->add_option(
      "--model-name", o->model_name,
      "Name reported as `model` (default: the folder's name, or ORG/NAME for a hub id)");
  app->add_option("--listen", o->listen, "HTTP address host:port (port 0 picks one)")
      ->capture_default_str();
  app->add_option("--http-threads", o->http_threads, "HTTP I/O threads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--worker-threads", o->worker_threads,
                  "Threads that parse, tokenize and format (0 = one per hardware thread)")
      ->capture_default_str();
  app->add_option("--chunk-max-sequences", o->chunk.max_seqs, "Most sequences per chunk")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--chunk-max-tokens", o->chunk.max_tokens, "Most tokens per chunk")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--max-queued-tokens", o->flow.max_held_tokens,
                  "Tokens the gateway holds (queued + in flight) before it answers 429; 0 = "
                  "sized from memory (1/8 of it at 16 bytes per token)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--replica-window-tokens", o->flow.replica_window_tokens,
                  "Tokens in flight per server (at most its --max-queue-tokens)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--replica-window-calls", o->flow.replica_window_calls,
                  "Calls in flight per server (at most its --max-queue-requests)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--reply-poll-us", o->reply_poll_us,
                  "Collect servers' replies on a thread that polls while calls are in flight and "
                  "this long after (microseconds; -1, the default: gRPC's callback threads)");
  app->add_option("--max-inputs", o->max_inputs, "Most inputs per request (beyond: 413)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--max-body-bytes", o->body_limit, "Largest request body (beyond: 413)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--api-key", o->api_keys,
                  "Require `Authorization: Bearer KEY` (repeat for several keys)");
  app->add_option_function<int>(
         "--health-interval-ms",
         [o](int ms) { o->health_interval = std::chrono::milliseconds(ms); },
         "How often replicas' health is checked (default 1000)")
      ->check(CLI::PositiveNumber);
  app->add_option_function<int>(
         "--request-timeout-ms",
         [o](int ms) { o->request_timeout = std::chrono::milliseconds(ms); },
         "Deadline of each request, queued in the gateway and on the servers (default 60000)")
      ->check(CLI::PositiveNumber);
}

// Logs the gateway's start and prints a curl of the model's own route (task_routes.h).
inline void LogGatewayStarted(const gateway::GatewayOptions& o, uint16_t port, ModelTask task) {
  std::string servers;
  for (const auto& s : o.servers) servers += (servers.empty() ? "" : ",") + s;
  Log("info", "gateway listening",
      {{"listen", o.listen},
       {"port", std::to_string(port)},
       {"model", o.model_dir},
       {"servers", servers},
       {"chunk_max_sequences", std::to_string(o.chunk.max_seqs)},
       {"chunk_max_tokens", std::to_string(o.chunk.max_tokens)},
       {"reply_poll_us", std::to_string(o.reply_poll_us)}});
  std::string host = o.listen.substr(0, o.listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  const std::string url = "http://" + host + ":" + std::to_string(port);
  const gateway::ExampleRequest ex = gateway::ExampleFor(task);
  const std::string_view noun = gateway::TaskNoun(task);
  std::fprintf(stderr,
               "Petal is serving %s at %s\n  curl %s%.*s -H 'Content-Type: application/json' "
               "-d '%.*s'\n",
               std::string(noun.substr(0, noun.find(" ("))).c_str(), url.c_str(), url.c_str(),
               static_cast<int>(ex.path.size()), ex.path.data(), static_cast<int>(ex.body.size()),
               ex.body.data());
}

}  // namespace petal::cli
