// GPU op tests for the folded-RMSNorm ops (rms_fold.cu; ops.h says why): RmsScaledQkv and
// RmsScaledSiluMul as harness cases (op_harness.h) against cpu::RmsScaledQkv / RmsScaledSiluMul,
// and ScaleColumns against a float loop. Random bf16 inputs (the residual rows at a few scales,
// as a residual stream has), poisoned outputs. Tolerances as ops2_gpu_test's elementwise ops:
// max_rel <= 1e-2 (floored at the row RMS), row cosine >= 0.9999; ScaleColumns is one bf16
// rounding of an fp32 product of bf16 values, so it must match a host rounding exactly.
#include <string>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/reference_ops.h"
#include "kernels/cuda/ops.h"
#include "op_harness.h"

namespace petal::cuda::test {
namespace {

class RmsFoldGpuTest : public GpuTest {};

constexpr Tolerance kTol{1e-2, 0.9999};

struct QkvCase {
  int hq, hkv, d, dim;
  bool bias, norm, rope;
};

void RunRmsScaledQkv(const QkvCase& c, const std::vector<int>& lens, uint64_t seed) {
  const auto cu = CuSeqlens(lens);
  const int rows = cu.back() + 2, num_seqs = static_cast<int>(lens.size());
  const int stride = (c.hq + 2 * c.hkv) * c.d;
  const auto qkv = RandomBf16(static_cast<size_t>(rows) * stride, seed, -4.f, 4.f);
  const auto r = RandomBf16(static_cast<size_t>(rows) * c.dim, seed + 1, -20.f, 20.f);
  const auto bias = RandomBf16(stride, seed + 2, -0.5f, 0.5f);
  const auto qw = RandomBf16(c.d, seed + 3, 0.5f, 1.5f), kw = RandomBf16(c.d, seed + 4, 0.5f, 1.5f);
  OpCase oc;
  oc.op = "RmsScaledQkv";
  oc.shape = Describe(lens) + " H" + std::to_string(c.hq) + "/" + std::to_string(c.hkv) + " d" +
             std::to_string(c.d) + " dim" + std::to_string(c.dim) + (c.bias ? " bias" : "") +
             (c.norm ? " norm" : "") + (c.rope ? " rope" : "");
  OpOutput o;
  o.rows = rows, o.cols = stride, o.tol = kTol, o.initial = qkv;
  oc.outputs = {o};
  oc.gpu = [=](const std::vector<void*>& out) -> Status {
    PETAL_ASSIGN_OR_RETURN(auto d_r, UploadBf16(r));
    PETAL_ASSIGN_OR_RETURN(auto d_bias, UploadBf16(bias));
    PETAL_ASSIGN_OR_RETURN(auto d_qw, UploadBf16(qw));
    PETAL_ASSIGN_OR_RETURN(auto d_kw, UploadBf16(kw));
    PETAL_ASSIGN_OR_RETURN(auto d_cu, UploadInts(cu));
    DeviceBuffer<int32_t> d_pos;
    PETAL_RETURN_IF_ERROR(d_pos.Allocate(rows));
    PETAL_RETURN_IF_ERROR(LaunchSeqInfo({d_cu.get(), num_seqs, rows, nullptr, d_pos.get()}, 0));
    const auto table = RopeTable(rows, c.d, 1e6);
    DeviceBuffer<float2> d_table;
    PETAL_RETURN_IF_ERROR(d_table.Allocate(table.size()));
    PETAL_RETURN_IF_ERROR(d_table.CopyFromHost(table.data(), table.size()));
    RmsScaledQkvParams p;
    p.qk.qkv = static_cast<bf16*>(out[0]), p.qk.rows = rows, p.qk.row_stride = stride;
    p.qk.num_q_heads = c.hq, p.qk.num_kv_heads = c.hkv, p.qk.head_dim = c.d;
    p.qk.q_norm_weight = c.norm ? d_qw.get() : nullptr;
    p.qk.k_norm_weight = c.norm ? d_kw.get() : nullptr;
    p.qk.eps = 1e-6f;
    p.qk.positions = c.rope ? d_pos.get() : nullptr;
    p.qk.theta = 1e6;
    p.qk.rope_table = d_table.get();
    p.qk.rope_table_rows = rows;
    p.rms_of = d_r.get(), p.rms_dim = c.dim, p.rms_eps = 1e-6f;
    p.bias = c.bias ? d_bias.get() : nullptr;
    PETAL_RETURN_IF_ERROR(LaunchRmsScaledQkv(p, 0));
    return SyncDevice();
  };
  oc.reference = [=] {
    std::vector<int32_t> positions(rows);
    cpu::SeqInfo(cu.data(), num_seqs, rows, nullptr, positions.data());
    std::vector<float> ref = qkv;
    cpu::RmsScaledQkv(ref.data(), rows, stride, c.hq, c.hkv, c.d, r.data(), c.dim, 1e-6f,
                      c.bias ? bias.data() : nullptr, c.norm ? qw.data() : nullptr,
                      c.norm ? kw.data() : nullptr, 1e-6f, c.rope ? positions.data() : nullptr,
                      1e6);
    return std::vector<std::vector<float>>{ref};
  };
  EXPECT_TRUE(RunOpCase(oc));
}

TEST_F(RmsFoldGpuTest, RmsScaledQkv) {
  const QkvCase cases[] = {
      {16, 8, 128, 1024, false, true, true},  // Qwen3 0.6B
      {32, 8, 128, 2560, false, true, true},  // Qwen3 4B
      {16, 8, 128, 1024, true, true, true},   // with a QKV bias
      {4, 2, 64, 256, true, false, true},     // rope only
      {2, 1, 256, 512, false, true, false},   // norm only, head_dim 256
  };
  uint64_t seed = 9000;
  for (const QkvCase& c : cases)
    for (const auto& lens : RaggedCases()) {
      ASSERT_NO_FATAL_FAILURE(RunRmsScaledQkv(c, lens, seed));
      seed += 5;
    }
  ASSERT_NO_FATAL_FAILURE(RunRmsScaledQkv(cases[0], {1000, 7}, 9500));
}

TEST_F(RmsFoldGpuTest, RmsScaledSiluMul) {
  uint64_t seed = 9600;
  for (int inter : {2, 98, 3072, 9728}) {
    for (int rows : {1, 77, 1000}) {
      const int dim = inter == 9728 ? 2560 : 1024;
      const auto gu = RandomBf16(static_cast<size_t>(rows) * 2 * inter, seed++, -60.f, 60.f);
      const auto r = RandomBf16(static_cast<size_t>(rows) * dim, seed++, -20.f, 20.f);
      OpCase c;
      c.op = "RmsScaledSiluMul";
      c.shape = "rows=" + std::to_string(rows) + " inter=" + std::to_string(inter);
      OpOutput o;
      o.rows = rows, o.cols = inter, o.tol = kTol;
      c.outputs = {o};
      c.gpu = [=](const std::vector<void*>& out) -> Status {
        PETAL_ASSIGN_OR_RETURN(auto d_gu, UploadBf16(gu));
        PETAL_ASSIGN_OR_RETURN(auto d_r, UploadBf16(r));
        RmsScaledSiluMulParams p;
        p.mul = {d_gu.get(), static_cast<bf16*>(out[0]), rows, inter};
        p.rms_of = d_r.get(), p.rms_dim = dim, p.rms_eps = 1e-6f;
        PETAL_RETURN_IF_ERROR(LaunchRmsScaledSiluMul(p, 0));
        return SyncDevice();
      };
      c.reference = [=] {
        std::vector<float> ref(static_cast<size_t>(rows) * inter);
        cpu::RmsScaledSiluMul(gu.data(), r.data(), dim, 1e-6f, ref.data(), rows, inter);
        return std::vector<std::vector<float>>{ref};
      };
      EXPECT_TRUE(RunOpCase(c));
    }
  }
}

TEST_F(RmsFoldGpuTest, ScaleColumns) {
  const int rows = 300, cols = 1024;
  const auto w = RandomBf16(static_cast<size_t>(rows) * cols, 9700, -2.f, 2.f);
  const auto g = RandomBf16(cols, 9701, 0.f, 3.f);
  OpCase c;
  c.op = "ScaleColumns";
  c.shape = "300x1024";
  OpOutput o;
  o.rows = rows, o.cols = cols, o.exact = true, o.initial = w;
  c.outputs = {o};
  c.gpu = [=](const std::vector<void*>& out) -> Status {
    PETAL_ASSIGN_OR_RETURN(auto d_g, UploadBf16(g));
    PETAL_RETURN_IF_ERROR(
        LaunchScaleColumns({static_cast<bf16*>(out[0]), d_g.get(), rows, cols}, 0));
    return SyncDevice();
  };
  c.reference = [=] {
    std::vector<float> ref(w.size());
    for (int n = 0; n < rows; ++n)
      for (int k = 0; k < cols; ++k) ref[n * cols + k] = cpu::RoundBf16(w[n * cols + k] * g[k]);
    return std::vector<std::vector<float>>{ref};
  };
  EXPECT_TRUE(RunOpCase(c));
}

}  // namespace
}  // namespace petal::cuda::test
