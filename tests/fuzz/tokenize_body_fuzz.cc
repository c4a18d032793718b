// libFuzzer target: the body of POST /tokenize as the gateway parses it.
#include "request_parse_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petal;
  gateway::TokenizeParams p;
  auto err =
      gateway::ParseTokenize({reinterpret_cast<const char*>(data), size}, fuzz::kFuzzMaxInputs, &p);
  fuzz::CheckError(err);
  if (!err) PETAL_FUZZ_CHECK(!p.texts.empty() && p.texts.size() <= fuzz::kFuzzMaxInputs);
  if (!err && !p.batch) PETAL_FUZZ_CHECK(p.texts.size() == 1);
  return 0;
}
