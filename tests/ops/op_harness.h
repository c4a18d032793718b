// The declarative CUDA op-test harness (the llama.cpp test-backend-ops idea, in our own form).
// A case is data: a name and shape, its outputs (element type, size, initial contents for
// in-place outputs, tolerance or exact), a GPU run and a CPU reference (kernels/cpu/ops.h and
// kernels/cpu/reference_ops.h). One runner does the rest for every op: allocates each output
// with guard elements after it, poisons all of it (0xFF bytes: NaN in bf16 and fp32), uploads the
// initial contents of in-place outputs, runs the op, synchronises, checks the guards are intact,
// and compares every output with the reference (max relative error floored at the row RMS, max
// absolute error, row cosine, non-finite count; or exact), recording a summary row per output
// (op_test_util.h prints the table and writes $PETAL_OPS_REPORT). Thread-safety: test-only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace petal::cuda::test {

enum class Elem { kBf16, kF32, kI32 };

struct OpOutput {
  std::string name;  // suffix in the summary ("" for the main output, e.g. "res", "v")
  Elem elem = Elem::kBf16;
  int64_t rows = 0, cols = 0;  // n = rows * cols elements; rows/cols shape the metrics
  std::vector<float> initial;  // in-place outputs start with these contents (empty: poison only)
  bool exact = false;          // bitwise / integer equality instead of the tolerance
  Tolerance tol{0, 1};
  uint8_t poison = 0xFF;
  // With a tolerance: columns [exact_from_col, cols) must still match bitwise (e.g. the v part
  // of QKV rows that an in-place op must not touch), recorded as "<op>.exact". -1: none.
  int64_t exact_from_col = -1;
};

struct OpCase {
  std::string op;     // e.g. "AddRmsNorm"
  std::string shape;  // e.g. "rows=77 dim=1024 +x"
  std::vector<OpOutput> outputs;
  // Uploads the inputs, enqueues the op writing output i at outs[i] (device pointers of the
  // outputs' element types), and synchronises before returning (its input buffers may be local).
  std::function<Status(const std::vector<void*>& outs)> gpu;
  // The expected contents of every output, as floats, from the CPU reference.
  std::function<std::vector<std::vector<float>>()> reference;
};

// Runs one case as described above; failures name the case, the output and the worst element.
::testing::AssertionResult RunOpCase(const OpCase& c);

}  // namespace petal::cuda::test
