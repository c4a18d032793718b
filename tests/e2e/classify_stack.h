// Test helper for the classifier / SPLADE gateway tests (gateway_classify_test,
// gateway_sparse_test): a fixture of tests/fixtures/classify/ served by a CpuStack (cpu_stack.h:
// two in-process CPU servers, fp32, behind a gateway with two-input chunks). Thread-safety:
// test-only; the servers and gateway run their own threads.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "../layouts/classify_fixture.h"
#include "common/file_util.h"
#include "cpu_stack.h"

namespace petal::gateway::testing {

struct ClassifyStack : CpuStack {
  ::petal::testing::ClassifyGolden golden;
};

// `remap`, if given, turns the built folder into the one served (e.g. a Router folder around it).
inline std::unique_ptr<ClassifyStack> StartClassifyStack(
    const std::string& name,
    const std::function<StatusOr<std::string>(const std::string&)>& remap = nullptr) {
  auto st = std::make_unique<ClassifyStack>();
  auto m = ::petal::testing::LoadClassifyManifest();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  ::petal::testing::ClassifyFixture fx;
  for (const auto& f : m->fixtures) {
    if (f.spec.name == name) fx = f;
  }
  auto g = ::petal::testing::LoadClassifyGolden(name);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return nullptr;
  st->golden = *g;
  auto dir = ::petal::testing::BuildClassifyFolder(*m, fx, *g);
  EXPECT_TRUE(dir.ok()) << dir.status().ToString();
  if (!dir.ok() || !FileExists(*dir + "/tokenizer.json")) return nullptr;
  if (remap) {
    dir = remap(*dir);
    EXPECT_TRUE(dir.ok()) << dir.status().ToString();
    if (!dir.ok()) return nullptr;
  }
  if (!StartCpuStack(*dir, name, /*max_inputs=*/9, st.get())) return nullptr;
  return st;
}

}  // namespace petal::gateway::testing
