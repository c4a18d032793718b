#include "server/bench_client.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>

#include "wire/client.h"

namespace petal::server {

StatusOr<GrpcBenchResult> RunGrpcBench(const std::string& address, const GrpcBenchSpec& spec) {
  using Clock = std::chrono::steady_clock;
  GrpcBenchResult total;
  std::mutex mu;
  Status first_error;
  // All clients start timing together, after everyone's warm-up.
  std::barrier start_line(spec.clients);
  Clock::time_point timed_start{}, timed_end{};
  auto client_main = [&](int c) {
    wire::EmbedClient client(address);
    // A few distinct requests built up front, so id generation is not timed.
    std::mt19937 rng(1000 + c);
    std::uniform_int_distribution<int> tok(0, spec.vocab - 1);
    std::vector<v1::EmbedRequest> reqs;
    for (int r = 0; r < 4; ++r) {
      std::vector<std::vector<int32_t>> seqs(spec.seqs, std::vector<int32_t>(spec.len));
      for (auto& s : seqs) {
        for (auto& t : s) t = tok(rng);
      }
      reqs.push_back(wire::MakeEmbedRequest(seqs));
    }
    for (int i = 0; i < spec.warmup; ++i) {
      auto r = spec.busy_poll ? client.EmbedBusyPoll(reqs[i % reqs.size()])
                              : client.Embed(reqs[i % reqs.size()]);
      if (!r.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = r.status();
        start_line.arrive_and_drop();
        return;
      }
    }
    start_line.arrive_and_wait();
    {
      std::lock_guard<std::mutex> lock(mu);
      if (timed_start == Clock::time_point{}) timed_start = Clock::now();
    }
    std::vector<double> lat, srv;
    int64_t embeddings = 0;
    const auto end = Clock::now() + std::chrono::duration<double>(spec.seconds);
    for (int i = 0; i < spec.max_iters && Clock::now() < end; ++i) {
      const auto t0 = Clock::now();
      auto r = spec.busy_poll ? client.EmbedBusyPoll(reqs[i % reqs.size()])
                              : client.Embed(reqs[i % reqs.size()]);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!r.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = r.status();
        return;
      }
      lat.push_back(ms);
      srv.push_back(r->total_us() / 1000.0);
      embeddings += spec.seqs;
    }
    std::lock_guard<std::mutex> lock(mu);
    timed_end = std::max(timed_end, Clock::now());
    total.latency_ms.insert(total.latency_ms.end(), lat.begin(), lat.end());
    total.server_ms.insert(total.server_ms.end(), srv.begin(), srv.end());
    total.embeddings += embeddings;
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < spec.clients; ++c) threads.emplace_back(client_main, c);
  for (auto& t : threads) t.join();
  if (!first_error.ok()) return first_error;
  total.wall_s = std::chrono::duration<double>(timed_end - timed_start).count();
  return total;
}

}  // namespace petal::server
