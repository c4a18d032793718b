// libFuzzer target: the body of POST /embed (TEI-style) as the gateway parses it.
#include "request_parse_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petal;
  gateway::EmbedParams p;
  auto err =
      gateway::ParseTeiEmbed({reinterpret_cast<const char*>(data), size}, fuzz::kFuzzMaxInputs, &p);
  fuzz::CheckError(err);
  if (!err) fuzz::CheckInputs(p.inputs);
  return 0;
}
