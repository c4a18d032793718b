// `petal bench http` (alias `petal bench-http`): the brief's high-concurrency scenario through a
// running gateway (about 512 tokens per text, one text per request, 1/2/4/8/16 concurrent
// clients); p50/p90/p99/max per concurrency.
#include <cstdio>

#include "bench/bench_commands.h"
#include "bench/bench_engine.h"
#include "bench/bench_json.h"
#include "common/git_sha.h"
#include "gateway/http_bench.h"

namespace petal::bench {

int RunBenchHttp(const HttpBenchArgs& a) {
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
  spec.warmup_seconds = a.warmup_seconds;
  spec.max_iters = a.max_iters;
  std::printf("petal bench http: gateway %s, %d words per text, one text per request\n",
              a.gateway.c_str(), a.words);
  std::string json = "{\"tool\":\"petal bench http\",\"sha\":\"" + std::string(PETAL_GIT_SHA) +
                     "\",\"gateway\":" + JsonLiteral(a.gateway) +
                     ",\"words\":" + std::to_string(a.words) +
                     ",\"warmup_seconds\":" + std::to_string(a.warmup_seconds) + ",\"scenarios\":{";
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
        "errors=%d, %d tokens per text)\n",
        c, st.p50, st.p90, st.p99, st.max, rps, st.n, r->errors, r->prompt_tokens);
    // Where the time went, from the answers' Server-Timing headers (p50 of each phase).
    std::string phases;
    if (!r->phases_ms.empty()) {
      std::printf("    server-timing p50 ms:");
      for (const auto& [name, v] : r->phases_ms) {
        const double p50 = Summarise(v).p50;
        std::printf(" %s %.3f", name.c_str(), p50);
        char one[96];
        std::snprintf(one, sizeof one, "%s%s:%.4f", phases.empty() ? "" : ",",
                      JsonLiteral(name).c_str(), p50);
        phases += one;
      }
      std::printf("\n");
    }
    std::fflush(stdout);
    char buf[128];
    std::snprintf(buf, sizeof buf, ",\"errors\":%d,\"req_per_s\":%.2f,\"prompt_tokens\":%d",
                  r->errors, rps, r->prompt_tokens);
    const std::string tail = std::string(buf) + ",\"server_timing_p50_ms\":{" + phases + "}}";
    json += std::string(first ? "" : ",") + "\"concurrency_" + std::to_string(c) +
            "\":{\"concurrency\":" + std::to_string(c) + "," + LatencyJsonFields(st) + tail;
    first = false;
    WriteResultFile(a.out, json + "}}\n", /*quiet=*/true);
  }
  json += "}}\n";
  return WriteResultFile(a.out, json);
}

}  // namespace petal::bench
