// CPU emulation test of the attention kernels: compiles the real plan and flash kernels
// (attention_plan.cuh, attention_flash.cuh) as host code, runs them on the emulator of
// attention_emulator.h (shared memory poisoned with NaN between CTAs), and compares every tile
// variant with petal::cpu::Attention. Catches index, masking, pipeline, barrier and divergence
// mistakes without a GPU (it runs in CI); it cannot catch wrong assumptions about the PTX
// semantics themselves, which attention_gpu_test covers on the device. Thread-safety: a test.
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#pragma GCC diagnostic ignored "-Wattributes"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_emulator.h"  // before the kernel headers
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/ops.h"

#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/attention_plan.cuh"
#include "kernels/cuda/attention_variants.h"

namespace {

using petal::cuda::AttentionParams;
namespace attn = petal::cuda::attn;

constexpr uint16_t kPoison = 0xFFFF;

// The shared host converter (round to nearest even).
uint16_t ToBf16(float f) { return petal::cpu::ToBf16Bits(f); }
float FromBf16(uint16_t b) { return petal::cpu::FromBf16Bits(b); }

struct Case {
  int hq, hkv, d;
  bool causal;
  std::vector<int> lens;
  int max_tokens, max_seqs;
  // Per-sequence key lengths (AttentionParams::kv_lens; 0 = every key); empty: none.
  std::vector<int32_t> kv = {};
};

// Runs the plan kernel on the emulator into `ws` and checks the work list: every query tile of
// every sequence exactly once, longest sequences first, causal tiles last-first.
void EmulatePlan(const std::vector<int32_t>& cu, int32_t num_seqs, int max_seqs, int max_tokens,
                 int block_m, bool causal, char* ws) {
  emu::M().error.clear();
  emu::M().smem = nullptr;
  emu::M().smem_size = 0;
  emu::RunCta(attn::kPlanThreads, 0, [&] {
    attn::PlanKernel(cu.data(), &num_seqs, max_seqs, max_tokens, block_m, causal,
                     attn::MaxWorkItems(max_tokens, max_seqs, block_m), reinterpret_cast<int*>(ws),
                     reinterpret_cast<attn::WorkItem*>(ws + attn::kItemsOffset));
  });
  ASSERT_TRUE(emu::M().error.empty()) << "plan: " << emu::M().error;
  const int count = *reinterpret_cast<const int*>(ws);
  const auto* items = reinterpret_cast<const attn::WorkItem*>(ws + attn::kItemsOffset);
  std::vector<int> expected, listed;
  for (int s = 0; s < num_seqs; ++s) {
    for (int q0 = 0; q0 < cu[s + 1] - cu[s]; q0 += block_m) expected.push_back(cu[s] + q0);
  }
  for (int i = 0; i < count; ++i) {
    const attn::WorkItem& it = items[i];
    listed.push_back(it.seq_begin + it.q_row0);
    ASSERT_EQ(it.seq_len, cu[it.seq + 1] - cu[it.seq]);
    ASSERT_EQ(it.seq_begin, cu[it.seq]);
    if (i > 0 && items[i - 1].seq / attn::kPlanThreads == it.seq / attn::kPlanThreads) {
      ASSERT_GE(items[i - 1].seq_len, it.seq_len) << "not longest-first within a pass";
      if (items[i - 1].seq == it.seq) {
        ASSERT_EQ(items[i - 1].q_row0 + (causal ? -block_m : block_m), it.q_row0);
      }
    }
  }
  std::sort(expected.begin(), expected.end());
  std::sort(listed.begin(), listed.end());
  ASSERT_EQ(listed, expected) << "work list does not cover every query tile once";
}

// Plans and runs variant Cfg on the emulator; returns the output ([max_tokens, hq, d] bf16).
// With qk.enabled(), the kernel with the q/k norm + rotary prologue (head_dim 128).
template <class Cfg, bool kCausal>
std::vector<uint16_t> Emulate(const Case& c, const std::vector<uint16_t>& qkv,
                              const std::vector<int32_t>& cu, int32_t num_seqs,
                              const petal::cuda::AttentionQkNorm& qk = {}) {
  const int64_t row = static_cast<int64_t>(c.hq + 2 * c.hkv) * c.d;
  std::vector<uint16_t> out(static_cast<size_t>(c.max_tokens) * c.hq * c.d, kPoison);
  // Same size as AttentionWorkspaceBytes (not linked here: see attention.cmake).
  std::vector<int4> ws(attn::kItemsOffset / 16 +
                       attn::MaxWorkItems(c.max_tokens, c.max_seqs, attn::kMinBlockM));
  const auto* base = reinterpret_cast<const __nv_bfloat16*>(qkv.data());
  AttentionParams p;
  p.q = base;
  p.k = base + c.hq * c.d;
  p.v = base + (c.hq + c.hkv) * c.d;
  p.q_stride = p.k_stride = p.v_stride = row;
  p.out = reinterpret_cast<__nv_bfloat16*>(out.data());
  p.cu_seqlens = cu.data();
  p.num_seqs = &num_seqs;
  p.max_tokens = c.max_tokens;
  p.max_seqs = c.max_seqs;
  p.num_heads = c.hq;
  p.num_kv_heads = c.hkv;
  p.head_dim = c.d;
  p.causal = kCausal;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  p.kv_lens = c.kv.empty() ? nullptr : c.kv.data();
  p.qk_norm = qk;

  auto* wsb = reinterpret_cast<char*>(ws.data());
  EmulatePlan(cu, num_seqs, c.max_seqs, c.max_tokens, Cfg::kBlockM, kCausal, wsb);
  const attn::FlashArgs args = attn::MakeFlashArgs(p, wsb);
  emu::M().smem = attn::smem_raw;
  emu::M().smem_size = Cfg::kSmemBytes;
  const int64_t blocks = attn::FlashGridBlocks<Cfg>(p);
  for (int64_t b = 0; b < blocks && emu::M().error.empty(); ++b) {
    std::memset(attn::smem_raw, 0xFF, sizeof(attn::smem_raw));  // NaN: unloaded data shows
    emu::RunCta(Cfg::kThreads, static_cast<unsigned>(b), [&] {
      if constexpr (Cfg::kHeadDim == 128) {
        if (qk.enabled()) return attn::FlashAttentionKernel<Cfg, kCausal, true>(args);
      }
      attn::FlashAttentionKernel<Cfg, kCausal>(args);
    });
  }
  return out;
}

template <class Cfg>
std::string CfgName() {
  return "d" + std::to_string(Cfg::kHeadDim) + " w" + std::to_string(Cfg::kWarps) + " bm" +
         std::to_string(Cfg::kBlockM) + " bn" + std::to_string(Cfg::kBlockN) + " hpc" +
         std::to_string(Cfg::kHeadsPerCta) + " mt" + std::to_string(Cfg::kMTiles);
}

// Qwen3's q/k norm + rotary as the model applies it before attention (LaunchQkNormRope's math in
// fp32, rounded to bf16), in place on rows [0, tokens) of the fused QKV floats: the reference for
// the kernels' prologue. Positions restart at 0 in every sequence.
void NormRopeReference(std::vector<float>* f, int64_t row, int tokens, int heads, int d,
                       const std::vector<float>& qw, const std::vector<float>& kw, int hq,
                       float eps, const std::vector<int32_t>& cu, int seqs, double theta) {
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      float* x = f->data() + t * row + static_cast<int64_t>(h) * d;
      const std::vector<float>& w = h < hq ? qw : kw;
      float ss = 0.f;
      for (int i = 0; i < d; ++i) ss += x[i] * x[i];
      const float inv = 1.0f / std::sqrt(ss / d + eps);
      for (int i = 0; i < d; ++i) x[i] *= inv * w[i];
    }
  }
  petal::cpu::Rope(f->data(), static_cast<int>(row), heads, d, cu.data(), seqs, theta);
  for (int t = 0; t < tokens; ++t) {
    for (int i = 0; i < heads * d; ++i) {
      float& x = (*f)[t * row + i];
      x = FromBf16(ToBf16(x));
    }
  }
}

template <int D>
void RunAllVariants(bool causal, std::vector<int32_t> kv = {}, bool qk_norm = false) {
  Case c{4, 2, D, causal, {1, 17, 0, 64, 129, 3, 128}, 360, 9, kv};
  if (!kv.empty()) c.kv.resize(c.max_seqs, 0);
  int tokens = 0;
  for (int l : c.lens) tokens += l;
  std::mt19937 rng(D + causal);
  std::uniform_real_distribution<float> qk(-2.0f, 2.0f), vd(-1.0f, 1.0f);
  const int64_t row = static_cast<int64_t>(c.hq + 2 * c.hkv) * c.d;
  std::vector<uint16_t> qkv(static_cast<size_t>(c.max_tokens) * row);
  for (size_t i = 0; i < qkv.size(); ++i) {
    qkv[i] = ToBf16(static_cast<int64_t>(i % row) < (c.hq + c.hkv) * c.d ? qk(rng) : vd(rng));
  }
  std::vector<int32_t> cu(c.max_seqs + 1, 1 << 30);  // garbage past num_seqs
  cu[0] = 0;
  for (size_t i = 0; i < c.lens.size(); ++i) cu[i + 1] = cu[i] + c.lens[i];

  std::vector<float> f(qkv.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = FromBf16(qkv[i]);
  // q/k norm + rotary on load: random weights, each token's position in its sequence, a rope
  // table as RopeTable (ops.h) makes it; the reference applies them to f first.
  petal::cuda::AttentionQkNorm norm;
  std::vector<uint16_t> qw16(D), kw16(D);
  std::vector<int32_t> positions(c.max_tokens, 0);
  std::vector<float2> rope;
  if (qk_norm) {
    std::uniform_real_distribution<float> wd(0.5f, 1.5f);
    std::vector<float> qw(D), kw(D);
    for (int i = 0; i < D; ++i) {
      qw16[i] = ToBf16(wd(rng));
      kw16[i] = ToBf16(wd(rng));
      qw[i] = FromBf16(qw16[i]);
      kw[i] = FromBf16(kw16[i]);
    }
    for (size_t s = 0; s < c.lens.size(); ++s) {
      for (int i = 0; i < c.lens[s]; ++i) positions[cu[s] + i] = i;
    }
    const double theta = 1e6;
    const int rows = 256;  // past the longest sequence (129): no clamping
    rope.resize(static_cast<size_t>(rows) * D / 2);
    for (int j = 0; j < D / 2; ++j) {
      const double inv_freq = std::pow(theta, -2.0 * j / D);
      for (int pos = 0; pos < rows; ++pos) {
        rope[static_cast<size_t>(pos) * D / 2 + j] =
            make_float2(static_cast<float>(std::cos(pos * inv_freq)),
                        static_cast<float>(std::sin(pos * inv_freq)));
      }
    }
    norm = {reinterpret_cast<const __nv_bfloat16*>(qw16.data()),
            reinterpret_cast<const __nv_bfloat16*>(kw16.data()),
            1e-6f,
            positions.data(),
            rope.data(),
            rows};
    NormRopeReference(&f, row, tokens, c.hq + c.hkv, D, qw, kw, c.hq, 1e-6f, cu,
                      static_cast<int>(c.lens.size()), theta);
  }
  std::vector<float> ref(static_cast<size_t>(tokens) * c.hq * c.d);
  std::vector<int32_t> keys(c.lens.begin(), c.lens.end());  // the reference's: 0 means all
  for (size_t s = 0; s < keys.size() && !c.kv.empty(); ++s) {
    if (c.kv[s] > 0) keys[s] = std::min(keys[s], c.kv[s]);
  }
  petal::cpu::Attention(f.data(), row, f.data() + c.hq * c.d, row, f.data() + (c.hq + c.hkv) * c.d,
                        row, ref.data(), cu.data(), static_cast<int>(c.lens.size()), c.hq, c.hkv,
                        c.d, causal, 1.0f / std::sqrt(static_cast<float>(c.d)),
                        c.kv.empty() ? nullptr : keys.data());

  auto check = [&](auto cfg) {
    using Cfg = decltype(cfg);
    if ((c.hq / c.hkv) % Cfg::kHeadsPerCta != 0) return;
    emu::M().error.clear();
    const std::vector<uint16_t> out =
        causal ? Emulate<Cfg, true>(c, qkv, cu, static_cast<int32_t>(c.lens.size()), norm)
               : Emulate<Cfg, false>(c, qkv, cu, static_cast<int32_t>(c.lens.size()), norm);
    const std::string what = CfgName<Cfg>() + (causal ? " causal" : " bidir") +
                             (c.kv.empty() ? "" : " kv_lens") + (qk_norm ? " qk_norm" : "");
    ASSERT_TRUE(emu::M().error.empty()) << what << ": " << emu::M().error;
    double err = 0.0, ref_max = 0.0, cos_min = 1.0;
    for (int64_t r = 0; r < static_cast<int64_t>(tokens) * c.hq; ++r) {
      double dot = 0, nn = 0, rr = 0;
      for (int i = 0; i < c.d; ++i) {
        const double o = FromBf16(out[r * c.d + i]), x = ref[r * c.d + i];
        ASSERT_TRUE(std::isfinite(o)) << what << ": (token, head) row " << r << " not written";
        dot += o * x, nn += o * o, rr += x * x;
        err = std::max(err, std::fabs(o - x));
        ref_max = std::max(ref_max, std::fabs(x));
      }
      cos_min = std::min(cos_min, dot / std::sqrt(nn * rr + 1e-30));
    }
    EXPECT_GE(cos_min, 0.9999) << what;
    EXPECT_LE(err, 2e-2 * ref_max) << what;
    for (size_t i = static_cast<size_t>(tokens) * c.hq * c.d; i < out.size(); ++i) {
      ASSERT_EQ(out[i], kPoison) << what << ": wrote past the batch";
    }
    std::printf("  %s: max abs err %.3g (max|ref| %.3g), min cosine %.7f\n", what.c_str(), err,
                ref_max, cos_min);
  };
  using List = typename attn::Variants<D>::List;
  [&]<size_t... I>(std::index_sequence<I...>) { (check(std::tuple_element_t<I, List>{}), ...); }
  (std::make_index_sequence<std::tuple_size_v<List>>{});
}

// More sequences than one plan pass (1024), random lengths including 0, both orders.
TEST(AttentionEmulation, PlanManySequences) {
  std::mt19937 rng(9);
  const int max_seqs = 2500, n = 2345;
  std::vector<int32_t> cu(max_seqs + 1, 0);
  for (int s = 0; s < n; ++s) cu[s + 1] = cu[s] + static_cast<int>(rng() % 200);
  for (int s = n + 1; s <= max_seqs; ++s) cu[s] = -5;  // garbage past num_seqs
  const int max_tokens = cu[n] + 100;
  std::vector<int4> ws(attn::kItemsOffset / 16 + attn::MaxWorkItems(max_tokens, max_seqs, 64));
  for (bool causal : {false, true}) {
    EmulatePlan(cu, n, max_seqs, max_tokens, 64, causal, reinterpret_cast<char*>(ws.data()));
  }
}

TEST(AttentionEmulation, HeadDim32) {
  RunAllVariants<32>(false);
  RunAllVariants<32>(true);
}
TEST(AttentionEmulation, HeadDim64) {
  RunAllVariants<64>(false);
  RunAllVariants<64>(true);
}
TEST(AttentionEmulation, HeadDim128) {
  RunAllVariants<128>(false);
  RunAllVariants<128>(true);
}
// Key lengths (multi-vector query expansion): keys stop inside a tile, at a tile edge, at the
// first token, or not at all (0); every query row is still computed.
// The q/k norm + rotary prologue (AttentionParams::qk_norm, head_dim 128): every variant against
// the norm and rotary applied beforehand (in fp32, rounded to bf16), both masks.
TEST(AttentionEmulation, QkNormOnLoad) {
  RunAllVariants<128>(false, {}, true);
  RunAllVariants<128>(true, {}, true);
}

TEST(AttentionEmulation, KeyLengths) {
  const std::vector<int32_t> kv = {1, 9, 0, 64, 100, 0, 65};
  RunAllVariants<32>(false, kv);
  RunAllVariants<64>(false, kv);
  RunAllVariants<128>(false, kv);
}

}  // namespace
