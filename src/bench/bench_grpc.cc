// `petal bench grpc` (alias `petal client bench`): the brief's pre-tokenized scenarios against a
// running server. Latency scenarios use one strictly sequential client; throughput scenarios
// `--clients` concurrent ones, each with its own connection.
#include <cstdio>
#include <sstream>

#include "bench/bench_commands.h"
#include "bench/bench_engine.h"
#include "bench/bench_json.h"
#include "common/git_sha.h"
#include "server/bench_client.h"
#include "wire/client.h"

namespace petal::bench {

int RunBenchGrpc(const GrpcBenchArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  };
  wire::EmbedClient probe(a.server);
  auto info = probe.ModelInfo();
  if (!info.ok()) return fail(info.status());
  std::ostringstream js;
  js << "{\"tool\":\"petal bench grpc\",\"sha\":\"" << PETAL_GIT_SHA
     << "\",\"server\":" << JsonLiteral(a.server) << ",\"model\":" << JsonLiteral(info->model_dir())
     << ",\"backend\":" << JsonLiteral(info->backend())
     << ",\"max_batch_tokens\":" << info->max_batch_tokens()
     << ",\"max_batch_seqs\":" << info->max_batch_seqs() << ",\"scenarios\":{";
  std::printf("petal bench grpc: server %s, model %s, backend %s\n", a.server.c_str(),
              info->model_dir().c_str(), info->backend().c_str());
  bool first = true;
  for (const auto& sc : StandardScenarios(a.scenarios)) {
    if (static_cast<uint32_t>(sc.len) > info->max_tokens()) {
      std::printf("  %-22s skipped: %d tokens > model maximum %u\n", sc.name.c_str(), sc.len,
                  info->max_tokens());
      continue;
    }
    server::GrpcBenchSpec spec;
    spec.seqs = sc.seqs;
    spec.len = sc.len;
    spec.clients = sc.throughput ? a.clients : 1;
    spec.seconds = a.seconds;
    spec.max_iters = a.max_iters;
    spec.vocab = static_cast<int>(info->vocab_size());
    spec.busy_poll = a.busy_poll;
    auto r = server::RunGrpcBench(a.server, spec);
    if (!r.ok()) return fail(r.status().WithContext(sc.name));
    const LatencyStats st = Summarise(r->latency_ms);
    const LatencyStats sv = Summarise(r->server_ms);
    const double eps = r->wall_s > 0 ? r->embeddings / r->wall_s : 0;
    js << (first ? "\"" : ",\"") << sc.name << "\":{\"seqs\":" << sc.seqs << ",\"len\":" << sc.len
       << ",\"clients\":" << spec.clients << "," << LatencyJsonFields(st)
       << ",\"server_p50_ms\":" << sv.p50 << ",\"emb_per_s\":" << eps
       << ",\"seconds\":" << r->wall_s << ",\"busy_poll\":" << (a.busy_poll ? "true" : "false")
       << "}";
    first = false;
    WriteResultFile(a.out, js.str() + "}}\n", /*quiet=*/true);
    std::printf(
        "  %-22s p50 %8.3f  p90 %8.3f  p99 %8.3f  max %8.3f ms  server p50 %8.3f ms  %10.1f emb/s"
        "  (n=%d, %d client%s)\n",
        sc.name.c_str(), st.p50, st.p90, st.p99, st.max, sv.p50, eps, st.n, spec.clients,
        spec.clients == 1 ? "" : "s");
    std::fflush(stdout);
  }
  js << "}}\n";
  return WriteResultFile(a.out, js.str());
}

}  // namespace petal::bench
