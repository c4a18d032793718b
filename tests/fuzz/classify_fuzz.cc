// libFuzzer target: the bodies of POST /predict (TEI) and POST /classify (vLLM) as the gateway
// parses them (the same bytes through both parsers). A success holds 1..max_inputs non-empty
// inputs, with a second text exactly where an input is a pair.
#include "request_parse_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petal;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (bool tei : {true, false}) {
    gateway::ClassifyParams p;
    auto err = tei ? gateway::ParsePredict(body, fuzz::kFuzzMaxInputs, &p)
                   : gateway::ParseClassify(body, fuzz::kFuzzMaxInputs, &p);
    fuzz::CheckError(err);
    if (err) continue;
    PETAL_FUZZ_CHECK(!p.texts.empty() && p.texts.size() <= fuzz::kFuzzMaxInputs);
    PETAL_FUZZ_CHECK(p.second.size() == p.texts.size() && p.is_pair.size() == p.texts.size());
    PETAL_FUZZ_CHECK(tei || !p.has_pairs);
    PETAL_FUZZ_CHECK(!p.single || p.texts.size() == 1);
    for (size_t i = 0; i < p.texts.size(); ++i) {
      PETAL_FUZZ_CHECK(!p.texts[i].empty());
      PETAL_FUZZ_CHECK(p.is_pair[i] ? !p.second[i].empty() : p.second[i].empty());
    }
  }
  return 0;
}
