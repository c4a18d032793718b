// Command-line flags shared by `petal gateway` and `petal serve` (everything but the server
// list, which `serve` creates itself), the models they name, and the start-up log and hint.
// Thread-safety: called during start-up only.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "gateway/gateway.h"

namespace petal::cli {

// The models of `petal gateway` and `petal serve`: --model and --model-name, each repeatable,
// and the limits each model may have of its own (model_limits.h): each of those flags is given
// not at all (the default), once (every model's) or once per --model, in the same order.
struct ModelFlags {
  std::vector<std::string> models;         // folders or hub ids, in order
  std::vector<std::string> names;          // none, or one per --model, in the same order
  std::vector<size_t> max_inputs;          // --max-inputs
  std::vector<int> chunk_max_seqs;         // --chunk-max-sequences
  std::vector<int64_t> chunk_max_tokens;   // --chunk-max-tokens
  std::vector<int64_t> max_queued_tokens;  // --max-queued-tokens
};

// How a per-model flag's help ends: its default and the once-or-once-per-model rule.
inline std::string PerModelHelp(const std::string& what, const std::string& default_value) {
  return what + " (default " + default_value +
         "); once for every model, or once per --model in the same order";
}

// --model, --model-name and every other gateway flag.
inline void AddGatewayFlags(CLI::App* app, gateway::GatewayOptions* o, ModelFlags* m) {
  app->add_option("--model", m->models,
                  "Model folder (tokenizer.json, config.json) or hub id ORG/NAME[@REV]; repeat to "
                  "serve several models (a request's `model` picks one)")
      ->capture_default_str();
  app->add_option("--model-name", m->names,
                  "Name reported as `model` (default: the folder's name, or ORG/NAME for a hub "
                  "id); with several --model, once per --model in the same order");
  app->add_option("--listen", o->listen, "HTTP address host:port (port 0 picks one)")
      ->capture_default_str();
  app->add_option("--http-threads", o->http_threads, "HTTP I/O threads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--worker-threads", o->worker_threads,
                  "Threads that parse, tokenize and format (0 = one per hardware thread)")
      ->capture_default_str();
  app->add_option("--chunk-max-sequences", m->chunk_max_seqs,
                  PerModelHelp("Most sequences per chunk", std::to_string(o->chunk.max_seqs)))
      ->check(CLI::PositiveNumber);
  app->add_option("--chunk-max-tokens", m->chunk_max_tokens,
                  PerModelHelp("Most tokens per chunk", std::to_string(o->chunk.max_tokens)))
      ->check(CLI::PositiveNumber);
  app->add_option("--max-queued-tokens", m->max_queued_tokens,
                  PerModelHelp("Tokens the gateway holds for a model (queued + in flight) before "
                               "it answers 429; 0 = sized from memory (1/8 of it at 16 bytes per "
                               "token, split between the models)",
                               "0"))
      ->check(CLI::NonNegativeNumber);
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
  app->add_option(
         "--max-inputs", m->max_inputs,
         PerModelHelp("Most inputs per request (beyond: 413)", std::to_string(o->max_inputs)))
      ->check(CLI::PositiveNumber);
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

// Resolves each --model (hub ids through the cache: model_arg.h), pairs it with its --model-name
// and its own limits (ApplyModelLimits, model_limits.h) and sets o->models, without servers.
// False after printing the error on stderr.
bool ResolveModels(const char* command, const ModelFlags& flags, gateway::GatewayOptions* o);

// Logs the gateway's start and prints, for each model, a curl of its own route (task_routes.h;
// with several models the body names the model).
void LogGatewayStarted(const gateway::GatewayOptions& o, const gateway::Gateway& g);

}  // namespace petal::cli
