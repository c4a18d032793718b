// libFuzzer target: config.json text through ParseModelConfig. An accepted config must describe
// a model the engines can size buffers for: positive shapes and a parameter count computed
// without overflow (UBSan reports signed overflow).
#include <string>

#include "fuzz_util.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petal;
  auto c = ParseModelConfig(std::string(reinterpret_cast<const char*>(data), size));
  if (!c.ok()) return 0;
  PETAL_FUZZ_CHECK(c->hidden_size > 0 && c->num_layers > 0 && c->num_heads > 0);
  PETAL_FUZZ_CHECK(c->num_kv_heads > 0 && c->head_dim > 0 && c->vocab_size > 0);
  PETAL_FUZZ_CHECK(c->max_seq_length >= 0 && c->max_seq_length <= c->max_position_embeddings);
  volatile int64_t params = c->ParameterCount();
  (void)params;
  return 0;
}
