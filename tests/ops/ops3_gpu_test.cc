// GPU op tests, part 3: the multi-vector (ColBERT) ops as harness cases (op_harness.h): per-row
// L2 normalisation to fp32 (LaunchNormalizeRows against cpu::L2NormalizeRows) and ragged
// attention with per-sequence key lengths (AttentionParams::kv_lens: query expansion tokens that
// no token attends to), flash and reference kernels against cpu::Attention with kv_lens on the
// same bf16 values. Tolerances: NormalizeRows as Pool (max_rel <= 1e-4, cosine >= 0.999999);
// attention as part 1's attention cases (max_rel <= 2e-2, cosine >= 0.9999: bf16 P and output).
// And SPLADE's pooling (LaunchSparseMaxPool against cpu::SparseMaxPool on the same bf16 logits,
// over chunks that cut sequences, with bucket padding and an empty sequence): max_rel <= 1e-5
// (both take log1p of the same float; only log1pf's last bit may differ), cosine >= 0.999999.
// And SPLADE's compaction (LaunchSparseCompact against cpu::SparseCompact, with and without a
// per-row top-k, on rows with ties, NaN and all-zero rows): counts, indices and values exact, into
// device memory (the harness) and into mapped page-locked host memory (the engine's way).
// And the score heads' LaunchDenseRows against cpu::DenseRows (fp32 accumulation, a different
// summation order than the reference): as Pool (max_rel <= 1e-4, cosine >= 0.999999); a lone
// logit (1 row, 1-2 outputs): max_rel <= 1e-3.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/reference_ops.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/score_ops.h"
#include "op_harness.h"

namespace petal::cuda::test {
namespace {

class OpsGpuTest3 : public GpuTest {};

constexpr Tolerance kNormTol{1e-4, 0.999999};
constexpr Tolerance kAttnTol{2e-2, 0.9999};
constexpr Tolerance kDenseTol{1e-4, 0.999999};

TEST_F(OpsGpuTest3, NormalizeRows) {
  uint64_t seed = 9100;
  const std::pair<int, int> shapes[] = {{1, 24}, {16, 128}, {300, 128}, {77, 96}, {5, 1000}};
  for (auto [rows, dim] : shapes) {
    const auto x = RandomBf16(static_cast<size_t>(rows) * dim, seed++, -2.f, 2.f);
    OpCase c;
    c.op = "NormalizeRows";
    c.shape = "rows=" + std::to_string(rows) + " dim=" + std::to_string(dim);
    OpOutput o;
    o.elem = Elem::kF32, o.rows = rows, o.cols = dim, o.tol = kNormTol;
    c.outputs = {o};
    c.gpu = [=](const std::vector<void*>& out) -> Status {
      PETAL_ASSIGN_OR_RETURN(auto d_x, UploadBf16(x));
      PETAL_RETURN_IF_ERROR(
          LaunchNormalizeRows({d_x.get(), static_cast<float*>(out[0]), rows, dim}, 0));
      return SyncDevice();
    };
    c.reference = [=] {
      std::vector<float> ref(x.size());
      cpu::L2NormalizeRows(x.data(), rows, dim, ref.data());
      return std::vector<std::vector<float>>{ref};
    };
    EXPECT_TRUE(RunOpCase(c));
  }
}

// Queries padded with expansion tokens: sequence s attends to its first kv[s] tokens (0: all).
void RunKeyLengths(const std::vector<int>& lens, const std::vector<int32_t>& kv, int heads, int d,
                   bool reference_kernel, uint64_t seed) {
  const auto cu = CuSeqlens(lens);
  const int tokens = cu.back(), seqs = static_cast<int>(lens.size());
  const int stride = 3 * heads * d;
  const auto qkv = RandomBf16(static_cast<size_t>(tokens) * stride, seed, -2.f, 2.f);
  OpCase c;
  c.op = reference_kernel ? "ReferenceAttention.kv_lens" : "RaggedAttention.kv_lens";
  c.shape = Describe(lens) + " H" + std::to_string(heads) + " d" + std::to_string(d);
  OpOutput o;
  o.rows = tokens, o.cols = heads * d, o.tol = kAttnTol;
  c.outputs = {o};
  c.gpu = [=](const std::vector<void*>& out) -> Status {
    PETAL_ASSIGN_OR_RETURN(auto d_qkv, UploadBf16(qkv));
    PETAL_ASSIGN_OR_RETURN(auto d_cu, UploadInts(cu));
    PETAL_ASSIGN_OR_RETURN(auto d_kv, UploadInts(kv));
    AttentionParams p;
    p.q = d_qkv.get();
    p.k = d_qkv.get() + heads * d;
    p.v = d_qkv.get() + 2 * heads * d;
    p.q_stride = p.k_stride = p.v_stride = stride;
    p.out = static_cast<bf16*>(out[0]);
    p.cu_seqlens = d_cu.get();
    p.max_tokens = tokens;
    p.max_seqs = seqs;
    p.num_heads = p.num_kv_heads = heads;
    p.head_dim = d;
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    p.kv_lens = d_kv.get();
    if (reference_kernel) {
      PETAL_RETURN_IF_ERROR(LaunchReferenceAttention(p, 0));
    } else {
      DeviceBuffer<uint8_t> ws;
      PETAL_RETURN_IF_ERROR(ws.Allocate(AttentionWorkspaceBytes(tokens, seqs)));
      PETAL_RETURN_IF_ERROR(LaunchRaggedAttention(p, ws.get(), 0));
    }
    return SyncDevice();
  };
  c.reference = [=] {
    std::vector<float> ref(static_cast<size_t>(tokens) * heads * d);
    std::vector<int32_t> keys(seqs);
    for (int s = 0; s < seqs; ++s) keys[s] = kv[s] > 0 ? kv[s] : lens[s];
    cpu::Attention(qkv.data(), stride, qkv.data() + heads * d, stride, qkv.data() + 2 * heads * d,
                   stride, ref.data(), cu.data(), seqs, heads, heads, d, /*causal=*/false,
                   1.0f / std::sqrt(static_cast<float>(d)), keys.data());
    return std::vector<std::vector<float>>{ref};
  };
  EXPECT_TRUE(RunOpCase(c));
}

TEST_F(OpsGpuTest3, AttentionKeyLengths) {
  uint64_t seed = 9300;
  // ColBERT shapes: 32-token queries with 5..30 text tokens, documents (0: every key), a long
  // sequence whose keys stop inside a tile and one whose keys stop at a tile edge.
  const std::vector<int> lens = {32, 32, 180, 32, 300, 7, 64};
  const std::vector<int32_t> kv = {9, 30, 0, 5, 200, 0, 64};
  for (auto [heads, d] : {std::pair{12, 32}, std::pair{12, 64}, std::pair{16, 128}}) {
    for (bool reference_kernel : {false, true}) {
      RunKeyLengths(lens, kv, heads, d, reference_kernel, seed++);
    }
  }
}

// SPLADE pooling: logits of a ragged batch processed in chunks of `chunk` tokens into zeroed rows
// (the engine's loop, bert_splade_cuda.cc); the vocabulary is odd and the rows padded to ld.
TEST_F(OpsGpuTest3, SparseMaxPool) {
  uint64_t seed = 9400;
  struct Shape {
    std::vector<int> lens;
    int vocab, ld, chunk, padding;
  };
  const Shape shapes[] = {{{5, 0, 70, 130, 1}, 37, 40, 64, 0},
                          {{256, 256, 256}, 30522, 30528, 300, 64},
                          {{1}, 2, 2, 64, 0},
                          {{33, 7, 90}, 1001, 1008, 1000, 30}};
  for (const Shape& sh : shapes) {
    const auto cu = CuSeqlens(sh.lens);
    const int seqs = static_cast<int>(sh.lens.size()), tokens = cu.back() + sh.padding;
    const auto logits = RandomBf16(static_cast<size_t>(tokens) * sh.ld, seed++, -3.f, 2.f);
    OpCase c;
    c.op = "SparseMaxPool";
    c.shape = Describe(sh.lens) + " vocab=" + std::to_string(sh.vocab) +
              " chunk=" + std::to_string(sh.chunk) + " pad=" + std::to_string(sh.padding);
    OpOutput o;
    o.elem = Elem::kF32, o.rows = seqs, o.cols = sh.vocab, o.tol = {1e-5, 0.999999};
    o.initial.assign(static_cast<size_t>(seqs) * sh.vocab, 0.0f);
    c.outputs = {o};
    c.gpu = [=, &logits](const std::vector<void*>& out) -> Status {
      PETAL_ASSIGN_OR_RETURN(auto d_l, UploadBf16(logits));
      PETAL_ASSIGN_OR_RETURN(auto d_cu, UploadInts(cu));
      for (int row0 = 0; row0 < tokens; row0 += sh.chunk) {
        SparseMaxPoolParams p;
        p.logits = d_l.get() + static_cast<int64_t>(row0) * sh.ld;
        p.ld = sh.ld;
        p.row0 = row0;
        p.rows = std::min(sh.chunk, tokens - row0);
        p.vocab = sh.vocab;
        p.cu_seqlens = d_cu.get();
        p.num_seqs = seqs;
        p.out = static_cast<float*>(out[0]);
        PETAL_RETURN_IF_ERROR(LaunchSparseMaxPool(p, 0));
      }
      return SyncDevice();
    };
    c.reference = [=, &logits] {
      std::vector<float> ref(static_cast<size_t>(seqs) * sh.vocab, 0.0f);
      cpu::SparseMaxPool(logits.data(), sh.ld, 0, tokens, sh.vocab, cu.data(), seqs, ref.data());
      return std::vector<std::vector<float>>{ref};
    };
    EXPECT_TRUE(RunOpCase(c));
  }
}

// Pooled rows for SparseCompact: values on a coarse grid (ties), about half zeros, NaN in row 0.
std::vector<float> CompactRows(int rows, int ld, uint64_t seed) {
  const auto grid = RandomInts(static_cast<size_t>(rows) * ld, seed, -40, 41);
  std::vector<float> dense(grid.size());
  for (size_t i = 0; i < grid.size(); ++i) dense[i] = std::max(0, grid[i]) * 0.125f;
  if (!dense.empty()) dense[1] = std::nanf("");
  return dense;
}

StatusOr<DeviceBuffer<float>> UploadFloats(const std::vector<float>& v) {
  DeviceBuffer<float> d;
  PETAL_RETURN_IF_ERROR(d.Allocate(v.size()));
  PETAL_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

TEST_F(OpsGpuTest3, SparseCompact) {
  uint64_t seed = 9500;
  struct Shape {
    int rows, vocab, ld, k;  // k: -1 none; else every row's top-k (row 1 keeps all: k = vocab)
  };
  const Shape shapes[] = {{3, 37, 40, -1},       {5, 30522, 30522, -1},    {4, 1001, 1008, 7},
                          {7, 30522, 30528, 64}, {2, 250002, 250008, 400}, {1, 2, 2, 1}};
  for (const Shape& sh : shapes) {
    const auto dense = CompactRows(sh.rows, sh.ld, seed++);
    std::vector<int32_t> top_k(sh.rows, sh.k);
    if (sh.rows > 1) top_k[1] = sh.vocab;
    const int64_t stride = sh.vocab + 3;
    OpCase c;
    c.op = "SparseCompact";
    c.shape = "rows=" + std::to_string(sh.rows) + " vocab=" + std::to_string(sh.vocab) +
              " k=" + std::to_string(sh.k);
    OpOutput counts, idx, val;
    counts.name = "counts", counts.elem = Elem::kI32, counts.rows = sh.rows, counts.cols = 1;
    counts.exact = true;
    idx.name = "indices", idx.elem = Elem::kI32, idx.rows = sh.rows, idx.cols = stride;
    idx.exact = true, idx.initial.assign(static_cast<size_t>(sh.rows) * stride, 0.f);
    val = idx;
    val.name = "values", val.elem = Elem::kF32;
    c.outputs = {counts, idx, val};
    c.gpu = [=, &dense](const std::vector<void*>& out) -> Status {
      PETAL_ASSIGN_OR_RETURN(auto d_dense, UploadFloats(dense));
      PETAL_ASSIGN_OR_RETURN(auto d_k, UploadInts(top_k));
      SparseCompactParams p;
      p.dense = d_dense.get(), p.ld = sh.ld, p.rows = sh.rows, p.vocab = sh.vocab;
      p.top_k = sh.k < 0 ? nullptr : d_k.get();
      p.stride = stride;
      p.counts = static_cast<int32_t*>(out[0]);
      p.indices = static_cast<int32_t*>(out[1]);
      p.values = static_cast<float*>(out[2]);
      PETAL_RETURN_IF_ERROR(LaunchSparseCompact(p, 0));
      return SyncDevice();
    };
    c.reference = [=, &dense] {
      std::vector<int32_t> n(sh.rows), i(static_cast<size_t>(sh.rows) * stride, 0);
      std::vector<float> v(i.size(), 0.f);
      cpu::SparseCompact(dense.data(), sh.ld, sh.rows, sh.vocab, sh.k < 0 ? nullptr : top_k.data(),
                         stride, n.data(), i.data(), v.data());
      return std::vector<std::vector<float>>{std::vector<float>(n.begin(), n.end()),
                                             std::vector<float>(i.begin(), i.end()), v};
    };
    EXPECT_TRUE(RunOpCase(c));
  }
}

// The engine's way: the entries written straight into mapped page-locked host memory.
TEST_F(OpsGpuTest3, SparseCompactIntoMappedHostMemory) {
  const int rows = 9, vocab = 30522;
  const auto dense = CompactRows(rows, vocab, 9600);
  std::vector<int32_t> top_k(rows, 0);
  top_k[2] = 100, top_k[5] = 1;
  auto d_dense = UploadFloats(dense);
  ASSERT_TRUE(d_dense.ok());
  auto d_k = UploadInts(top_k);
  ASSERT_TRUE(d_k.ok());
  const size_t n = static_cast<size_t>(rows) * vocab;
  void* host = nullptr;
  ASSERT_EQ(cudaHostAlloc(&host, rows * 4 + n * 8, cudaHostAllocMapped), cudaSuccess);
  std::memset(host, 0xFF, rows * 4 + n * 8);
  void* dev = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&dev, host, 0), cudaSuccess);
  SparseCompactParams p;
  p.dense = d_dense->get(), p.ld = vocab, p.rows = rows, p.vocab = vocab, p.top_k = d_k->get();
  p.stride = vocab;
  p.counts = static_cast<int32_t*>(dev);
  p.indices = p.counts + rows;
  p.values = reinterpret_cast<float*>(p.indices + n);
  ASSERT_TRUE(LaunchSparseCompact(p, 0).ok());
  ASSERT_TRUE(SyncDevice().ok());
  std::vector<int32_t> want_n(rows), want_i(n);
  std::vector<float> want_v(n);
  cpu::SparseCompact(dense.data(), vocab, rows, vocab, top_k.data(), vocab, want_n.data(),
                     want_i.data(), want_v.data());
  const auto* got_n = static_cast<const int32_t*>(host);
  const int32_t* got_i = got_n + rows;
  const auto* got_v = reinterpret_cast<const float*>(got_i + n);
  for (int r = 0; r < rows; ++r) {
    ASSERT_EQ(got_n[r], want_n[r]) << "row " << r;
    const size_t at = static_cast<size_t>(r) * vocab;
    EXPECT_EQ(std::memcmp(got_i + at, want_i.data() + at, 4 * size_t(want_n[r])), 0) << r;
    EXPECT_EQ(std::memcmp(got_v + at, want_v.data() + at, 4 * size_t(want_n[r])), 0) << r;
  }
  cudaFreeHost(host);
}

TEST_F(OpsGpuTest3, DenseRows) {
  uint64_t seed = 9000;
  for (int in : {384, 768, 1024}) {
    for (auto [out, tanh, bias] :
         {std::tuple{in, true, true}, std::tuple{1, false, true}, std::tuple{2, false, false}}) {
      for (int rows : {1, 7, 128}) {
        const auto x = RandomBf16(static_cast<size_t>(rows) * in, seed++, -2.f, 2.f);
        const auto w = RandomBf16(static_cast<size_t>(out) * in, seed++, -0.1f, 0.1f);
        const auto b = RandomBf16(out, seed++, -1.f, 1.f);
        OpCase c;
        c.op = "DenseRows";
        c.shape = "rows=" + std::to_string(rows) + " " + std::to_string(in) + "->" +
                  std::to_string(out) + (tanh ? " tanh" : "") + (bias ? " +bias" : "");
        OpOutput o;
        o.elem = Elem::kF32, o.rows = rows, o.cols = out, o.tol = kDenseTol;
        // One- and two-logit heads: compare all rows as one, so the relative error is floored at
        // the RMS of every logit rather than at a single value that may cancel to near zero.
        // A single logit (rows = 1) is its own floor: 1e-3 there (fp32 sums of ~1000 terms in
        // another order differ by ~1e-5 of the terms' magnitude).
        if (out <= 2) o.rows = 1, o.cols = static_cast<int64_t>(rows) * out;
        if (out <= 2 && rows == 1) o.tol = {1e-3, 0.999999};
        c.outputs = {o};
        c.gpu = [=, &x, &w, &b](const std::vector<void*>& outs) -> Status {
          DeviceBuffer<float> d_x;
          PETAL_RETURN_IF_ERROR(d_x.Allocate(x.size()));
          PETAL_CUDA_CHECK(
              cudaMemcpy(d_x.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
          PETAL_ASSIGN_OR_RETURN(auto d_w, UploadBf16(w));
          PETAL_ASSIGN_OR_RETURN(auto d_b, UploadBf16(b));
          DenseRowsParams p;
          p.x = d_x.get();
          p.x_stride = in;
          p.w = d_w.get();
          p.bias = bias ? d_b.get() : nullptr;
          p.tanh = tanh;
          p.y = static_cast<float*>(outs[0]);
          p.rows = rows, p.out = out, p.in = in;
          PETAL_RETURN_IF_ERROR(LaunchDenseRows(p, 0));
          return SyncDevice();
        };
        c.reference = [=, &x, &w, &b] {
          std::vector<float> y(static_cast<size_t>(rows) * out);
          cpu::DenseRows(x.data(), in, w.data(), bias ? b.data() : nullptr, tanh, y.data(), rows,
                         out, in);
          return std::vector<std::vector<float>>{y};
        };
        EXPECT_TRUE(RunOpCase(c));
      }
    }
  }
}

}  // namespace
}  // namespace petal::cuda::test
