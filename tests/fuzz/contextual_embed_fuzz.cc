// libFuzzer target: the body of POST /v1/contextualizedembeddings as the gateway parses it.
#include "request_parse_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petal;
  gateway::ContextualParams p;
  auto err = gateway::ParseContextualEmbed({reinterpret_cast<const char*>(data), size}, &p);
  fuzz::CheckError(err);
  if (!err) {
    PETAL_FUZZ_CHECK(!p.documents.empty() && p.documents.size() <= gateway::kMaxContextDocuments);
    size_t total = 0;
    for (const auto& d : p.documents) {
      PETAL_FUZZ_CHECK(!d.empty() && d.size() <= gateway::kMaxChunksPerDocument);
      for (const auto& c : d) PETAL_FUZZ_CHECK(!c.empty());
      total += d.size();
    }
    PETAL_FUZZ_CHECK(total <= gateway::kMaxContextChunks);
  }
  return 0;
}
