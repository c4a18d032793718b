// Where `petal embed --input` sends its rows: local engines (one thread and engine per device,
// so a CUDA engine is bound to that thread's device) or servers through the gateway's
// ReplicaSet (the gateway's balancing, windows and retries). A local engine keeps the device
// busy across calls: while one batch computes, the next (of the same or the next call) is
// already enqueued. Thread-safety: Embed() may be called from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bulk/embed_dataset.h"
#include "common/status.h"
#include "wire/codec.h"

namespace petal::bulk {

using Seqs = std::vector<std::vector<int32_t>>;

// Rows encoded in the output format (wire::BytesPerRow each) and, for int8, their scales.
struct Encoded {
  std::string data;
  std::vector<float> scales;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Waits until the backend can embed: local engines loaded, or a server answering (a minute).
  virtual Status Ready() = 0;
  // Embeds `seqs` (token ids, special tokens included) into rows of the output format.
  virtual StatusOr<Encoded> Embed(const Seqs& seqs) = 0;
};

// Starts the backend for `o` (engines start loading at once; Ready() waits for them).
StatusOr<std::unique_ptr<Backend>> StartBackend(const DatasetOptions& o,
                                                const wire::OutputFormat& format);

}  // namespace petal::bulk
