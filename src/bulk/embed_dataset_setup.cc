// The option helpers of embed_dataset.h that the subcommand calls before RunEmbedDataset.
#include <algorithm>
#include <cstdio>

#include "bulk/embed_dataset.h"
#include "engine/cuda/cuda_engine.h"

namespace petal::bulk {

bool ParseShard(const std::string& text, DatasetOptions* opts) {
  int i = -1, n = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%d/%d%c", &i, &n, &tail) != 2 || n < 1 || i < 0 || i >= n) {
    return false;
  }
  opts->shard_index = i;
  opts->shard_count = n;
  return true;
}

void SizeEngineBatches(DatasetOptions* opts, int max_batch_tokens, int max_batch_texts) {
  const bool gpu = !opts->fake_engine && (opts->engine.backend == "cuda" ||
                                          (opts->engine.backend == "auto" && CudaAvailable()));
  opts->max_batch_tokens =
      max_batch_tokens > 0 ? std::max(max_batch_tokens, 16384) : (gpu ? 131072 : 16384);
  opts->engine.cuda.max_tokens = opts->max_batch_tokens;
  opts->engine.cuda.max_seqs = max_batch_texts > 0
                                   ? std::max(max_batch_texts, 512)
                                   : std::max(512, std::min(opts->batch_rows, 4096));
}

}  // namespace petal::bulk
