// libFuzzer target: the body of POST /v1/score as the gateway parses it.
#include "request_parse_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petal;
  gateway::ScoreParams p;
  auto err =
      gateway::ParseScore({reinterpret_cast<const char*>(data), size}, fuzz::kFuzzMaxInputs, &p);
  fuzz::CheckError(err);
  if (!err) PETAL_FUZZ_CHECK(!p.documents.empty() && p.documents.size() <= fuzz::kFuzzMaxInputs);
  return 0;
}
