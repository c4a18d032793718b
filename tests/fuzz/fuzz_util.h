// Helpers shared by the libFuzzer entry points under tests/fuzz/: where the source tree is (the
// tokenizer targets load real tokenizer.json files from models/), and a crash-on-violation check
// that libFuzzer reports like any other crash. Thread-safety: libFuzzer calls each target from
// one thread; the helpers keep no state.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace petal::fuzz {

// PETAL_SOURCE_DIR from the environment, else the tree the target was configured from.
inline std::string SourceDir() {
  if (const char* s = std::getenv("PETAL_SOURCE_DIR")) return s;
  return PETAL_FUZZ_SOURCE_DIR;
}

// An invariant the code under test promises; a violation is a finding, so abort loudly.
#define PETAL_FUZZ_CHECK(cond)                                                          \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

}  // namespace petal::fuzz
