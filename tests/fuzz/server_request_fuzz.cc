// libFuzzer target: the bytes of a gRPC Embed call, decoded as gRPC does (protobuf) and then
// validated by JobFromRequest against MiniLM's shape. An accepted job must be exactly what the
// engine loop relies on: consistent offsets, every id inside the vocabulary, dims in range.
#include "fuzz_util.h"
#include "server/request.h"

namespace {

petal::ModelConfig MiniLmShape(bool normalize) {
  petal::ModelConfig c;
  c.hidden_size = 384;
  c.num_layers = 6;
  c.num_heads = c.num_kv_heads = 12;
  c.head_dim = 32;
  c.intermediate_size = 1536;
  c.vocab_size = 30522;
  c.max_position_embeddings = 512;
  c.max_seq_length = 256;
  c.normalize = normalize;
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petal;
  static const ModelConfig kConfigs[2] = {MiniLmShape(true), MiniLmShape(false)};
  v1::EmbedRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  const ModelConfig& config = kConfigs[req.request_id().size() % 2];
  auto job = server::JobFromRequest(req, config);
  if (!job.ok()) {
    PETAL_FUZZ_CHECK(job.status().code() == StatusCode::kInvalidArgument);
    return 0;
  }
  PETAL_FUZZ_CHECK(job->num_seqs() == req.lengths_size() && job->num_seqs() > 0);
  PETAL_FUZZ_CHECK(job->cu_seqlens.front() == 0);
  PETAL_FUZZ_CHECK(static_cast<size_t>(job->cu_seqlens.back()) == job->token_ids.size());
  for (int i = 0; i < job->num_seqs(); ++i) {
    const int len = job->cu_seqlens[i + 1] - job->cu_seqlens[i];
    PETAL_FUZZ_CHECK(len > 0 && len <= server::MaxSequenceTokens(config));
  }
  for (int32_t id : job->token_ids) PETAL_FUZZ_CHECK(id >= 0 && id < config.vocab_size);
  PETAL_FUZZ_CHECK(job->format.dims > 0 && job->format.dims <= config.hidden_size);
  return 0;
}
