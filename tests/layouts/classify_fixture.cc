// Loading and building the sequence-classifier fixtures (see classify_fixture.h).
#include "classify_fixture.h"

#include <simdjson.h>

#include <cmath>
#include <cstdio>

#include "common/file_util.h"

namespace petal::testing {
namespace {

constexpr const char* kDir = "tests/fixtures/classify";

double Num(simdjson::dom::element e) {
  double d = 0;
  if (e.get_double().get(d)) d = static_cast<double>(e.get_int64().value_unsafe());
  return d;
}

std::string Str(simdjson::dom::element e) {
  std::string_view v;
  return e.get_string().get(v) ? std::string() : std::string(v);
}

}  // namespace

StatusOr<ClassifyManifest> LoadClassifyManifest() {
  const std::string path = SourceDir() + "/" + kDir + "/classify.json";
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return InvalidArgument(path + " is not JSON");
  ClassifyManifest m;
  if (doc["seed"].get_uint64().get(m.seed)) return InvalidArgument(path + ": no seed");
  simdjson::dom::array texts, pairs, fixtures;
  if (doc["texts"].get_array().get(texts) || doc["pairs"].get_array().get(pairs) ||
      doc["fixtures"].get_array().get(fixtures)) {
    return InvalidArgument(path + ": no texts, pairs or fixtures");
  }
  for (auto t : texts) m.texts.push_back(Str(t));
  for (auto p : pairs)
    m.pairs.emplace_back(Str(p.at(0).value_unsafe()), Str(p.at(1).value_unsafe()));
  for (auto f : fixtures) {
    ClassifyFixture fx;
    fx.spec.fixtures_dir = kDir;
    fx.spec.name = Str(f["name"].value_unsafe());
    fx.spec.tokenizer_dir = Str(f["tokenizer"].value_unsafe());
    fx.spec.dtype = "float32";
    double std = 0;
    if (!f["weight_std"].get_double().get(std)) fx.spec.weight_std = std;
    int64_t n = 0;
    if (!f["max_length"].get_int64().get(n)) fx.max_length = static_cast<int>(n);
    m.fixtures.push_back(fx);
  }
  return m;
}

StatusOr<ClassifyGolden> LoadClassifyGolden(const std::string& name) {
  const std::string path = SourceDir() + "/" + kDir + "/golden_" + name + ".json";
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return InvalidArgument(path + " is not JSON");
  ClassifyGolden g;
  g.activation = Str(doc["activation"].value_unsafe());
  simdjson::dom::array labels, cases;
  simdjson::dom::object sums;
  if (doc["labels"].get_array().get(labels) || doc["cases"].get_array().get(cases) ||
      doc["tensor_sums"].get_object().get(sums)) {
    return InvalidArgument(path + ": no labels, cases or tensor_sums");
  }
  for (auto l : labels) g.labels.push_back(Str(l));
  for (auto [k, v] : sums) g.tensor_sums[std::string(k)] = Num(v);
  for (auto c : cases) {
    ClassifyCase cc;
    simdjson::dom::array pair, ids, types, logits, probs;
    if (!c["pair"].get_array().get(pair)) {
      cc.is_pair = true;
      cc.pair = {Str(pair.at(0).value_unsafe()), Str(pair.at(1).value_unsafe())};
    } else {
      cc.text = Str(c["text"].value_unsafe());
    }
    if (c["ids"].get_array().get(ids) || c["type_ids"].get_array().get(types) ||
        c["logits"].get_array().get(logits) || c["probs"].get_array().get(probs)) {
      return InvalidArgument(path + ": a case without ids, type_ids, logits or probs");
    }
    for (auto x : ids) cc.ids.push_back(static_cast<int32_t>(x.get_int64().value_unsafe()));
    for (auto x : types) cc.type_ids.push_back(static_cast<int32_t>(x.get_int64().value_unsafe()));
    for (auto x : logits) cc.logits.push_back(Num(x));
    for (auto x : probs) cc.probs.push_back(Num(x));
    simdjson::dom::array top;
    if (!c["top_index"].get_array().get(top)) {
      for (auto x : top) cc.top_index.push_back(static_cast<int32_t>(x.get_int64().value_unsafe()));
      cc.nnz = c["nnz"].get_int64().value_unsafe();
      cc.near_zero = c["near_zero"].get_int64().value_unsafe();
      cc.sum = Num(c["sum"].value_unsafe());
    }
    g.cases.push_back(std::move(cc));
  }
  return g;
}

StatusOr<std::string> BuildClassifyFolder(const ClassifyManifest& m, const ClassifyFixture& fx,
                                          const ClassifyGolden& golden) {
  static std::map<std::string, std::string> built;
  auto it = built.find(fx.spec.name);
  if (it != built.end()) return it->second;
  const std::string dir = LayoutTempDir(fx.spec.name);
  std::map<std::string, double> sums;
  PETAL_RETURN_IF_ERROR(BuildLayoutFolder(fx.spec, m.seed, dir, "", &sums));
  PETAL_RETURN_IF_ERROR(CheckTensorSums(fx.spec.name, sums, golden.tensor_sums));
  // The reference truncates at the fixture's max_length: serve with it.
  const std::string pc = dir + "/petal_config.json";
  FILE* f = std::fopen(pc.c_str(), "w");
  if (f == nullptr) return NotFound("cannot create " + pc);
  std::fprintf(f, "{\"max_seq_length\": %d}\n", fx.max_length);
  std::fclose(f);
  return built[fx.spec.name] = dir;
}

}  // namespace petal::testing
