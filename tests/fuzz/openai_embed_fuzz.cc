// libFuzzer target: the body of POST /v1/embeddings (OpenAI) as the gateway parses it, and the
// model peek (PeekModelField) agreeing with the parse.
#include "request_parse_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petal;
  gateway::EmbedParams p;
  auto err = gateway::ParseOpenAiEmbed({reinterpret_cast<const char*>(data), size},
                                       fuzz::kFuzzMaxInputs, &p);
  fuzz::CheckError(err);
  if (!err) fuzz::CheckInputs(p.inputs);
  // A gateway with several models reads `model` before this parse: it must read the same.
  const std::string peeked = gateway::PeekModelField({reinterpret_cast<const char*>(data), size});
  if (!err) PETAL_FUZZ_CHECK(peeked == p.model);
  return 0;
}
