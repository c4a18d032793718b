// Loading and building the multi-vector fixtures (see colbert_fixture.h).
#include "colbert_fixture.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>

#include "common/file_util.h"
#include "model/config.h"
#include "model/make_model.h"
#include "model/safetensors_writer.h"

namespace petal::testing {
namespace {

double Num(simdjson::dom::element e) {
  double d = 0;
  if (e.get_double().get(d)) d = static_cast<double>(e.get_int64().value_unsafe());
  return d;
}

// The array at `key` (empty when absent), held by value: value() on a temporary result would
// dangle.
simdjson::dom::array Arr(simdjson::dom::element e, const char* key) {
  simdjson::dom::array a;
  EXPECT_FALSE(e[key].get_array().get(a)) << "no array '" << key << "'";
  return a;
}

simdjson::dom::array Arr(simdjson::dom::element e) {
  simdjson::dom::array a;
  EXPECT_FALSE(e.get_array().get(a));
  return a;
}

}  // namespace

ColbertGolden LoadColbertGolden(const std::string& name) {
  const std::string path = SourceDir() + "/" + kColbertDir + "/golden_" + name + ".json";
  auto text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << path;
  simdjson::dom::parser parser;
  ColbertGolden g;
  simdjson::dom::element doc;
  if (!text.ok() || parser.parse(*text).get(doc)) {
    ADD_FAILURE() << path << " is not JSON";
    return g;
  }
  g.seed = doc["seed"].get_uint64().value_unsafe();
  g.weight_std = Num(doc["weight_std"].value_unsafe());
  for (auto x : Arr(doc, "skiplist_ids")) {
    g.skiplist.push_back(static_cast<int32_t>(x.get_int64().value_unsafe()));
  }
  simdjson::dom::object sums;
  EXPECT_FALSE(doc["tensor_sums"].get_object().get(sums));
  for (auto [k, v] : sums) g.sums[std::string(k)] = Num(v);
  auto seqs = [&](const char* key, std::vector<ColbertSeq>* out) {
    for (auto c : Arr(doc, key)) {
      ColbertSeq s;
      std::string_view t;
      EXPECT_FALSE(c["text"].get_string().get(t));
      s.text = std::string(t);
      for (auto x : Arr(c, "ids")) {
        s.ids.push_back(static_cast<int32_t>(x.get_int64().value_unsafe()));
      }
      simdjson::dom::array keep;
      if (!c["keep"].get_array().get(keep)) {
        for (auto x : keep) s.keep.push_back(x.get_bool().value_unsafe());
      } else {
        s.keep.assign(s.ids.size(), true);
      }
      for (auto row : Arr(c, "vectors")) {
        std::vector<double> v;
        for (auto x : Arr(row)) v.push_back(Num(x));
        s.vecs.push_back(std::move(v));
      }
      out->push_back(std::move(s));
    }
  };
  seqs("queries", &g.queries);
  seqs("documents", &g.documents);
  for (auto row : Arr(doc, "maxsim")) {
    std::vector<double> r;
    for (auto x : Arr(row)) r.push_back(Num(x));
    g.maxsim.push_back(std::move(r));
  }
  return g;
}

// The fixture's folder: config files and encoder weights by layout_fixture's writer, the Dense
// weights here (same generator, keys "1_Dense/linear.*"); every tensor's sum checked against
// the golden's.
std::string BuildColbertFolder(const std::string& name, const ColbertGolden& g) {
  LayoutSpec spec;
  spec.name = name;
  spec.fixtures_dir = kColbertDir;
  spec.tokenizer_dir = "models/all-MiniLM-L6-v2";
  spec.dtype = "float32";
  spec.weight_std = g.weight_std;
  const std::string dir = LayoutTempDir(name);
  std::map<std::string, double> sums;
  Status st = BuildLayoutFolder(spec, g.seed, dir, "", &sums);
  EXPECT_TRUE(st.ok()) << st.message();
  auto config = LoadModelConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status().message();
  if (!st.ok() || !config.ok()) return dir;  // reported above; the caller's engine load fails
  for (const DenseModule& d : config->multivector.dense) {
    std::vector<TensorToWrite> tensors;
    std::vector<std::vector<float>> store;
    for (const char* part : {"weight", "bias"}) {
      if (std::string(part) == "bias" && !d.bias) continue;
      const std::string key = d.path + "/linear." + part;
      std::vector<int64_t> shape = {d.out_features};
      if (std::string(part) == "weight") shape.push_back(d.in_features);
      const int64_t n = shape.size() == 2 ? shape[0] * shape[1] : shape[0];
      store.emplace_back(n);
      SeededNormal(g.seed, key + "#0", 0.0, g.weight_std, store.back().data(), n);
      double sum = 0;
      for (float v : store.back()) sum += v;
      sums[key] = sum;
      TensorToWrite t;
      t.name = std::string("linear.") + part;
      t.shape = shape;
      t.data = store.back().data();
      tensors.push_back(t);
    }
    st = WriteSafetensors(JoinPath(JoinPath(dir, d.path), "model.safetensors"), tensors);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  EXPECT_EQ(sums.size(), g.sums.size());
  for (const auto& [k, v] : sums) {
    EXPECT_TRUE(g.sums.count(k)) << "golden has no tensor " << k;
    if (!g.sums.count(k)) continue;
    EXPECT_NEAR(v, g.sums.at(k), 1e-9 * (1 + std::abs(v))) << k;
  }
  return dir;
}

}  // namespace petal::testing
