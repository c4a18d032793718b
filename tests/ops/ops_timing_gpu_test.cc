// Timings of the memory-bound ops at serving sizes (informational; no pass/fail): median of 20
// event-timed runs after warm-up, reported as achieved GB/s over the bytes each op must move
// (docs/kernels.md). The H200 floor is ~4.3 TB/s; small launches are latency-bound instead.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/ops.h"
#include "op_test_util.h"

namespace petal::cuda::test {
namespace {

class OpsTimingGpuTest : public GpuTest {};

void Report(const std::string& op, const std::string& shape, double bytes,
            const std::function<Status()>& launch) {
  ASSERT_OK(launch());
  ASSERT_OK(SyncDevice());
  const double ms = MedianLaunchMs(launch);
  ASSERT_OK(SyncDevice());
  RecordTiming(op, shape, ms, 0, bytes / ms / 1e6);
}

TEST_F(OpsTimingGpuTest, MemoryBoundOps) {
  const int t = 8192;  // tokens: e.g. 16 x 512
  const int big = 9728 * 2;
  ASSERT_OK_AND_ASSIGN(auto a, UploadBf16(RandomBf16(static_cast<size_t>(t) * big, 1)));
  // b: residual / position table (<= t x 2560); c: outputs (<= t x 9728).
  ASSERT_OK_AND_ASSIGN(auto b, UploadBf16(RandomBf16(static_cast<size_t>(t) * 2560, 2)));
  ASSERT_OK_AND_ASSIGN(auto c, UploadBf16(RandomBf16(static_cast<size_t>(t) * 9728, 3)));
  ASSERT_OK_AND_ASSIGN(auto w, UploadBf16(RandomBf16(big, 4, 0.5f, 1.5f)));
  std::vector<int32_t> cu;
  for (int i = 0; i <= 16; ++i) cu.push_back(i * 512);
  ASSERT_OK_AND_ASSIGN(auto d_cu, UploadInts(cu));
  ASSERT_OK_AND_ASSIGN(auto ids, UploadInts(RandomInts(t, 5, 0, 30000)));
  DeviceBuffer<int32_t> pos;
  ASSERT_OK(pos.Allocate(t));
  ASSERT_OK(LaunchSeqInfo({d_cu.get(), 16, t, nullptr, pos.get()}, 0));
  DeviceBuffer<float> pooled;
  ASSERT_OK(pooled.Allocate(16 * 2560));
  const double n = t;

  for (int dim : {1024, 2560}) {
    const std::string s = "T=8192 dim=" + std::to_string(dim);
    Report("AddRmsNorm", s, 4 * n * dim * 2, [&] {
      return LaunchAddRmsNorm({a.get(), b.get(), w.get(), 1e-6f, c.get(), t, dim}, 0);
    });
    Report("Embedding", s, 2 * n * dim * 2, [&] {
      return LaunchEmbedding({ids.get(), a.get(), 30000, c.get(), t, dim}, 0);
    });
    Report("Pool.mean+l2", "16x512 dim=" + std::to_string(dim), n * dim * 2, [&] {
      return LaunchPool(
          {a.get(), d_cu.get(), 16, dim, dim, cpu::Pooling::kMean, true, pooled.get()}, 0);
    });
  }
  Report("AddLayerNorm", "T=8192 dim=384", 3 * n * 384 * 2, [&] {
    return LaunchAddLayerNorm({a.get(), b.get(), w.get(), w.get(), 1e-12f, c.get(), t, 384}, 0);
  });
  Report("BertEmbedding", "T=8192 dim=384", 4 * n * 384 * 2, [&] {
    BertEmbeddingParams p;
    p.ids = ids.get(), p.positions = pos.get(), p.word = a.get(), p.pos = b.get();
    p.type = c.get(), p.vocab = 30000, p.max_positions = 512, p.num_types = 2;
    p.gamma = w.get(), p.beta = w.get(), p.out = c.get() + static_cast<size_t>(t) * 384;
    p.rows = t, p.dim = 384;
    return LaunchBertEmbedding(p, 0);
  });
  DeviceBuffer<float2> rope_table;
  {
    const auto host = RopeTable(t, 128, 1e6);
    ASSERT_OK(rope_table.Allocate(host.size()));
    ASSERT_OK(rope_table.CopyFromHost(host.data(), host.size()));
  }
  for (auto [hq, hkv] : {std::pair{16, 8}, std::pair{32, 8}}) {
    const int stride = (hq + 2 * hkv) * 128;
    Report("QkNormRope", "T=8192 H" + std::to_string(hq) + "/" + std::to_string(hkv) + " d128",
           2 * n * (hq + hkv) * 128 * 2, [&] {
             QkNormRopeParams p;
             p.qkv = a.get(), p.rows = t, p.row_stride = stride, p.num_q_heads = hq;
             p.num_kv_heads = hkv, p.head_dim = 128, p.q_norm_weight = w.get();
             p.k_norm_weight = w.get(), p.positions = pos.get(), p.theta = 1e6;
             return LaunchQkNormRope(p, 0);
           });
    for (int hpw : {1, 4})
      Report("QkNormRope.table.hpw" + std::to_string(hpw),
             "T=8192 H" + std::to_string(hq) + "/" + std::to_string(hkv) + " d128",
             2 * n * (hq + hkv) * 128 * 2, [&] {
               QkNormRopeParams p;
               p.qkv = a.get(), p.rows = t, p.row_stride = stride, p.num_q_heads = hq;
               p.num_kv_heads = hkv, p.head_dim = 128, p.q_norm_weight = w.get();
               p.k_norm_weight = w.get(), p.positions = pos.get(), p.theta = 1e6;
               p.rope_table = rope_table.get(), p.rope_table_rows = t;
               p.heads_per_warp = hpw;
               return LaunchQkNormRope(p, 0);
             });
  }
  // Where four heads a warp starts to pay (the kernel picks it from 1,024 rows; docs/kernels.md):
  // both layouts at the row counts around that threshold, 0.6b heads.
  for (int rows : {256, 512, 768, 1024, 2048}) {
    for (int hpw : {1, 4})
      Report("QkNormRope.table.hpw" + std::to_string(hpw),
             "T=" + std::to_string(rows) + " H16/8 d128", 2.0 * rows * 24 * 128 * 2, [&] {
               QkNormRopeParams p;
               p.qkv = a.get(), p.rows = rows, p.row_stride = 32 * 128, p.num_q_heads = 16;
               p.num_kv_heads = 8, p.head_dim = 128, p.q_norm_weight = w.get();
               p.k_norm_weight = w.get(), p.positions = pos.get(), p.theta = 1e6;
               p.rope_table = rope_table.get(), p.rope_table_rows = t;
               p.heads_per_warp = hpw;
               return LaunchQkNormRope(p, 0);
             });
  }
  for (int inter : {1536, 3072, 9728}) {
    Report("SiluMul", "T=8192 inter=" + std::to_string(inter), 3 * n * inter * 2, [&] {
      return LaunchSiluMul({a.get(), c.get(), t, inter}, 0);
    });
  }
  Report("Gelu", "T=8192 x 1536", 2 * n * 1536 * 2, [&] {
    return LaunchGelu({a.get(), c.get(), static_cast<int64_t>(t) * 1536}, 0);
  });
  // One long sequence: one block pools it alone (the known weak spot, see docs/kernels.md).
  const std::vector<int32_t> one = {0, t};
  ASSERT_OK_AND_ASSIGN(auto d_one, UploadInts(one));
  Report("Pool.mean", "1x8192 dim=1024", n * 1024 * 2, [&] {
    return LaunchPool(
        {a.get(), d_one.get(), 1, 1024, 1024, cpu::Pooling::kMean, false, pooled.get()}, 0);
  });
}

}  // namespace
}  // namespace petal::cuda::test
