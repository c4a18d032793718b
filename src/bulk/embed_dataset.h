// `petal embed --input FILE --output FILE`: embeds a dataset (JSON Lines or Parquet, a text and
// an id field) into Parquet (`id`, `embedding` as a fixed-size list, `scale` for int8; the model
// and options in the file metadata) or .npy + ids, streaming with bounded memory. Rows are read,
// tokenized and embedded by tasks running side by side and leave in input order. The output is
// written once, as rows arrive; alongside, work is cut into fixed parts of input rows, each made
// durable (fsync + rename) in raw form and recorded in OUTPUT.parts/manifest.json, so `--resume`
// after a kill rebuilds the output from the finished parts and continues at the first unfinished
// one, with no lost and no duplicated rows. `--shard I/N` takes the I-th of N contiguous row
// ranges. Embeds on local engines (dataset_backend.h: one per device) or on servers through the
// gateway's ReplicaSet. Thread-safety: RunEmbedDataset is called once, from main.
#pragma once

#include <string>
#include <vector>

#include "engine/engine_factory.h"

namespace petal::bulk {

struct DatasetOptions {
  std::string model_dir;
  std::string input, output;
  std::string text_field = "text";
  std::string id_field = "id";
  std::string on_error = "fail";  // fail | skip
  int shard_index = 0, shard_count = 1;
  bool resume = false;
  bool truncate = false;  // cut texts past the model length instead of reporting them
  int64_t rows_per_part = 100000;
  int batch_rows = 1024;  // rows read, tokenized and embedded per task
  int threads = 0;        // tokenizer/embedding tasks in flight; 0 = hardware threads
  std::string dtype = "float32";
  int dimensions = 0;
  std::string prompt_name;
  std::vector<std::string> servers;  // empty: local engines
  std::vector<int> devices;          // local CUDA devices (--gpus); empty: opts.engine.cuda.device
  EngineOptions engine;
  int max_batch_tokens = 16384;  // per engine call
  bool fake_engine = false;      // the FakeEngine (no compute): tests and host-path benchmarks
  bool progress = true;
};

// `--shard I/N` (0 <= I < N) into opts->shard_index and shard_count; false for any other text.
bool ParseShard(const std::string& text, DatasetOptions* opts);

// The engine batch limits of a run, into opts->max_batch_tokens and opts->engine.cuda: given
// --max-batch-tokens / --max-batch-texts (0 = not given) are raised to at least 16384 tokens and
// 512 sequences; else large batches keep the device busy with fewer, bigger steps (131072 tokens
// on CUDA, 16384 on the CPU; batch_rows sequences clamped to 512..4096). Call it once the
// backend, devices and batch_rows are set.
void SizeEngineBatches(DatasetOptions* opts, int max_batch_tokens, int max_batch_texts);

// Returns the process exit code on failure (1, or 2 for usage). On success it ends the process
// itself (exit status 0) once the output is durable, without tearing the engines down.
int RunEmbedDataset(const DatasetOptions& opts);

}  // namespace petal::bulk
