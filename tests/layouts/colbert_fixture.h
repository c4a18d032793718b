// Multi-vector (ColBERT / PyLate) test fixtures (tests/fixtures/colbert/): the goldens
// scripts/ref/colbert_numpy.py writes (per query and document: its text, the shaped ids, which
// tokens keep a vector and those vectors; the MaxSim matrix; tensor sums) and the folder builder
// (layout_fixture.h's writer for the encoder, the same seeded generator for the Dense weights).
// Thread-safety: functions are reentrant (BuildColbertFolder rewrites its temp folder).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "layout_fixture.h"

namespace petal::testing {

struct ColbertSeq {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<bool> keep;                 // tokens whose vector is kept (queries: all)
  std::vector<std::vector<double>> vecs;  // the kept vectors
};

struct ColbertGolden {
  uint64_t seed = 0;
  double weight_std = 0;
  std::vector<int32_t> skiplist;
  std::map<std::string, double> sums;
  std::vector<ColbertSeq> queries, documents;
  std::vector<std::vector<double>> maxsim;  // [query][document]
};

inline constexpr const char* kColbertDir = "tests/fixtures/colbert";

// Loads golden_<name>.json (gtest failures on a malformed file).
ColbertGolden LoadColbertGolden(const std::string& name);
// Builds the fixture's folder in LayoutTempDir(name) and checks every tensor's sum against the
// golden's (gtest failures); returns the folder.
std::string BuildColbertFolder(const std::string& name, const ColbertGolden& g);

}  // namespace petal::testing
