// GPU op tests, part 1: per-token sequence info, embeddings, residual + norms, conversions. Every
// op runs on random bf16 inputs against the CPU reference (kernels/cpu/ops.h) evaluated on the
// same bf16-rounded inputs, with outputs poisoned (0xFF = NaN) beforehand and guard regions
// checked afterwards. Tolerances (bf16 output: one rounding is <= 2^-9 relative):
//   norms, embeddings+LN: max_rel <= 1e-2 (relative, floored at the row RMS), row cosine >= 0.9999
//   gathers, residual sums, conversions, seq info: exact.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/ops.h"
#include "op_test_util.h"

namespace petal::cuda::test {
namespace {

class OpsGpuTest : public GpuTest {};

constexpr Tolerance kNormTol{1e-2, 0.9999};

std::string Dims(int rows, int dim) {
  return "rows=" + std::to_string(rows) + " dim=" + std::to_string(dim);
}

int64_t CountMismatches(const std::vector<float>& got, const std::vector<float>& ref) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    bad += !(got[i] == ref[i]) && !(std::isnan(got[i]) && std::isnan(ref[i]));
  return bad;
}

TEST_F(OpsGpuTest, SeqInfo) {
  for (const auto& lens : RaggedCases()) {
    for (int pad : {0, 5}) {
      const auto cu = CuSeqlens(lens);
      const int num_seqs = static_cast<int>(lens.size()), rows = cu.back() + pad;
      if (rows == 0) continue;
      ASSERT_OK_AND_ASSIGN(auto d_cu, UploadInts(cu));
      Guarded<int32_t> ids, pos;
      ASSERT_OK(ids.Init(rows, 0x7F));
      ASSERT_OK(pos.Init(rows, 0x7F));
      ASSERT_OK(LaunchSeqInfo({d_cu.get(), num_seqs, rows, ids.get(), pos.get()}, 0));
      ASSERT_OK(SyncDevice());
      ASSERT_OK_AND_ASSIGN(auto got_ids, ids.Fetch());
      ASSERT_OK_AND_ASSIGN(auto got_pos, pos.Fetch());
      int64_t bad = 0;
      for (int t = 0; t < rows; ++t) {
        int sid = -1, p = 0;
        for (int s = 0; s < num_seqs; ++s)
          if (t >= cu[s] && t < cu[s + 1]) sid = s, p = t - cu[s];
        bad += got_ids[t] != sid || got_pos[t] != p;
      }
      EXPECT_TRUE(RecordExact("SeqInfo", Describe(lens) + " pad=" + std::to_string(pad), bad));
      EXPECT_TRUE(ids.GuardIntact() && pos.GuardIntact());
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
      ASSERT_OK_AND_ASSIGN(auto d_table, UploadBf16(table));
      ASSERT_OK_AND_ASSIGN(auto d_ids, UploadInts(ids));
      Guarded<bf16> out;
      ASSERT_OK(out.Init(static_cast<size_t>(rows) * dim));
      ASSERT_OK(LaunchEmbedding({d_ids.get(), d_table.get(), vocab, out.get(), rows, dim}, 0));
      ASSERT_OK(SyncDevice());
      ASSERT_OK_AND_ASSIGN(auto got, DownloadBf16(out.get(), out.n));
      std::vector<float> ref(out.n, 0.f);
      for (int t = 0; t < rows; ++t)
        if (ids[t] >= 0 && ids[t] < vocab)
          for (int i = 0; i < dim; ++i)
            ref[static_cast<size_t>(t) * dim + i] = table[static_cast<size_t>(ids[t]) * dim + i];
      EXPECT_TRUE(RecordExact("Embedding", Dims(rows, dim), CountMismatches(got, ref)));
      EXPECT_TRUE(out.GuardIntact());
    }
  }
}

TEST_F(OpsGpuTest, BertEmbedding) {
  const int vocab = 500, max_pos = 1024, types = 2;
  uint64_t seed = 100;
  for (int dim : {32, 98, 384, 1024}) {
    for (const auto& lens : RaggedCases()) {
      for (bool with_types : {true, false}) {
        const auto cu = CuSeqlens(lens);
        const int rows = cu.back() + 3, num_seqs = static_cast<int>(lens.size());
        const auto word = RandomBf16(static_cast<size_t>(vocab) * dim, seed++);
        const auto pos = RandomBf16(static_cast<size_t>(max_pos) * dim, seed++);
        const auto type = RandomBf16(static_cast<size_t>(types) * dim, seed++);
        const auto gamma = RandomBf16(dim, seed++, 0.5f, 1.5f);
        const auto beta = RandomBf16(dim, seed++, -0.5f, 0.5f);
        const auto ids = RandomInts(rows, seed++, 0, vocab);
        const auto tt = RandomInts(rows, seed++, 0, types);
        ASSERT_OK_AND_ASSIGN(auto d_cu, UploadInts(cu));
        ASSERT_OK_AND_ASSIGN(auto d_ids, UploadInts(ids));
        ASSERT_OK_AND_ASSIGN(auto d_tt, UploadInts(tt));
        ASSERT_OK_AND_ASSIGN(auto d_word, UploadBf16(word));
        ASSERT_OK_AND_ASSIGN(auto d_pos, UploadBf16(pos));
        ASSERT_OK_AND_ASSIGN(auto d_type, UploadBf16(type));
        ASSERT_OK_AND_ASSIGN(auto d_gamma, UploadBf16(gamma));
        ASSERT_OK_AND_ASSIGN(auto d_beta, UploadBf16(beta));
        DeviceBuffer<int32_t> d_positions;
        ASSERT_OK(d_positions.Allocate(rows));
        ASSERT_OK(LaunchSeqInfo({d_cu.get(), num_seqs, rows, nullptr, d_positions.get()}, 0));
        Guarded<bf16> out;
        ASSERT_OK(out.Init(static_cast<size_t>(rows) * dim));
        BertEmbeddingParams p;
        p.ids = d_ids.get();
        p.positions = d_positions.get();
        p.type_ids = with_types ? d_tt.get() : nullptr;
        p.word = d_word.get();
        p.pos = d_pos.get();
        p.type = d_type.get();
        p.vocab = vocab, p.max_positions = max_pos, p.num_types = types;
        p.gamma = d_gamma.get(), p.beta = d_beta.get(), p.eps = 1e-12f;
        p.out = out.get(), p.rows = rows, p.dim = dim;
        ASSERT_OK(LaunchBertEmbedding(p, 0));
        ASSERT_OK(SyncDevice());
        ASSERT_OK_AND_ASSIGN(auto got, DownloadBf16(out.get(), out.n));
        std::vector<float> sum(out.n), ref(out.n);
        for (int t = 0; t < rows; ++t) {
          int position = 0;  // padding tokens past the last sequence use position 0
          for (int s = 0; s < num_seqs; ++s)
            if (t >= cu[s] && t < cu[s + 1]) position = t - cu[s];
          const int ty = with_types ? tt[t] : 0;
          for (int i = 0; i < dim; ++i)
            sum[static_cast<size_t>(t) * dim + i] = word[static_cast<size_t>(ids[t]) * dim + i] +
                                                    pos[static_cast<size_t>(position) * dim + i] +
                                                    type[static_cast<size_t>(ty) * dim + i];
        }
        cpu::LayerNorm(sum.data(), gamma.data(), beta.data(), 1e-12f, ref.data(), rows, dim);
        EXPECT_TRUE(CheckClose(
            "BertEmbedding",
            Describe(lens) + " dim=" + std::to_string(dim) + (with_types ? " types" : ""), got, ref,
            rows, dim, kNormTol));
        EXPECT_TRUE(out.GuardIntact());
      }
    }
  }
}

TEST_F(OpsGpuTest, AddLayerNorm) {
  uint64_t seed = 1000;
  for (int dim : {2, 32, 96, 98, 384, 1000, 1024, 2560}) {
    for (int rows : {1, 3, 77, 1000}) {
      for (bool with_res : {true, false}) {
        for (bool in_place : {false, true}) {
          const size_t n = static_cast<size_t>(rows) * dim;
          const auto x = RandomBf16(n, seed++, -2.f, 2.f);
          const auto r = RandomBf16(n, seed++, -2.f, 2.f);
          const auto gamma = RandomBf16(dim, seed++, 0.5f, 1.5f);
          const auto beta = RandomBf16(dim, seed++, -0.5f, 0.5f);
          ASSERT_OK_AND_ASSIGN(auto d_x, UploadBf16(x));
          ASSERT_OK_AND_ASSIGN(auto d_r, UploadBf16(r));
          ASSERT_OK_AND_ASSIGN(auto d_gamma, UploadBf16(gamma));
          ASSERT_OK_AND_ASSIGN(auto d_beta, UploadBf16(beta));
          Guarded<bf16> out;
          ASSERT_OK(out.Init(n));
          // In place aliases the residual when there is one (BERT: h = LN(attn + h)), else x.
          bf16* dst = in_place ? (with_res ? d_r.get() : d_x.get()) : out.get();
          ASSERT_OK(LaunchAddLayerNorm({d_x.get(), with_res ? d_r.get() : nullptr, d_gamma.get(),
                                        d_beta.get(), 1e-12f, dst, rows, dim},
                                       0));
          ASSERT_OK(SyncDevice());
          ASSERT_OK_AND_ASSIGN(auto got, DownloadBf16(dst, n));
          std::vector<float> s(n), ref(n);
          for (size_t i = 0; i < n; ++i) s[i] = with_res ? RoundBf16(x[i] + r[i]) : x[i];
          cpu::LayerNorm(s.data(), gamma.data(), beta.data(), 1e-12f, ref.data(), rows, dim);
          EXPECT_TRUE(
              CheckClose("AddLayerNorm",
                         Dims(rows, dim) + (with_res ? " +res" : "") + (in_place ? " inplace" : ""),
                         got, ref, rows, dim, kNormTol));
          if (!in_place) {
            EXPECT_TRUE(out.GuardIntact());
          }
        }
      }
    }
  }
}

TEST_F(OpsGpuTest, AddRmsNorm) {
  uint64_t seed = 2000;
  for (int dim : {2, 32, 98, 1000, 1024, 2560}) {
    for (int rows : {1, 3, 77, 1000}) {
      for (int variant = 0; variant < 3; ++variant) {  // 0: add, 1: no add, 2: no add in place
        const bool with_x = variant == 0, in_place = variant == 2;
        const size_t n = static_cast<size_t>(rows) * dim;
        const auto x = RandomBf16(n, seed++, -2.f, 2.f);
        const auto r = RandomBf16(n, seed++, -2.f, 2.f);
        const auto w = RandomBf16(dim, seed++, 0.5f, 1.5f);
        ASSERT_OK_AND_ASSIGN(auto d_x, UploadBf16(x));
        ASSERT_OK_AND_ASSIGN(auto d_r, UploadBf16(r));
        ASSERT_OK_AND_ASSIGN(auto d_w, UploadBf16(w));
        Guarded<bf16> out;
        ASSERT_OK(out.Init(n));
        bf16* dst = in_place ? d_r.get() : out.get();
        ASSERT_OK(LaunchAddRmsNorm(
            {with_x ? d_x.get() : nullptr, d_r.get(), d_w.get(), 1e-6f, dst, rows, dim}, 0));
        ASSERT_OK(SyncDevice());
        ASSERT_OK_AND_ASSIGN(auto got, DownloadBf16(dst, n));
        std::vector<float> s(n), ref(n);
        for (size_t i = 0; i < n; ++i) s[i] = with_x ? RoundBf16(r[i] + x[i]) : r[i];
        cpu::RmsNorm(s.data(), w.data(), 1e-6f, ref.data(), rows, dim);
        const std::string name =
            Dims(rows, dim) + (with_x ? " +x" : "") + (in_place ? " inplace" : "");
        EXPECT_TRUE(CheckClose("AddRmsNorm", name, got, ref, rows, dim, kNormTol));
        if (with_x) {
          ASSERT_OK_AND_ASSIGN(auto got_r, DownloadBf16(d_r.get(), n));
          EXPECT_TRUE(RecordExact("AddRmsNorm.res", name, CountMismatches(got_r, s)));
        }
        if (!in_place) {
          EXPECT_TRUE(out.GuardIntact());
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
}

TEST_F(OpsGpuTest, Conversions) {
  uint64_t seed = 3000;
  for (int64_t n : {int64_t{1}, int64_t{1001}, int64_t{(1 << 20) + 3}}) {
    std::vector<float> src = RandomBf16(n, seed++, -3.f, 3.f);
    // Values that are not bf16-representable, so rounding is exercised, including ties.
    for (int64_t i = 0; i < n; ++i) src[i] *= 1.f + 1.0f / 3.f * (i % 5) / 128.f;
    if (n > 4) src[1] = 1e30f, src[2] = -1e-30f, src[3] = 1.00390625f;  // 1 + 2^-8: a tie
    DeviceBuffer<float> d_src;
    ASSERT_OK(d_src.Allocate(n));
    ASSERT_OK(d_src.CopyFromHost(src.data(), n));
    Guarded<bf16> out;
    ASSERT_OK(out.Init(n));
    ASSERT_OK(LaunchF32ToBf16(d_src.get(), out.get(), n, 0));
    Guarded<float> back;
    ASSERT_OK(back.Init(n));
    ASSERT_OK(LaunchBf16ToF32(out.get(), back.get(), n, 0));
    ASSERT_OK(SyncDevice());
    ASSERT_OK_AND_ASSIGN(auto got, DownloadBf16(out.get(), n));
    ASSERT_OK_AND_ASSIGN(auto got_back, back.Fetch());
    std::vector<float> ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = RoundBf16(src[i]);
    EXPECT_TRUE(RecordExact("F32ToBf16", "n=" + std::to_string(n), CountMismatches(got, ref)));
    EXPECT_TRUE(RecordExact("Bf16ToF32", "n=" + std::to_string(n), CountMismatches(got_back, ref)));
    EXPECT_TRUE(out.GuardIntact() && back.GuardIntact());
  }
}

}  // namespace
}  // namespace petal::cuda::test
