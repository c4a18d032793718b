// libFuzzer target: the bodies of POST /rerank (TEI) and POST /v1/rerank (Cohere / Jina) as the
// gateway parses them (the same bytes through both parsers).
#include "request_parse_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petal;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (bool tei : {true, false}) {
    gateway::RerankParams p;
    auto err = tei ? gateway::ParseTeiRerank(body, fuzz::kFuzzMaxInputs, &p)
                   : gateway::ParseCohereRerank(body, fuzz::kFuzzMaxInputs, &p);
    fuzz::CheckError(err);
    if (!err) {
      PETAL_FUZZ_CHECK(!p.query.empty());
      PETAL_FUZZ_CHECK(!p.documents.empty() && p.documents.size() <= fuzz::kFuzzMaxInputs);
      for (const auto& d : p.documents) PETAL_FUZZ_CHECK(!d.empty());
    }
  }
  return 0;
}
