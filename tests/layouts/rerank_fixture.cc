#include "rerank_fixture.h"

#include <simdjson.h>

#include <cmath>

#include "common/file_util.h"

namespace petal::testing {
namespace {

constexpr const char* kDir = "tests/fixtures/rerank";

std::vector<int32_t> Ints(simdjson::dom::array a) {
  std::vector<int32_t> v;
  for (auto x : a) v.push_back(static_cast<int32_t>(x.get_int64().value_unsafe()));
  return v;
}

double Num(simdjson::dom::element e) {
  double d = 0;
  if (e.get_double().get(d)) d = static_cast<double>(e.get_int64().value_unsafe());
  return d;
}

}  // namespace

StatusOr<RerankManifest> LoadRerankManifest() {
  const std::string path = SourceDir() + "/" + kDir + "/rerank.json";
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return InvalidArgument(path + " is not JSON");
  RerankManifest m;
  std::string_view v;
  if (doc["seed"].get_uint64().get(m.seed)) return InvalidArgument(path + ": no seed");
  if (!doc["query"].get_string().get(v)) m.query = v;
  simdjson::dom::array docs, fixtures;
  if (doc["documents"].get_array().get(docs) || doc["fixtures"].get_array().get(fixtures)) {
    return InvalidArgument(path + ": no documents or fixtures");
  }
  for (auto d : docs) m.documents.emplace_back(d.get_string().value_unsafe());
  for (auto f : fixtures) {
    RerankFixture fx;
    fx.spec.fixtures_dir = kDir;
    if (!f["name"].get_string().get(v)) fx.spec.name = v;
    if (!f["tokenizer"].get_string().get(v)) fx.spec.tokenizer_dir = v;
    if (!f["dtype"].get_string().get(v)) fx.spec.dtype = v;
    if (!f["reference"].get_string().get(v)) fx.reference = v;
    double std = 0;
    if (!f["weight_std"].get_double().get(std)) fx.spec.weight_std = std;
    int64_t n = 0;
    if (!f["max_length"].get_int64().get(n)) fx.max_length = static_cast<int>(n);
    m.fixtures.push_back(fx);
  }
  return m;
}

StatusOr<RerankGolden> LoadRerankGolden(const std::string& name, const std::string& suffix) {
  const std::string path =
      SourceDir() + "/" + kDir + "/golden_" + name + (suffix.empty() ? "" : "_" + suffix) + ".json";
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return InvalidArgument(path + " is not JSON");
  RerankGolden g;
  simdjson::dom::object sums;
  if (!doc["tensor_sums"].get_object().get(sums)) {
    for (auto [k, v] : sums) g.tensor_sums[std::string(k)] = Num(v);
  }
  int64_t id = -1;
  if (!doc["yes_token_id"].get_int64().get(id)) g.yes_token_id = static_cast<int>(id);
  if (!doc["no_token_id"].get_int64().get(id)) g.no_token_id = static_cast<int>(id);
  simdjson::dom::array cases;
  if (doc["cases"].get_array().get(cases)) return InvalidArgument(path + ": no cases");
  for (auto c : cases) {
    RerankCase rc;
    std::string_view v;
    if (!c["document"].get_string().get(v)) rc.document = v;
    simdjson::dom::array ids, types, logits;
    if (c["ids"].get_array().get(ids) || c["type_ids"].get_array().get(types) ||
        c["logits"].get_array().get(logits)) {
      return InvalidArgument(path + ": a case without ids, type_ids or logits");
    }
    rc.ids = Ints(ids);
    rc.type_ids = Ints(types);
    for (auto x : logits) rc.logits.push_back(static_cast<float>(Num(x)));
    rc.score = Num(c["score"].value_unsafe());
    g.cases.push_back(std::move(rc));
  }
  return g;
}

StatusOr<std::string> BuildRerankFolder(const RerankManifest& m, const RerankFixture& fx,
                                        const RerankGolden& golden) {
  static std::map<std::string, std::string> built;
  auto it = built.find(fx.spec.name);
  if (it != built.end()) return it->second;
  const std::string dir = LayoutTempDir(fx.spec.name);
  std::map<std::string, double> sums;
  PETAL_RETURN_IF_ERROR(BuildLayoutFolder(fx.spec, m.seed, dir, "", &sums));
  PETAL_RETURN_IF_ERROR(CheckTensorSums(fx.spec.name, sums, golden.tensor_sums));
  return built[fx.spec.name] = dir;
}

}  // namespace petal::testing
