#include "op_harness.h"

#include <cmath>

namespace petal::cuda::test {
namespace {

constexpr size_t kGuard = 64;  // guard elements after every output

size_t ElemBytes(Elem e) { return e == Elem::kBf16 ? 2 : 4; }

// One output's device allocation: n elements then kGuard guard elements.
struct Slot {
  DeviceBuffer<uint8_t> buf;
  size_t n = 0, elem = 0;
  uint8_t poison = 0xFF;
};

Status Prepare(const OpOutput& o, Slot* s) {
  s->n = static_cast<size_t>(o.rows * o.cols);
  s->elem = ElemBytes(o.elem);
  s->poison = o.poison;
  PETAL_RETURN_IF_ERROR(s->buf.Allocate((s->n + kGuard) * s->elem));
  PETAL_CUDA_CHECK(cudaMemset(s->buf.get(), o.poison, s->buf.bytes()));
  if (o.initial.empty()) return Status::Ok();
  if (o.initial.size() != s->n) return InvalidArgument(o.name + ": initial has the wrong size");
  std::vector<uint8_t> bytes(s->n * s->elem);
  for (size_t i = 0; i < s->n; ++i) {
    if (o.elem == Elem::kBf16) {
      const uint16_t b = ToBf16Bits(o.initial[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else if (o.elem == Elem::kF32) {
      std::memcpy(bytes.data() + 4 * i, &o.initial[i], 4);
    } else {
      const int32_t v = static_cast<int32_t>(o.initial[i]);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  }
  return s->buf.CopyFromHost(bytes.data(), bytes.size());
}

// The output as floats, and whether every guard byte still holds the poison.
StatusOr<std::vector<float>> Fetch(const OpOutput& o, const Slot& s, bool* guard_ok) {
  std::vector<uint8_t> bytes((s.n + kGuard) * s.elem);
  PETAL_RETURN_IF_ERROR(s.buf.CopyToHost(bytes.data(), bytes.size()));
  *guard_ok = true;
  for (size_t i = s.n * s.elem; i < bytes.size(); ++i) *guard_ok &= bytes[i] == s.poison;
  std::vector<float> out(s.n);
  for (size_t i = 0; i < s.n; ++i) {
    if (o.elem == Elem::kBf16) {
      uint16_t b;
      std::memcpy(&b, bytes.data() + 2 * i, 2);
      out[i] = FromBf16Bits(b);
    } else if (o.elem == Elem::kF32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      int32_t v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      out[i] = static_cast<float>(v);
    }
  }
  return out;
}

int64_t Mismatches(const std::vector<float>& got, const std::vector<float>& ref) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    bad += !(got[i] == ref[i]) && !(std::isnan(got[i]) && std::isnan(ref[i]));
  return bad;
}

}  // namespace

::testing::AssertionResult RunOpCase(const OpCase& c) {
  const std::string where = c.op + " [" + c.shape + "]";
  std::vector<Slot> slots(c.outputs.size());
  std::vector<void*> ptrs;
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    if (Status s = Prepare(c.outputs[i], &slots[i]); !s.ok())
      return ::testing::AssertionFailure() << where << ": " << s.ToString();
    ptrs.push_back(slots[i].buf.get());
  }
  if (Status s = c.gpu(ptrs); !s.ok())
    return ::testing::AssertionFailure() << where << ": GPU run: " << s.ToString();
  if (Status s = SyncDevice(); !s.ok())
    return ::testing::AssertionFailure() << where << ": " << s.ToString();
  const auto refs = c.reference();
  if (refs.size() != c.outputs.size())
    return ::testing::AssertionFailure() << where << ": reference gives " << refs.size()
                                         << " outputs, the case declares " << c.outputs.size();
  ::testing::AssertionResult verdict = ::testing::AssertionSuccess();
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    const OpOutput& o = c.outputs[i];
    const std::string op = o.name.empty() ? c.op : c.op + "." + o.name;
    bool guard_ok = false;
    auto got = Fetch(o, slots[i], &guard_ok);
    if (!got.ok()) return ::testing::AssertionFailure() << where << ": " << got.status().ToString();
    if (refs[i].size() != got->size())
      return ::testing::AssertionFailure() << op << " [" << c.shape << "]: reference size "
                                           << refs[i].size() << " != " << got->size();
    auto r = o.exact ? RecordExact(op, c.shape, Mismatches(*got, refs[i]))
                     : CheckClose(op, c.shape, *got, refs[i], o.rows, o.cols, o.tol);
    if (!r) verdict = r;
    if (!o.exact && o.exact_from_col >= 0) {
      int64_t bad = 0;
      for (int64_t row = 0; row < o.rows; ++row)
        for (int64_t col = o.exact_from_col; col < o.cols; ++col) {
          const size_t k = static_cast<size_t>(row * o.cols + col);
          bad += !((*got)[k] == refs[i][k]);
        }
      auto e = RecordExact(op + ".exact", c.shape, bad);
      if (!e) verdict = e;
    }
    if (!guard_ok) {
      verdict = ::testing::AssertionFailure()
                << op << " [" << c.shape << "]: wrote past its " << slots[i].n << " elements";
    }
  }
  return verdict;
}

}  // namespace petal::cuda::test
