// petal_cpu_bench: CPU engine throughput on a BERT-family model (default all-MiniLM-L6-v2).
// Builds ragged batches of random-id sequences of a fixed length ([CLS] ... [SEP]), warms up,
// runs for a fixed time, prints a table and writes bench/results/cpu-<model>-<date>-<sha>.json
// with the git SHA, machine, threads, texts/s and tokens/s. Single-threaded driver; the engine
// itself uses `--threads` BLAS/OpenMP threads.
#include <omp.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
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

#include <simdjson.h>

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

// User + system CPU seconds this process has used, all threads.
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double Cosine(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return aa == 0 && bb == 0 ? 1.0 : ab / std::sqrt(aa * bb + 1e-300);
}

// Fidelity on a golden file (tests/fixtures/golden_<model>.json: sentence-transformers' own
// embeddings of the golden texts, with their token ids): every case one text per batch, as the
// goldens were made. Returns {worst cosine vs the goldens, vs the fp32 reference engine, cases}.
struct Fidelity {
  double vs_golden = 1, vs_reference = 1;
  int cases = 0;
  std::string worst_case;
};
bool GoldenFidelity(petal::Engine& engine, petal::Engine& ref, const std::string& path,
                    Fidelity* f) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.load(path).get(doc) != simdjson::SUCCESS) return false;
  // Two layouts: {"cases": [{"id", "ids", "embedding"}]} (sentence-transformers goldens) or
  // {"sequences": [[ids]], "embeddings": [[floats]]} (the Qwen3 goldens).
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::vector<float>> embs;
  std::vector<std::string> names;
  auto floats = [](simdjson::dom::array a) {
    std::vector<float> v;
    for (auto x : a) v.push_back(static_cast<float>(double(x)));
    return v;
  };
  auto ints = [](simdjson::dom::array a) {
    std::vector<int32_t> v;
    for (auto x : a) v.push_back(static_cast<int32_t>(int64_t(x)));
    return v;
  };
  simdjson::dom::array cases, sq, em;
  if (doc["cases"].get_array().get(cases) == simdjson::SUCCESS) {
    for (simdjson::dom::element c : cases) {
      simdjson::dom::array ids, emb;
      if (c["ids"].get_array().get(ids) || c["embedding"].get_array().get(emb)) return false;
      seqs.push_back(ints(ids));
      embs.push_back(floats(emb));
      names.emplace_back(std::string_view(c["id"]));
    }
  } else if (doc["sequences"].get_array().get(sq) == simdjson::SUCCESS &&
             doc["embeddings"].get_array().get(em) == simdjson::SUCCESS) {
    for (auto v : sq) seqs.push_back(ints(v.get_array()));
    for (auto v : em) embs.push_back(floats(v.get_array()));
    for (size_t i = 0; i < seqs.size(); ++i) names.push_back("sequence " + std::to_string(i));
  } else {
    return false;
  }
  if (seqs.size() != embs.size()) return false;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::vector<int32_t>& tok = seqs[i];
    const std::vector<float>& want = embs[i];
    if (tok.empty()) continue;
    auto got = engine.Embed(petal::Batch::FromSequences({tok}));
    auto r = ref.Embed(petal::Batch::FromSequences({tok}));
    if (!got.ok() || !r.ok() || got->dim != static_cast<int>(want.size())) return false;
    const double g = Cosine(got->row(0), want.data(), got->dim);
    const double rr = Cosine(got->row(0), r->row(0), got->dim);
    if (g < f->vs_golden) f->worst_case = names[i];
    f->vs_golden = std::min(f->vs_golden, g);
    f->vs_reference = std::min(f->vs_reference, rr);
    ++f->cases;
  }
  return true;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU engine throughput benchmark"};
  std::string model_dir = "models/all-MiniLM-L6-v2", out_dir = "bench/results";
  int threads = 2, blas_threads = 0, batch_size = 32, seq_len = 128, warmup = 2, min_batches = 3;
  double seconds = 10;
  bool write = true;
  std::string precision = "auto", golden;
  app.add_option("--model", model_dir, "Model folder")->capture_default_str();
  app.add_option("--threads", threads, "BLAS and OpenMP threads")->capture_default_str();
  app.add_option("--blas-threads", blas_threads, "BLAS threads if not --threads");
  app.add_option("--batch", batch_size, "Sequences per batch")->capture_default_str();
  app.add_option("--seq-len", seq_len, "Tokens per sequence")->capture_default_str();
  app.add_option("--seconds", seconds, "Timed run length")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed batches first")->capture_default_str();
  app.add_option("--min-batches", min_batches, "Timed batches at least, past --seconds")
      ->capture_default_str();
  app.add_option("--out-dir", out_dir, "Where the result JSON goes")->capture_default_str();
  std::string out_file;
  app.add_option("--out", out_file, "Result JSON path (overrides --out-dir's file name)");
  app.add_flag("!--no-write", write, "Print only; write no result file");
  app.add_option("--precision", precision, "CPU engine path: auto, fp32, int8, bf16 or reference")
      ->capture_default_str();
  app.add_option("--golden", golden,
                 "Also measure fidelity on this golden file (vs its embeddings and vs the fp32 "
                 "reference engine)");
  CLI11_PARSE(app, argc, argv);

  if (blas_threads <= 0) blas_threads = threads;
  openblas_set_num_threads(blas_threads);
  omp_set_num_threads(threads);
  auto engine = petal::CpuEngine::Load(model_dir, {.precision = precision, .threads = threads});
  if (!engine.ok()) {
    std::fprintf(stderr, "cpu_bench: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  const petal::ModelConfig& c = (*engine)->config();
  if (seq_len < 2 || seq_len > c.max_position_embeddings) {
    std::fprintf(stderr, "cpu_bench: --seq-len must be in [2, %d]\n", c.max_position_embeddings);
    return 1;
  }
  Fidelity fid;
  if (!golden.empty()) {
    auto ref = petal::CpuEngine::Load(model_dir, {.precision = "reference", .threads = threads});
    if (!ref.ok() || !GoldenFidelity(**engine, **ref, golden, &fid)) {
      std::fprintf(stderr, "cpu_bench: could not measure fidelity on %s\n", golden.c_str());
      return 1;
    }
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> id(std::min(1000, c.vocab_size / 2), c.vocab_size - 1);
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
  const double cpu_start = CpuSeconds();
  double elapsed = 0;
  while (elapsed < seconds || batch_ms.size() < static_cast<size_t>(std::max(1, min_batches))) {
    const auto t0 = Clock::now();
    auto e = (*engine)->Embed(batch);
    const auto t1 = Clock::now();
    if (!e.ok()) return 1;
    batch_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    elapsed = std::chrono::duration<double>(t1 - start).count();
  }
  // On a shared machine the threads may get less than `threads` cores; CPU time says how much.
  const double cpu_s = CpuSeconds() - cpu_start;
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
  std::printf("%-22s %s\n", "engine", (*engine)->Describe().c_str());
  std::printf("%-22s %zu in %.2f s\n", "batches", batch_ms.size(), elapsed);
  std::printf("%-22s %.1f\n", "texts/s", texts_per_s);
  if (fid.cases > 0) {
    std::printf("%-22s worst cosine %.6f vs goldens (%s), %.6f vs fp32 reference (%d texts)\n",
                "fidelity", fid.vs_golden, fid.worst_case.c_str(), fid.vs_reference, fid.cases);
  }
  std::printf("%-22s %.0f\n", "tokens/s", tokens_per_s);
  std::printf("%-22s %.1f / %.1f\n", "batch ms p50 / p90", p50, p90);
  std::printf("%-22s %.2f cores (%.1f texts per CPU-second)\n", "CPU used", cpu_s / elapsed,
              texts / cpu_s);
  std::printf("%-22s %s -> %s\n", "load average", load_before.c_str(), LoadAverage().c_str());
  if (!write) return 0;

  // The result file: one flat JSON object (strings are escaped; numbers printed as given).
  std::string json = "{\n";
  auto add = [&json](const std::string& key, const std::string& value, bool quote) {
    std::string v;
    for (char ch : value) {
      if (ch == '"' || ch == '\\') v += '\\';
      if (static_cast<unsigned char>(ch) >= 0x20) v += ch;
    }
    json += (json.size() > 2 ? ",\n  \"" : "  \"") + key + "\": " + (quote ? "\"" + v + "\"" : v);
  };
  auto fixed = [](double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
    return std::string(buf);
  };
  add("benchmark", "cpu_engine_throughput", true);
  add("model", model_name, true);
  add("git_sha", sha, true);
  add("git_dirty", dirty ? "true" : "false", false);
  add("date_utc", stamp, true);
  add("cpu", CpuModelName(), true);
  add("logical_cpus", std::to_string(std::thread::hardware_concurrency()), false);
  add("load_average_before", load_before, true);
  add("load_average_after", LoadAverage(), true);
  add("threads", std::to_string(threads), false);
  add("blas_threads", std::to_string(blas_threads), false);
  add("omp_wait_policy", wait_policy, true);
  add("precision", (*engine)->path(), true);
  add("engine", (*engine)->Describe(), true);
  add("batch_size", std::to_string(batch_size), false);
  add("seq_len", std::to_string(seq_len), false);
  add("batches", std::to_string(batch_ms.size()), false);
  add("seconds", fixed(elapsed, 3), false);
  add("texts_per_s", fixed(texts_per_s, 2), false);
  add("tokens_per_s", fixed(tokens_per_s, 1), false);
  add("cpu_cores_used", fixed(cpu_s / elapsed, 3), false);
  add("texts_per_cpu_s", fixed(texts / cpu_s, 2), false);
  add("batch_ms_p50", fixed(p50, 2), false);
  add("batch_ms_p90", fixed(p90, 2), false);
  if (fid.cases > 0) {
    add("golden", golden, true);
    add("golden_cases", std::to_string(fid.cases), false);
    add("worst_cosine_vs_golden", fixed(fid.vs_golden, 6), false);
    add("worst_case_vs_golden", fid.worst_case, true);
    add("worst_cosine_vs_reference", fixed(fid.vs_reference, 6), false);
  }
  add("command", command, true);
  json += "\n}\n";
  std::filesystem::create_directories(out_dir);
  std::string lower = model_name;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower.rfind("all-", 0) == 0) lower = lower.substr(4);  // all-MiniLM-L6-v2 -> minilm-l6-v2
  const std::string path = !out_file.empty() ? out_file
                                             : out_dir + "/cpu-" + lower + "-" + date + "-" +
                                                   (sha.empty() ? "nogit" : sha) + ".json";
  std::ofstream(path) << json;
  std::printf("%-22s %s\n", "wrote", path.c_str());
  return 0;
}
