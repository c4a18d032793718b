// Flag definitions of bench_flags.h.
#include "cli/bench_flags.h"

#include "cli/engine_flags.h"

namespace petal::cli {

void AddEngineBenchFlags(CLI::App* eng, bench::EngineBenchArgs* a) {
  eng->add_option("--model", a->model, "Model folder or hub id ORG/NAME[@REV]")->required();
  eng->add_option("--out", a->out, "Write results JSON here");
  eng->add_option("--scenarios", a->scenarios, "Comma-separated subset (default: all)");
  eng->add_option("--seconds", a->seconds, "Time per scenario")->capture_default_str();
  eng->add_option("--max-iters", a->max_iters, "Most requests per scenario")->capture_default_str();
  eng->add_flag("!--no-check", a->check, "Skip the warm-up check against the CPU reference");
  AddEngineFlags(eng, &a->engine);
}

void AddGrpcBenchFlags(CLI::App* app, bench::GrpcBenchArgs* a) {
  app->add_option("--scenarios", a->scenarios, "Comma-separated subset (default: all)");
  app->add_option("--seconds", a->seconds, "Time per scenario")->capture_default_str();
  app->add_option("--max-iters", a->max_iters, "Most requests per client per scenario")
      ->capture_default_str();
  app->add_option("--clients", a->clients, "Concurrent clients in throughput scenarios")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--out", a->out, "Write results JSON here");
  app->add_flag("--busy-poll", a->busy_poll,
                "Clients poll for replies instead of sleeping (their own wake-up not counted)");
}

void AddHttpBenchFlags(CLI::App* app, bench::HttpBenchArgs* a) {
  app->add_option("--gateway", a->gateway, "Gateway host:port")->capture_default_str();
  app->add_option("--concurrency", a->concurrency, "Concurrent clients, one run each")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--words", a->words, "Words (about tokens) per text")->capture_default_str();
  app->add_option("--seconds", a->seconds, "Time per run")->capture_default_str();
  app->add_option("--warmup-seconds", a->warmup_seconds,
                  "Untimed load at the same concurrency before each run (first-use costs of new "
                  "batch shapes fall there)")
      ->capture_default_str();
  app->add_option("--max-iters", a->max_iters, "Most requests per client per run")
      ->capture_default_str();
  app->add_option("--out", a->out, "Write results JSON here");
}

void AddRerankBenchFlags(CLI::App* app, bench::RerankBenchArgs* a) {
  app->add_option("--model", a->model, "Model folder or hub id ORG/NAME[@REV]")->required();
  app->add_option("--out", a->out, "Write results JSON here");
  app->add_option("--docs", a->docs, "Documents per query (pairs per request)")
      ->capture_default_str();
  app->add_option("--lens", a->lens, "Pair lengths in tokens, one run each")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--clients", a->clients, "Concurrent clients in the throughput runs")
      ->capture_default_str();
  app->add_option("--seconds", a->seconds, "Time per run")->capture_default_str();
  app->add_option("--max-iters", a->max_iters, "Most requests per run (sequential)")
      ->capture_default_str();
  app->add_option("--max-inflight-batches", a->max_inflight, "Batches on the engine at once")
      ->capture_default_str();
  AddEngineFlags(app, &a->engine);
}

}  // namespace petal::cli
