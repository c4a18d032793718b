// GPU op tests, part 1: per-token sequence info, embeddings, residual + norms, conversions, as
// harness cases (op_harness.h): each is a GPU run and its named CPU reference
// (kernels/cpu/reference_ops.h, kernels/cpu/ops.h) on the same bf16-rounded random inputs, with
// outputs poisoned (0xFF = NaN) beforehand and guard regions checked afterwards. Tolerances (bf16
// output: one rounding is <= 2^-9 relative):
//   norms, embeddings+LN: max_rel <= 1e-2 (relative, floored at the row RMS), row cosine >= 0.9999
//   gathers, residual sums, conversions, seq info: exact.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/reference_ops.h"
#include "kernels/cuda/ops.h"
#include "op_harness.h"

namespace petal::cuda::test {
namespace {

class OpsGpuTest : public GpuTest {};

constexpr Tolerance kNormTol{1e-2, 0.9999};

std::string Dims(int rows, int dim) {
  return "rows=" + std::to_string(rows) + " dim=" + std::to_string(dim);
}

OpOutput Exact(std::string name, Elem e, int64_t rows, int64_t cols, uint8_t poison = 0xFF) {
  OpOutput o;
  o.name = std::move(name), o.elem = e, o.rows = rows, o.cols = cols, o.exact = true;
  o.poison = poison;
  return o;
}

OpOutput Close(std::string name, int64_t rows, int64_t cols, Tolerance tol,
               std::vector<float> initial = {}) {
  OpOutput o;
  o.name = std::move(name), o.rows = rows, o.cols = cols, o.tol = tol;
  o.initial = std::move(initial);
  return o;
}

std::vector<float> AsFloats(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }

TEST_F(OpsGpuTest, SeqInfo) {
  for (const auto& lens : RaggedCases()) {
    for (int pad : {0, 5}) {
      const auto cu = CuSeqlens(lens);
      const int num_seqs = static_cast<int>(lens.size()), rows = cu.back() + pad;
      if (rows == 0) continue;
      OpCase c;
      c.op = "SeqInfo";
      c.shape = Describe(lens) + " pad=" + std::to_string(pad);
      c.outputs = {Exact("", Elem::kI32, rows, 1, 0x7F), Exact("pos", Elem::kI32, rows, 1, 0x7F)};
      c.gpu = [=](const std::vector<void*>& out) -> Status {
        PETAL_ASSIGN_OR_RETURN(auto d_cu, UploadInts(cu));
        PETAL_RETURN_IF_ERROR(
            LaunchSeqInfo({d_cu.get(), num_seqs, rows, static_cast<int32_t*>(out[0]),
                           static_cast<int32_t*>(out[1])},
                          0));
        return SyncDevice();
      };
      c.reference = [=] {
        std::vector<int32_t> ids(rows), pos(rows);
        cpu::SeqInfo(cu.data(), num_seqs, rows, ids.data(), pos.data());
        return std::vector<std::vector<float>>{AsFloats(ids), AsFloats(pos)};
      };
      EXPECT_TRUE(RunOpCase(c));
    }
  }
}

TEST_F(OpsGpuTest, Embedding) {
  const int vocab = 1000;
  uint64_t seed = 1;
  for (int dim : {2, 6, 98, 1024, 2560}) {
    for (int rows : {1, 77, 1000}) {
      const auto table = RandomBf16(static_cast<size_t>(vocab) * dim, seed++);
      auto ids = RandomInts(rows, seed++, 0, vocab);
      if (rows >= 3) ids[0] = -1, ids[rows - 1] = vocab;  // invalid ids give zero rows
      OpCase c;
      c.op = "Embedding";
      c.shape = Dims(rows, dim);
      c.outputs = {Exact("", Elem::kBf16, rows, dim)};
      c.gpu = [=](const std::vector<void*>& out) -> Status {
        PETAL_ASSIGN_OR_RETURN(auto d_table, UploadBf16(table));
        PETAL_ASSIGN_OR_RETURN(auto d_ids, UploadInts(ids));
        PETAL_RETURN_IF_ERROR(LaunchEmbedding(
            {d_ids.get(), d_table.get(), vocab, static_cast<bf16*>(out[0]), rows, dim}, 0));
        return SyncDevice();
      };
      c.reference = [=] {
        std::vector<float> ref(static_cast<size_t>(rows) * dim);
        cpu::Embedding(ids.data(), table.data(), vocab, ref.data(), rows, dim);
        return std::vector<std::vector<float>>{ref};
      };
      EXPECT_TRUE(RunOpCase(c));
    }
  }
}

TEST_F(OpsGpuTest, BertEmbedding) {
  const int vocab = 500, max_pos = 1024, types = 2;
  uint64_t seed = 100;
  for (int dim : {32, 98, 384, 1024}) {
    for (const auto& lens : RaggedCases()) {
      for (int variant = 0; variant < 4; ++variant) {
        const bool with_types = variant % 2 == 0;
        const int layout = variant < 2 ? 1 : 4;  // block / warp per row (ops.h, rows_per_block)
        const auto cu = CuSeqlens(lens);
        const int rows = cu.back() + 3, num_seqs = static_cast<int>(lens.size());
        const auto word = RandomBf16(static_cast<size_t>(vocab) * dim, seed++);
        const auto pos = RandomBf16(static_cast<size_t>(max_pos) * dim, seed++);
        const auto type = RandomBf16(static_cast<size_t>(types) * dim, seed++);
        const auto gamma = RandomBf16(dim, seed++, 0.5f, 1.5f);
        const auto beta = RandomBf16(dim, seed++, -0.5f, 0.5f);
        const auto ids = RandomInts(rows, seed++, 0, vocab);
        const auto tt = RandomInts(rows, seed++, 0, types);
        OpCase c;
        c.op = "BertEmbedding";
        c.shape = Describe(lens) + " dim=" + std::to_string(dim) + (with_types ? " types" : "") +
                  " rows_per_block=" + std::to_string(layout);
        c.outputs = {Close("", rows, dim, kNormTol)};
        c.gpu = [=](const std::vector<void*>& out) -> Status {
          PETAL_ASSIGN_OR_RETURN(auto d_cu, UploadInts(cu));
          PETAL_ASSIGN_OR_RETURN(auto d_ids, UploadInts(ids));
          PETAL_ASSIGN_OR_RETURN(auto d_tt, UploadInts(tt));
          PETAL_ASSIGN_OR_RETURN(auto d_word, UploadBf16(word));
          PETAL_ASSIGN_OR_RETURN(auto d_pos, UploadBf16(pos));
          PETAL_ASSIGN_OR_RETURN(auto d_type, UploadBf16(type));
          PETAL_ASSIGN_OR_RETURN(auto d_gamma, UploadBf16(gamma));
          PETAL_ASSIGN_OR_RETURN(auto d_beta, UploadBf16(beta));
          DeviceBuffer<int32_t> d_positions;
          PETAL_RETURN_IF_ERROR(d_positions.Allocate(rows));
          PETAL_RETURN_IF_ERROR(
              LaunchSeqInfo({d_cu.get(), num_seqs, rows, nullptr, d_positions.get()}, 0));
          BertEmbeddingParams p;
          p.ids = d_ids.get();
          p.positions = d_positions.get();
          p.type_ids = with_types ? d_tt.get() : nullptr;
          p.word = d_word.get();
          p.pos = d_pos.get();
          p.type = d_type.get();
          p.vocab = vocab, p.max_positions = max_pos, p.num_types = types;
          p.gamma = d_gamma.get(), p.beta = d_beta.get(), p.eps = 1e-12f;
          p.out = static_cast<bf16*>(out[0]), p.rows = rows, p.dim = dim;
          p.rows_per_block = layout;
          PETAL_RETURN_IF_ERROR(LaunchBertEmbedding(p, 0));
          return SyncDevice();
        };
        c.reference = [=] {
          // Padding tokens past the last sequence use position 0 (SeqInfo's contract).
          std::vector<int32_t> positions(rows);
          cpu::SeqInfo(cu.data(), num_seqs, rows, nullptr, positions.data());
          std::vector<float> ref(static_cast<size_t>(rows) * dim);
          cpu::BertEmbedding(ids.data(), positions.data(), with_types ? tt.data() : nullptr,
                             word.data(), pos.data(), type.data(), vocab, max_pos, types, 0,
                             gamma.data(), beta.data(), 1e-12f, ref.data(), rows, dim);
          return std::vector<std::vector<float>>{ref};
        };
        EXPECT_TRUE(RunOpCase(c));
      }
    }
  }
}

// Both kernel layouts (ops.h, rows_per_block): one block per row (1) and one warp per row with 2
// or 8 rows a block; dims past 1024, not a multiple of 8 or unaligned fall back to the first.
constexpr int kNormLayouts[] = {1, 2, 8};

TEST_F(OpsGpuTest, AddLayerNorm) {
  uint64_t seed = 1000;
  for (int dim : {2, 32, 96, 98, 384, 1000, 1024, 2560}) {
    for (int rows : {1, 3, 77, 1000}) {
      for (int per_block : kNormLayouts) {
        for (bool with_res : {true, false}) {
          for (bool in_place : {false, true}) {
            const size_t n = static_cast<size_t>(rows) * dim;
            const auto x = RandomBf16(n, seed++, -2.f, 2.f);
            const auto r = RandomBf16(n, seed++, -2.f, 2.f);
            const auto gamma = RandomBf16(dim, seed++, 0.5f, 1.5f);
            const auto beta = RandomBf16(dim, seed++, -0.5f, 0.5f);
            OpCase c;
            c.op = "AddLayerNorm";
            c.shape = Dims(rows, dim) + (with_res ? " +res" : "") + (in_place ? " inplace" : "") +
                      " rpb" + std::to_string(per_block);
            // In place the output is the residual when there is one (BERT: h = LN(attn + h)), else
            // x: the harness's output buffer then starts with that input.
            c.outputs = {Close("", rows, dim, kNormTol,
                               in_place ? (with_res ? r : x) : std::vector<float>{})};
            c.gpu = [=](const std::vector<void*>& out) -> Status {
              bf16* dst = static_cast<bf16*>(out[0]);
              PETAL_ASSIGN_OR_RETURN(auto d_x, UploadBf16(x));
              PETAL_ASSIGN_OR_RETURN(auto d_r, UploadBf16(r));
              PETAL_ASSIGN_OR_RETURN(auto d_gamma, UploadBf16(gamma));
              PETAL_ASSIGN_OR_RETURN(auto d_beta, UploadBf16(beta));
              const bf16* xp = in_place && !with_res ? dst : d_x.get();
              const bf16* rp = with_res ? (in_place ? dst : d_r.get()) : nullptr;
              PETAL_RETURN_IF_ERROR(LaunchAddLayerNorm(
                  {xp, rp, d_gamma.get(), d_beta.get(), 1e-12f, dst, rows, dim, per_block}, 0));
              return SyncDevice();
            };
            c.reference = [=] {
              std::vector<float> ref(n);
              cpu::AddLayerNorm(x.data(), with_res ? r.data() : nullptr, gamma.data(), beta.data(),
                                1e-12f, ref.data(), rows, dim, &RoundBf16);
              return std::vector<std::vector<float>>{ref};
            };
            EXPECT_TRUE(RunOpCase(c));
          }
        }
      }
    }
  }
}

TEST_F(OpsGpuTest, AddRmsNorm) {
  uint64_t seed = 2000;
  for (int dim : {2, 32, 98, 384, 1000, 1024, 2560}) {
    for (int rows : {1, 3, 77, 1000}) {
      for (int per_block : kNormLayouts) {
        for (int variant = 0; variant < 3; ++variant) {  // 0: add, 1: no add, 2: no add in place
          const bool with_x = variant == 0, in_place = variant == 2;
          const size_t n = static_cast<size_t>(rows) * dim;
          const auto x = RandomBf16(n, seed++, -2.f, 2.f);
          const auto r = RandomBf16(n, seed++, -2.f, 2.f);
          const auto w = RandomBf16(dim, seed++, 0.5f, 1.5f);
          OpCase c;
          c.op = "AddRmsNorm";
          c.shape = Dims(rows, dim) + (with_x ? " +x" : "") + (in_place ? " inplace" : "") +
                    " rpb" + std::to_string(per_block);
          // Output 1 is the residual, read and (with x) written back in place; in place, output 0
          // is the residual itself, so only that one is declared.
          if (in_place) {
            c.outputs = {Close("", rows, dim, kNormTol, r)};
          } else {
            c.outputs = {Close("", rows, dim, kNormTol), Close("res", rows, dim, {}, r)};
            c.outputs[1].exact = true;
          }
          c.gpu = [=](const std::vector<void*>& out) -> Status {
            PETAL_ASSIGN_OR_RETURN(auto d_x, UploadBf16(x));
            PETAL_ASSIGN_OR_RETURN(auto d_w, UploadBf16(w));
            bf16* res = static_cast<bf16*>(out[in_place ? 0 : 1]);
            PETAL_RETURN_IF_ERROR(
                LaunchAddRmsNorm({with_x ? d_x.get() : nullptr, res, d_w.get(), 1e-6f,
                                  static_cast<bf16*>(out[0]), rows, dim, per_block},
                                 0));
            return SyncDevice();
          };
          c.reference = [=] {
            std::vector<float> res = r, ref(n);
            cpu::AddRmsNorm(with_x ? x.data() : nullptr, res.data(), w.data(), 1e-6f, ref.data(),
                            rows, dim, &RoundBf16);
            if (in_place) return std::vector<std::vector<float>>{ref};
            return std::vector<std::vector<float>>{ref, res};
          };
          EXPECT_TRUE(RunOpCase(c));
        }
      }
    }
  }
}

TEST_F(OpsGpuTest, AddRmsNormRejectsAliasing) {
  DeviceBuffer<bf16> a, w;
  ASSERT_OK(a.Allocate(64));
  ASSERT_OK(w.Allocate(64));
  const Status st = LaunchAddRmsNorm({a.get(), a.get(), w.get(), 1e-6f, a.get(), 2, 32}, 0);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  const Status odd = LaunchAddRmsNorm({nullptr, a.get(), w.get(), 1e-6f, a.get(), 1, 33}, 0);
  EXPECT_EQ(odd.code(), StatusCode::kInvalidArgument);
  const Status layout = LaunchAddRmsNorm({nullptr, a.get(), w.get(), 1e-6f, a.get(), 2, 32, 3}, 0);
  EXPECT_EQ(layout.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(layout.message().find("rows_per_block"), std::string::npos) << layout.message();
}

TEST_F(OpsGpuTest, BertEmbeddingRejectsBadLayout) {
  DeviceBuffer<bf16> t;
  DeviceBuffer<int32_t> ids;
  ASSERT_OK(t.Allocate(64));
  ASSERT_OK(ids.Allocate(2));
  BertEmbeddingParams p;
  p.ids = p.positions = ids.get();
  p.word = p.pos = p.type = p.gamma = p.beta = t.get();
  p.out = t.get();
  p.vocab = p.max_positions = p.num_types = 1;
  p.rows = 2, p.dim = 32, p.rows_per_block = 3;
  const Status st = LaunchBertEmbedding(p, 0);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("rows_per_block"), std::string::npos) << st.message();
}

TEST_F(OpsGpuTest, Conversions) {
  uint64_t seed = 3000;
  for (int64_t n : {int64_t{1}, int64_t{1001}, int64_t{(1 << 20) + 3}}) {
    std::vector<float> src = RandomBf16(n, seed++, -3.f, 3.f);
    // Values that are not bf16-representable, so rounding is exercised, including ties.
    for (int64_t i = 0; i < n; ++i) src[i] *= 1.f + 1.0f / 3.f * (i % 5) / 128.f;
    if (n > 4) src[1] = 1e30f, src[2] = -1e-30f, src[3] = 1.00390625f;  // 1 + 2^-8: a tie
    OpCase c;
    c.op = "F32ToBf16";
    c.shape = "n=" + std::to_string(n);
    // Output 0: fp32 -> bf16; output 1: that bf16 back to fp32 (Bf16ToF32).
    c.outputs = {Exact("", Elem::kBf16, n, 1), Exact("Bf16ToF32", Elem::kF32, n, 1)};
    c.gpu = [=](const std::vector<void*>& out) -> Status {
      DeviceBuffer<float> d_src;
      PETAL_RETURN_IF_ERROR(d_src.Allocate(n));
      PETAL_RETURN_IF_ERROR(d_src.CopyFromHost(src.data(), n));
      PETAL_RETURN_IF_ERROR(LaunchF32ToBf16(d_src.get(), static_cast<bf16*>(out[0]), n, 0));
      PETAL_RETURN_IF_ERROR(
          LaunchBf16ToF32(static_cast<bf16*>(out[0]), static_cast<float*>(out[1]), n, 0));
      return SyncDevice();
    };
    c.reference = [=] {
      std::vector<float> ref(n);
      for (int64_t i = 0; i < n; ++i) ref[i] = RoundBf16(src[i]);
      return std::vector<std::vector<float>>{ref, ref};
    };
    EXPECT_TRUE(RunOpCase(c));
  }
}

}  // namespace
}  // namespace petal::cuda::test
