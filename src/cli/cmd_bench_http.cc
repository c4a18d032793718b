// `petal bench-http`: the brief's high-concurrency scenario through a running gateway (about 512
// tokens per text, one text per request, 1/2/4/8/16 concurrent clients); p50/p90/p99/max.
#include <cstdio>
#include <fstream>

#include "cli/bench_engine.h"
#include "cli/command.h"
#include "gateway/http_bench.h"

namespace petal::cli {
namespace {

struct BenchHttpArgs {
  std::string gateway = "127.0.0.1:8080";
  std::vector<int> concurrency = {1, 2, 4, 8, 16};
  int words = 510;
  double seconds = 5;
  int max_iters = 2000;
  std::string out;
};

int RunBenchHttp(const BenchHttpArgs& a) {
  const size_t colon = a.gateway.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "error: --gateway: expected host:port\n");
    return 2;
  }
  gateway::HttpBenchSpec spec;
  spec.host = a.gateway.substr(0, colon);
  spec.port = static_cast<uint16_t>(std::stoi(a.gateway.substr(colon + 1)));
  spec.words = a.words;
  spec.seconds = a.seconds;
  spec.max_iters = a.max_iters;
  std::printf("petal bench-http: gateway %s, %d words per text, one text per request\n",
              a.gateway.c_str(), a.words);
  std::string json = "{\"tool\":\"petal bench-http\",\"gateway\":\"" + a.gateway +
                     "\",\"words\":" + std::to_string(a.words) + ",\"scenarios\":{";
  bool first = true;
  for (int c : a.concurrency) {
    spec.concurrency = c;
    auto r = gateway::RunHttpBench(spec);
    if (!r.ok()) {
      std::fprintf(stderr, "error: %s\n", r.status().ToString().c_str());
      return 1;
    }
    const LatencyStats st = Summarise(r->latency_ms);
    const double rps = r->wall_s > 0 ? st.n / r->wall_s : 0;
    std::printf(
        "  concurrency %-3d p50 %8.3f  p90 %8.3f  p99 %8.3f  max %8.3f ms  %8.1f req/s  (n=%d, "
        "errors=%d)\n",
        c, st.p50, st.p90, st.p99, st.max, rps, st.n, r->errors);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s\"concurrency_%d\":{\"concurrency\":%d,\"p50_ms\":%.4f,\"p90_ms\":%.4f,"
                  "\"p99_ms\":%.4f,\"max_ms\":%.4f,\"mean_ms\":%.4f,\"n\":%d,\"errors\":%d,"
                  "\"req_per_s\":%.2f}",
                  first ? "" : ",", c, c, st.p50, st.p90, st.p99, st.max, st.mean, st.n, r->errors,
                  rps);
    json += buf;
    first = false;
  }
  json += "}}\n";
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    f << json;
    if (!f) {
      std::fprintf(stderr, "error: cannot write %s\n", a.out.c_str());
      return 1;
    }
    std::printf("wrote %s\n", a.out.c_str());
  }
  return 0;
}

std::function<int()> SetupBenchHttp(CLI::App* app) {
  auto a = std::make_shared<BenchHttpArgs>();
  app->add_option("--gateway", a->gateway, "Gateway host:port")->capture_default_str();
  app->add_option("--concurrency", a->concurrency, "Concurrent clients, one run each")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--words", a->words, "Words (about tokens) per text")->capture_default_str();
  app->add_option("--seconds", a->seconds, "Time per run")->capture_default_str();
  app->add_option("--max-iters", a->max_iters, "Most requests per client per run")
      ->capture_default_str();
  app->add_option("--out", a->out, "Write results JSON here");
  return [a] { return RunBenchHttp(*a); };
}

}  // namespace
}  // namespace petal::cli

PETAL_REGISTER_COMMAND(bench_http, "bench-http",
                       "HTTP latency through a running gateway (texts of ~512 tokens, 1..16 "
                       "concurrent clients)",
                       petal::cli::SetupBenchHttp);
