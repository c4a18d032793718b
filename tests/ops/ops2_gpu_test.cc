// GPU op tests, part 2: q/k norm + rotary, SwiGLU, GELU, pooling as harness cases (op_harness.h),
// and a CUDA-graph replay check of the graph-safety contract (hand-written: it captures a graph).
// Same method as part 1 (random bf16 inputs, poisoned outputs, CPU reference on the same inputs).
// Tolerances:
//   QkNormRope, SiluMul, Gelu: max_rel <= 1e-2 (floored at the row RMS), row cosine >= 0.9999;
//     the v part of QKV must be bit-identical.
//   Pool (fp32 output from bf16 inputs, fp32 sums): max_rel <= 1e-4, cosine >= 0.999999;
//     CLS / last-token without normalisation are exact copies but share the same tolerance.
//   PoolSpans (late chunking: per-span mean / first / last, per-span normalisation, empty padding
//     spans give zeros): as Pool, against cpu::PoolSpans;
//   (DenseRows: in ops3_gpu_test.cc.)
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/reference_ops.h"
#include "kernels/cpu/span_pool.h"
#include "kernels/cuda/ops.h"
#include "op_harness.h"

namespace petal::cuda::test {
namespace {

class OpsGpuTest2 : public GpuTest {};

constexpr Tolerance kElemTol{1e-2, 0.9999};
constexpr Tolerance kPoolTol{1e-4, 0.999999};

struct RopeCase {
  int hq, hkv, d;
  bool norm, rope;
  double theta;
};

void RunQkNormRope(const RopeCase& c, const std::vector<int>& lens, uint64_t seed,
                   bool table = false, int heads_per_warp = 0) {
  const auto cu = CuSeqlens(lens);
  const int rows = cu.back() + 2, num_seqs = static_cast<int>(lens.size());
  const int stride = (c.hq + 2 * c.hkv) * c.d;
  const size_t n = static_cast<size_t>(rows) * stride;
  const auto qkv = RandomBf16(n, seed);
  const auto qw = RandomBf16(c.d, seed + 1, 0.5f, 1.5f), kw = RandomBf16(c.d, seed + 2, 0.5f, 1.5f);
  OpCase oc;
  oc.op = "QkNormRope";
  oc.shape = Describe(lens) + " H" + std::to_string(c.hq) + "/" + std::to_string(c.hkv) + " d" +
             std::to_string(c.d) + (c.norm ? " norm" : "") + (c.rope ? " rope" : "") +
             (table ? " table" : "") +
             (heads_per_warp ? " hpw" + std::to_string(heads_per_warp) : "");
  // In place on the QKV rows; the v part (columns from (hq + hkv) * d) must stay bit-identical.
  OpOutput o;
  o.rows = rows, o.cols = stride, o.tol = kElemTol, o.initial = qkv;
  o.exact_from_col = static_cast<int64_t>(c.hq + c.hkv) * c.d;
  oc.outputs = {o};
  oc.gpu = [=](const std::vector<void*>& out) -> Status {
    PETAL_ASSIGN_OR_RETURN(auto d_qw, UploadBf16(qw));
    PETAL_ASSIGN_OR_RETURN(auto d_kw, UploadBf16(kw));
    PETAL_ASSIGN_OR_RETURN(auto d_cu, UploadInts(cu));
    DeviceBuffer<int32_t> d_pos;
    PETAL_RETURN_IF_ERROR(d_pos.Allocate(rows));
    PETAL_RETURN_IF_ERROR(LaunchSeqInfo({d_cu.get(), num_seqs, rows, nullptr, d_pos.get()}, 0));
    QkNormRopeParams p;
    p.qkv = static_cast<bf16*>(out[0]), p.rows = rows, p.row_stride = stride;
    p.num_q_heads = c.hq, p.num_kv_heads = c.hkv, p.head_dim = c.d;
    p.q_norm_weight = c.norm ? d_qw.get() : nullptr;
    p.k_norm_weight = c.norm ? d_kw.get() : nullptr;
    p.eps = 1e-6f;
    p.positions = c.rope ? d_pos.get() : nullptr;
    p.theta = c.theta;
    p.heads_per_warp = heads_per_warp;
    DeviceBuffer<float2> d_table;
    if (table) {
      const auto host = RopeTable(rows, c.d, c.theta);
      PETAL_RETURN_IF_ERROR(d_table.Allocate(host.size()));
      PETAL_RETURN_IF_ERROR(d_table.CopyFromHost(host.data(), host.size()));
      p.rope_table = d_table.get();
      p.rope_table_rows = rows;
    }
    PETAL_RETURN_IF_ERROR(LaunchQkNormRope(p, 0));
    return SyncDevice();
  };
  oc.reference = [=] {
    std::vector<int32_t> positions(rows);
    cpu::SeqInfo(cu.data(), num_seqs, rows, nullptr, positions.data());
    std::vector<float> ref = qkv;
    cpu::QkNormRope(ref.data(), rows, stride, c.hq, c.hkv, c.d, c.norm ? qw.data() : nullptr,
                    c.norm ? kw.data() : nullptr, 1e-6f, c.rope ? positions.data() : nullptr,
                    c.theta);
    return std::vector<std::vector<float>>{ref};
  };
  EXPECT_TRUE(RunOpCase(oc));
}

TEST_F(OpsGpuTest2, QkNormRope) {
  const RopeCase cases[] = {
      {16, 8, 128, true, true, 1e6},   // Qwen3 0.6B
      {32, 8, 128, true, true, 1e6},   // Qwen3 4B
      {4, 2, 64, true, true, 1e4},     //
      {12, 12, 32, false, true, 1e4},  // rope only, MHA
      {3, 1, 34, true, true, 1e4},     // half = 17: odd half, partial warp
      {2, 1, 128, true, false, 1e6},   // norm only
  };
  uint64_t seed = 5000;
  for (const RopeCase& c : cases)
    for (const auto& lens : RaggedCases()) {
      ASSERT_NO_FATAL_FAILURE(RunQkNormRope(c, lens, seed));
      ASSERT_NO_FATAL_FAILURE(RunQkNormRope(c, lens, seed + 1, /*table=*/true));
      // Both warp layouts of the vectorised kernel, whatever the batch size would pick.
      for (int hpw : {1, 4}) ASSERT_NO_FATAL_FAILURE(RunQkNormRope(c, lens, seed + 2, true, hpw));
      seed += 3;
    }
  // Positions up to 32K: fp64 angle reduction must keep the rotation accurate at the far end.
  ASSERT_NO_FATAL_FAILURE(RunQkNormRope({2, 1, 128, true, true, 1e6}, {32768, 5}, 7000));
  ASSERT_NO_FATAL_FAILURE(RunQkNormRope({2, 1, 128, true, true, 1e6}, {32768, 5}, 7001, true));
  // Large batches with item counts that are not a multiple of the block's warps.
  ASSERT_NO_FATAL_FAILURE(RunQkNormRope({16, 8, 128, true, true, 1e6}, {1000, 7}, 7002, true));
  ASSERT_NO_FATAL_FAILURE(RunQkNormRope({32, 8, 128, true, true, 1e6}, {513, 600}, 7003, true));
  ASSERT_NO_FATAL_FAILURE(RunQkNormRope({5, 2, 64, true, true, 1e4}, {3001}, 7004, true));
  // Head counts that leave the last group of 4 partial (7, 13), and norm without rotary.
  ASSERT_NO_FATAL_FAILURE(RunQkNormRope({5, 2, 64, true, true, 1e4}, {1500, 3}, 7005, true, 4));
  ASSERT_NO_FATAL_FAILURE(RunQkNormRope({9, 4, 256, true, true, 1e6}, {700, 2}, 7006, true, 4));
  ASSERT_NO_FATAL_FAILURE(RunQkNormRope({16, 8, 128, true, false, 1e6}, {1100}, 7007, false, 4));
  {  // A heads_per_warp other than 0, 1 or 4 is refused before any launch.
    QkNormRopeParams p;
    p.qkv = reinterpret_cast<bf16*>(uintptr_t{256}), p.rows = 1, p.row_stride = 512;
    p.num_q_heads = 2, p.num_kv_heads = 1, p.head_dim = 128, p.heads_per_warp = 2;
    EXPECT_FALSE(LaunchQkNormRope(p, 0).ok());
  }
}

TEST_F(OpsGpuTest2, SiluMul) {
  uint64_t seed = 6000;
  for (int inter : {2, 6, 98, 1536, 3072, 9728}) {
    for (int rows : {1, 77, 1000}) {
      const auto gu = RandomBf16(static_cast<size_t>(rows) * 2 * inter, seed++, -6.f, 6.f);
      OpCase c;
      c.op = "SiluMul";
      c.shape = "rows=" + std::to_string(rows) + " inter=" + std::to_string(inter);
      OpOutput o;
      o.rows = rows, o.cols = inter, o.tol = kElemTol;
      c.outputs = {o};
      c.gpu = [=](const std::vector<void*>& out) -> Status {
        PETAL_ASSIGN_OR_RETURN(auto d_gu, UploadBf16(gu));
        PETAL_RETURN_IF_ERROR(
            LaunchSiluMul({d_gu.get(), static_cast<bf16*>(out[0]), rows, inter}, 0));
        return SyncDevice();
      };
      c.reference = [=] {
        std::vector<float> ref(static_cast<size_t>(rows) * inter);
        cpu::SiluMul(gu.data(), ref.data(), rows, inter);
        return std::vector<std::vector<float>>{ref};
      };
      EXPECT_TRUE(RunOpCase(c));
    }
  }
}

TEST_F(OpsGpuTest2, Gelu) {
  uint64_t seed = 6500;
  const std::pair<int, int> shapes[] = {{1, 2}, {3, 98}, {77, 1536}, {1000, 1536}, {7, 1002}};
  for (auto [rows, dim] : shapes) {
    for (bool in_place : {false, true}) {
      const size_t n = static_cast<size_t>(rows) * dim;
      const auto x = RandomBf16(n, seed++, -6.f, 6.f);
      OpCase c;
      c.op = "Gelu";
      c.shape = "rows=" + std::to_string(rows) + " dim=" + std::to_string(dim) +
                (in_place ? " inplace" : "");
      OpOutput o;
      o.rows = rows, o.cols = dim, o.tol = kElemTol;
      if (in_place) o.initial = x;
      c.outputs = {o};
      c.gpu = [=](const std::vector<void*>& out) -> Status {
        bf16* dst = static_cast<bf16*>(out[0]);
        PETAL_ASSIGN_OR_RETURN(auto d_x, UploadBf16(x));
        PETAL_RETURN_IF_ERROR(
            LaunchGelu({in_place ? dst : d_x.get(), dst, static_cast<int64_t>(n)}, 0));
        return SyncDevice();
      };
      c.reference = [=] {
        std::vector<float> ref = x;
        cpu::Gelu(ref.data(), static_cast<int64_t>(n));
        return std::vector<std::vector<float>>{ref};
      };
      EXPECT_TRUE(RunOpCase(c));
    }
  }
}

const char* ModeName(cpu::Pooling m) {
  return m == cpu::Pooling::kMean ? "mean" : (m == cpu::Pooling::kCls ? "cls" : "last");
}

// The named reference (kernels/cpu/reference_ops.h) as a vector.
std::vector<float> PoolReference(const std::vector<float>& hidden, const std::vector<int32_t>& cu,
                                 int dim, int out_dims, cpu::Pooling mode, bool normalize) {
  const int num_seqs = static_cast<int>(cu.size()) - 1;
  std::vector<float> ref(static_cast<size_t>(num_seqs) * out_dims);
  cpu::PoolDims(hidden.data(), cu.data(), num_seqs, dim, out_dims, mode, normalize, ref.data());
  return ref;
}

TEST_F(OpsGpuTest2, Pool) {
  uint64_t seed = 8000;
  auto cases = RaggedCases();
  cases.push_back({5000, 0, 3});
  for (int dim : {2, 32, 98, 384, 1024, 2560}) {
    std::vector<int> out_dim_cases = {dim};  // full, Matryoshka half, and a 2-wide head
    if (dim / 4 * 2 > 2) out_dim_cases.push_back(dim / 4 * 2);
    if (dim > 2) out_dim_cases.push_back(2);
    for (int out_dims : out_dim_cases) {
      for (const auto& lens : cases) {
        const auto cu = CuSeqlens(lens);
        const int num_seqs = static_cast<int>(lens.size()), rows = cu.back() + 1;
        const auto hidden = RandomBf16(static_cast<size_t>(rows) * dim, seed++, -2.f, 2.f);
        for (auto mode : {cpu::Pooling::kMean, cpu::Pooling::kCls, cpu::Pooling::kLastToken}) {
          for (bool normalize : {false, true}) {
            OpCase c;
            c.op = "Pool";
            c.shape = Describe(lens) + " " + ModeName(mode) + (normalize ? "+l2" : "") +
                      " dim=" + std::to_string(dim) + "->" + std::to_string(out_dims);
            OpOutput o;
            o.elem = Elem::kF32, o.rows = num_seqs, o.cols = out_dims, o.tol = kPoolTol;
            c.outputs = {o};
            c.gpu = [=, &hidden, &cu](const std::vector<void*>& out) -> Status {
              PETAL_ASSIGN_OR_RETURN(auto d_hidden, UploadBf16(hidden));
              PETAL_ASSIGN_OR_RETURN(auto d_cu, UploadInts(cu));
              PETAL_RETURN_IF_ERROR(LaunchPool({d_hidden.get(), d_cu.get(), num_seqs, dim, out_dims,
                                                mode, normalize, static_cast<float*>(out[0])},
                                               0));
              return SyncDevice();
            };
            c.reference = [=, &hidden, &cu] {
              return std::vector<std::vector<float>>{
                  PoolReference(hidden, cu, dim, out_dims, mode, normalize)};
            };
            EXPECT_TRUE(RunOpCase(c));
          }
        }
      }
    }
  }
}

// Span pooling (cuda::LaunchPoolSpans vs cpu::PoolSpans): random spans over a ragged batch of
// hidden states, mixed flags (mean / first / last token, normalised or not), overlapping spans,
// and trailing empty spans as the engine pads span buckets with.
TEST_F(OpsGpuTest2, PoolSpans) {
  uint64_t seed = 8500;
  for (int dim : {32, 384, 1024, 2560}) {
    for (auto [spans_n, padding] : {std::pair{1, 0}, std::pair{7, 1}, std::pair{54, 10}}) {
      const int rows = 3000;
      const auto hidden = RandomBf16(static_cast<size_t>(rows) * dim, seed++, -2.f, 2.f);
      std::mt19937 rng(static_cast<uint32_t>(seed++));
      std::vector<int32_t> spans;
      for (int i = 0; i < spans_n; ++i) {
        const int a = static_cast<int>(rng() % rows);
        const int len = 1 + static_cast<int>(rng() % std::min(rows - a, i % 3 == 0 ? 2000 : 40));
        spans.insert(spans.end(),
                     {a, a + len, static_cast<int32_t>(rng() % 3) | (rng() % 2 ? 0x100 : 0)});
      }
      for (int i = 0; i < padding; ++i) spans.insert(spans.end(), {0, 0, 0});
      const int n = spans_n + padding;
      OpCase c;
      c.op = "PoolSpans";
      c.shape = std::to_string(spans_n) + " spans +" + std::to_string(padding) +
                " empty dim=" + std::to_string(dim);
      OpOutput o;
      o.elem = Elem::kF32, o.rows = n, o.cols = dim, o.tol = kPoolTol;
      c.outputs = {o};
      c.gpu = [=, &hidden](const std::vector<void*>& out) -> Status {
        PETAL_ASSIGN_OR_RETURN(auto d_hidden, UploadBf16(hidden));
        PETAL_ASSIGN_OR_RETURN(auto d_spans, UploadInts(spans));
        PETAL_RETURN_IF_ERROR(LaunchPoolSpans(
            {d_hidden.get(), d_spans.get(), n, dim, 0, static_cast<float*>(out[0])}, 0));
        return SyncDevice();
      };
      c.reference = [=, &hidden] {
        std::vector<float> ref(static_cast<size_t>(n) * dim);
        cpu::PoolSpans(hidden.data(), spans.data(), n, dim, ref.data());
        return std::vector<std::vector<float>>{ref};
      };
      EXPECT_TRUE(RunOpCase(c));
    }
  }
}

// The score heads' dense layer: fp32 rows x bf16 weights, fp32 accumulation (cpu::DenseRows on
// the same bf16-valued weights). Shapes: a cross-encoder head (H x H + tanh, then 1 x H) and an
// LM reranker's two rows, for MiniLM / bge-base / Qwen3-0.6B widths.
// Graph safety: capture SeqInfo -> BertEmbedding -> Pool once, then replay with different
// cu_seqlens, ids and lengths written into the same device buffers. The replayed results must
// match the reference for each new batch (nothing per-batch was frozen into the graph).
TEST_F(OpsGpuTest2, GraphReplayWithNewBatches) {
  const int dim = 384, vocab = 300, max_pos = 512, rows = 200, num_seqs = 6;
  const auto word = RandomBf16(static_cast<size_t>(vocab) * dim, 1);
  const auto pos = RandomBf16(static_cast<size_t>(max_pos) * dim, 2);
  const auto type = RandomBf16(static_cast<size_t>(dim), 3);
  const auto gamma = RandomBf16(dim, 4, 0.5f, 1.5f), beta = RandomBf16(dim, 5, -0.5f, 0.5f);
  ASSERT_OK_AND_ASSIGN(auto d_word, UploadBf16(word));
  ASSERT_OK_AND_ASSIGN(auto d_pos, UploadBf16(pos));
  ASSERT_OK_AND_ASSIGN(auto d_type, UploadBf16(type));
  ASSERT_OK_AND_ASSIGN(auto d_gamma, UploadBf16(gamma));
  ASSERT_OK_AND_ASSIGN(auto d_beta, UploadBf16(beta));
  DeviceBuffer<int32_t> d_cu, d_ids, d_positions;
  DeviceBuffer<bf16> d_hidden;
  DeviceBuffer<float> d_out;
  ASSERT_OK(d_cu.Allocate(num_seqs + 1));
  ASSERT_OK(d_ids.Allocate(rows));
  ASSERT_OK(d_positions.Allocate(rows));
  ASSERT_OK(d_hidden.Allocate(static_cast<size_t>(rows) * dim));
  ASSERT_OK(d_out.Allocate(static_cast<size_t>(num_seqs) * dim));

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  BertEmbeddingParams e;
  e.ids = d_ids.get(), e.positions = d_positions.get(), e.word = d_word.get();
  e.pos = d_pos.get(), e.type = d_type.get(), e.vocab = vocab, e.max_positions = max_pos;
  e.num_types = 1, e.gamma = d_gamma.get(), e.beta = d_beta.get(), e.out = d_hidden.get();
  e.rows = rows, e.dim = dim;
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status s1 = LaunchSeqInfo({d_cu.get(), num_seqs, rows, nullptr, d_positions.get()}, stream);
  const Status s2 = LaunchBertEmbedding(e, stream);
  const Status s3 = LaunchPool(
      {d_hidden.get(), d_cu.get(), num_seqs, dim, dim, cpu::Pooling::kMean, true, d_out.get()},
      stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_OK(s1);
  ASSERT_OK(s2);
  ASSERT_OK(s3);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  const std::vector<std::vector<int>> batches = {
      {10, 0, 50, 1, 100, 39}, {0, 0, 0, 0, 0, 200}, {1, 2, 3, 4, 5, 6}};
  uint64_t seed = 9000;
  for (const auto& lens : batches) {
    const auto cu = CuSeqlens(lens);
    const auto ids = RandomInts(rows, seed++, 0, vocab);
    ASSERT_OK(d_cu.CopyFromHost(cu.data(), cu.size()));
    ASSERT_OK(d_ids.CopyFromHost(ids.data(), ids.size()));
    ASSERT_EQ(cudaMemset(d_out.get(), 0xFF, d_out.bytes()), cudaSuccess);
    // The copies above ran on the legacy stream, which does not order a non-blocking stream.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::vector<float> got(d_out.size());
    ASSERT_OK(d_out.CopyToHost(got.data(), got.size()));
    std::vector<float> sum(static_cast<size_t>(rows) * dim), hidden(sum.size());
    for (int t = 0; t < rows; ++t) {
      int p = 0;
      for (int s = 0; s < num_seqs; ++s)
        if (t >= cu[s] && t < cu[s + 1]) p = t - cu[s];
      for (int i = 0; i < dim; ++i)
        sum[static_cast<size_t>(t) * dim + i] = word[static_cast<size_t>(ids[t]) * dim + i] +
                                                pos[static_cast<size_t>(p) * dim + i] + type[i];
    }
    cpu::LayerNorm(sum.data(), gamma.data(), beta.data(), 1e-12f, hidden.data(), rows, dim);
    for (auto& h : hidden) h = RoundBf16(h);  // the GPU pools the bf16 hidden states
    const auto ref = PoolReference(hidden, cu, dim, dim, cpu::Pooling::kMean, true);
    // Hidden states may differ by one bf16 rounding step from the CPU LayerNorm's, hence 1e-2.
    EXPECT_TRUE(CheckClose("GraphReplay", Describe(lens), got, ref, num_seqs, dim, kElemTol));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace petal::cuda::test
