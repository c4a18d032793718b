// petal_cpu_bench: CPU engine throughput on a BERT-family model (default all-MiniLM-L6-v2).
// Builds ragged batches of random-id sequences of a fixed length ([CLS] ... [SEP]), warms up,
// runs for a fixed time, prints a table and writes bench/results/cpu-<model>-<date>-<sha>.json
// with the git SHA, machine, threads, texts/s and tokens/s. Single-threaded driver; the engine
// itself uses `--threads` BLAS/OpenMP threads.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/cpu_engine.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace {

// First line of a shell command's output, trimmed; "" if it fails.
std::string Shell(const char* cmd) {
  std::string out;
  if (FILE* p = popen(cmd, "r")) {
    char buf[256];
    if (std::fgets(buf, sizeof(buf), p)) out = buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string CpuModelName() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU engine throughput benchmark"};
  std::string model_dir = "models/all-MiniLM-L6-v2", out_dir = "bench/results";
  int threads = 2, blas_threads = 0, batch_size = 32, seq_len = 128, warmup = 2;
  double seconds = 10;
  bool write = true;
  app.add_option("--model", model_dir, "Model folder")->capture_default_str();
  app.add_option("--threads", threads, "BLAS and OpenMP threads")->capture_default_str();
  app.add_option("--blas-threads", blas_threads, "BLAS threads if not --threads");
  app.add_option("--batch", batch_size, "Sequences per batch")->capture_default_str();
  app.add_option("--seq-len", seq_len, "Tokens per sequence")->capture_default_str();
  app.add_option("--seconds", seconds, "Timed run length")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed batches first")->capture_default_str();
  app.add_option("--out-dir", out_dir, "Where the result JSON goes")->capture_default_str();
  app.add_flag("!--no-write", write, "Print only; write no result file");
  CLI11_PARSE(app, argc, argv);

  if (blas_threads <= 0) blas_threads = threads;
  openblas_set_num_threads(blas_threads);
  omp_set_num_threads(threads);
  auto engine = petal::CpuEngine::Load(model_dir);
  if (!engine.ok()) {
    std::fprintf(stderr, "cpu_bench: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  const petal::ModelConfig& c = (*engine)->config();
  if (seq_len < 2 || seq_len > c.max_position_embeddings) {
    std::fprintf(stderr, "cpu_bench: --seq-len must be in [2, %d]\n", c.max_position_embeddings);
    return 1;
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> id(1000, c.vocab_size - 1);
  petal::Batch batch;
  for (int s = 0; s < batch_size; ++s) {
    std::vector<int32_t> ids(seq_len);
    for (auto& t : ids) t = id(rng);
    ids.front() = 101;
    ids.back() = 102;
    batch.Add(ids);
  }

  const std::string load_before = LoadAverage();
  for (int i = 0; i < warmup; ++i) {
    if (auto e = (*engine)->Embed(batch); !e.ok()) {
      std::fprintf(stderr, "cpu_bench: %s\n", e.status().ToString().c_str());
      return 1;
    }
  }
  using Clock = std::chrono::steady_clock;
  std::vector<double> batch_ms;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds || batch_ms.size() < 3) {
    const auto t0 = Clock::now();
    auto e = (*engine)->Embed(batch);
    const auto t1 = Clock::now();
    if (!e.ok()) return 1;
    batch_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    elapsed = std::chrono::duration<double>(t1 - start).count();
  }
  const double texts = static_cast<double>(batch_ms.size()) * batch_size;
  const double texts_per_s = texts / elapsed, tokens_per_s = texts_per_s * seq_len;
  const double p50 = Percentile(batch_ms, 0.5), p90 = Percentile(batch_ms, 0.9);

  const std::string sha = Shell("git rev-parse --short=12 HEAD 2>/dev/null");
  const bool dirty = !Shell("git status --porcelain --untracked-files=no 2>/dev/null").empty();
  char date[32], stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y%m%d", std::gmtime(&now));
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  const std::string model_name = std::filesystem::path(model_dir).filename().string();

  std::printf("%-22s %s\n", "model", model_dir.c_str());
  std::printf("%-22s %s (%u logical CPUs)\n", "machine", CpuModelName().c_str(),
              std::thread::hardware_concurrency());
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "";
  std::printf("%-22s %d (BLAS %d, OMP_WAIT_POLICY=%s)\n", "threads", threads, blas_threads,
              wait_policy);
  std::printf("%-22s %d x %d tokens\n", "batch", batch_size, seq_len);
  std::printf("%-22s %zu in %.2f s\n", "batches", batch_ms.size(), elapsed);
  std::printf("%-22s %.1f\n", "texts/s", texts_per_s);
  std::printf("%-22s %.0f\n", "tokens/s", tokens_per_s);
  std::printf("%-22s %.1f / %.1f\n", "batch ms p50 / p90", p50, p90);
  std::printf("%-22s %s -> %s\n", "load average", load_before.c_str(), LoadAverage().c_str());
  if (!write) return 0;

  char json[2048];
  std::snprintf(
      json, sizeof(json),
      "{\n  \"benchmark\": \"cpu_engine_throughput\",\n  \"model\": \"%s\",\n"
      "  \"git_sha\": \"%s\",\n  \"git_dirty\": %s,\n  \"date_utc\": \"%s\",\n"
      "  \"machine\": {\"cpu\": \"%s\", \"logical_cpus\": %u, \"load_average_before\": \"%s\", "
      "\"load_average_after\": \"%s\"},\n"
      "  \"threads\": %d,\n  \"blas_threads\": %d,\n  \"omp_wait_policy\": \"%s\",\n  "
      "\"batch_size\": %d,\n  \"seq_len\": %d,\n  \"batches\": %zu,\n"
      "  \"seconds\": %.3f,\n  \"texts_per_s\": %.2f,\n  \"tokens_per_s\": %.1f,\n"
      "  \"batch_ms_p50\": %.2f,\n  \"batch_ms_p90\": %.2f,\n  \"command\": \"%s\"\n}\n",
      model_name.c_str(), sha.c_str(), dirty ? "true" : "false", stamp, CpuModelName().c_str(),
      std::thread::hardware_concurrency(), load_before.c_str(), LoadAverage().c_str(), threads,
      blas_threads, wait_policy, batch_size, seq_len, batch_ms.size(), elapsed, texts_per_s,
      tokens_per_s, p50, p90, command.c_str());
  std::filesystem::create_directories(out_dir);
  std::string lower = model_name;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower.rfind("all-", 0) == 0) lower = lower.substr(4);  // all-MiniLM-L6-v2 -> minilm-l6-v2
  const std::string path =
      out_dir + "/cpu-" + lower + "-" + date + "-" + (sha.empty() ? "nogit" : sha) + ".json";
  std::ofstream(path) << json;
  std::printf("%-22s %s\n", "wrote", path.c_str());
  return 0;
}
