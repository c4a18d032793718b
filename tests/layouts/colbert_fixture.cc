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

}  // namespace


ColbertGolden LoadColbertGolden(const std::string& name) {
  const std::string path = SourceDir() + "/" + kColbertDir + "/golden_" + name + ".json";
  auto text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << path;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(*text).value();
  ColbertGolden g;
  g.seed = doc["seed"].get_uint64().value();
  g.weight_std = Num(doc["weight_std"].value());
  for (auto x : doc["skiplist_ids"].get_array().value()) {
    g.skiplist.push_back(static_cast<int32_t>(x.get_int64().value()));
  }
  for (auto [k, v] : doc["tensor_sums"].get_object().value()) g.sums[std::string(k)] = Num(v);
  auto seqs = [&](const char* key, std::vector<ColbertSeq>* out) {
    for (auto c : doc[key].get_array().value()) {
      ColbertSeq s;
      s.text = std::string(c["text"].get_string().value());
      for (auto x : c["ids"].get_array().value()) {
        s.ids.push_back(static_cast<int32_t>(x.get_int64().value()));
      }
      simdjson::dom::array keep;
      if (!c["keep"].get_array().get(keep)) {
        for (auto x : keep) s.keep.push_back(x.get_bool().value());
      } else {
        s.keep.assign(s.ids.size(), true);
      }
      for (auto row : c["vectors"].get_array().value()) {
        std::vector<double> v;
        for (auto x : row.get_array().value()) v.push_back(Num(x));
        s.vecs.push_back(std::move(v));
      }
      out->push_back(std::move(s));
    }
  };
  seqs("queries", &g.queries);
  seqs("documents", &g.documents);
  for (auto row : doc["maxsim"].get_array().value()) {
    std::vector<double> r;
    for (auto x : row.get_array().value()) r.push_back(Num(x));
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
    ASSERT_TRUE(g.sums.count(k)) << "golden has no tensor " << k;
    EXPECT_NEAR(v, g.sums.at(k), 1e-9 * (1 + std::abs(v))) << k;
  }
  return dir;
}

}  // namespace petal::testing
