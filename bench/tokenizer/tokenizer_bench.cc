// Single-thread tokenizer latency/throughput: encodes every text of a JSON Lines file once to
// warm up, then once more timing each text, and prints one JSON object with MB/s and per-text
// p50/p99 latency. Driven by bench/tokenizer/run_bench.py, which times HF `tokenizers` on the
// same texts.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/json_text.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tokenizer_bench TOKENIZER_JSON TEXTS_JSONL [--no-special]\n");
    return 2;
  }
  const bool no_special = argc > 3 && std::string(argv[3]) == "--no-special";
  auto tok = petal::Tokenizer::FromFile(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> texts;
  std::ifstream in(argv[2]);
  std::string line, text;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (!petal::DecodeJsonStringLine(line, &text).ok()) return 1;
    texts.push_back(text);
  }
  petal::EncodeOptions opts;
  opts.add_special_tokens = !no_special;
  petal::EncodeScratch scratch;
  std::vector<int32_t> ids;
  size_t bytes = 0, tokens = 0;
  for (const auto& t : texts) {  // Warm-up: caches, scratch capacity, page faults.
    if (!(*tok)->EncodeInto(t, opts, &scratch, &ids).ok()) return 1;
    bytes += t.size();
    tokens += ids.size();
  }
  std::vector<double> us(texts.size());
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  for (size_t i = 0; i < texts.size(); ++i) {
    auto t0 = Clock::now();
    (void)(*tok)->EncodeInto(texts[i], opts, &scratch, &ids);
    us[i] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) { return us[std::min(us.size() - 1, size_t(p * us.size()))]; };
  std::printf(
      "{\"texts\": %zu, \"bytes\": %zu, \"tokens\": %zu, \"total_s\": %.6f, \"mb_per_s\": %.3f, "
      "\"p50_us\": %.3f, \"p99_us\": %.3f}\n",
      texts.size(), bytes, tokens, total_s, bytes / total_s / 1e6, pct(0.50), pct(0.99));
  return 0;
}
