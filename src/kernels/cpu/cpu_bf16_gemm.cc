#include "kernels/cpu/cpu_bf16_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <dnnl.hpp>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_linear.h"

namespace petal::cpu {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// The row count whose primitive picks the packed weight layout; every other M reuses it (oneDNN's
// brgemm matmul accepts the same blocked weights for any M).
constexpr int kLayoutRows = 128;

dnnl::engine& Engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream s(Engine());
  return s;
}

uint8_t* ThreadScratchpad(size_t bytes) {
  thread_local std::vector<uint8_t, Aligned64Allocator<uint8_t>> pad;
  if (pad.size() < bytes) {
    pad.clear();
    pad.shrink_to_fit();
    pad.resize(bytes);
  }
  return pad.data();
}

__attribute__((target("avx512f,avx512bf16"))) void ConvertAvx512Bf16(const float* x, int64_t n,
                                                                     uint16_t* out) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(x + i), hi = _mm512_loadu_ps(x + i + 16);
    const __m512bh b = _mm512_cvtne2ps_pbh(hi, lo);  // lo -> lanes 0..15, hi -> 16..31
    _mm512_storeu_si512(reinterpret_cast<void*>(out + i), reinterpret_cast<__m512i>(b));
  }
  for (; i < n; ++i) out[i] = ToBf16Bits(x[i]);
}

}  // namespace

struct Bf16Gemm::State {
  int n = 0, k = 0;
  dnnl::memory::desc wdesc;  // packed bf16 weights
  dnnl::memory weights, bias;
  bool has_bias = false;
  struct Prim {
    dnnl::matmul mm;
    size_t scratch = 0;
    std::string impl;
  };
  mutable std::shared_mutex mu;
  // key: m * 4 + gelu * 2 + bf16_out
  mutable std::unordered_map<int64_t, std::shared_ptr<const Prim>> prims;

  dnnl::matmul::primitive_desc Desc(int m, bool gelu, const dnnl::memory::desc& w,
                                    bool bf16_out = false) const {
    const dnnl::memory::desc src({m, k}, dt::bf16, tag::ab),
        dst({m, n}, bf16_out ? dt::bf16 : dt::f32, tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (gelu) {
      dnnl::post_ops po;
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
      attr.set_post_ops(po);
    }
    if (has_bias) {
      const dnnl::memory::desc b({1, n}, dt::f32, tag::ab);
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, w, b, dst), attr, Engine());
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, w, dst), attr, Engine());
  }

  std::shared_ptr<const Prim> Get(int m, bool gelu, bool bf16_out) const {
    const int64_t key = int64_t{m} * 4 + (gelu ? 2 : 0) + (bf16_out ? 1 : 0);
    {
      std::shared_lock lock(mu);
      auto it = prims.find(key);
      if (it != prims.end()) return it->second;
    }
    auto pd = Desc(m, gelu, wdesc, bf16_out);
    auto p = std::make_shared<Prim>();
    p->mm = dnnl::matmul(pd);
    p->scratch = pd.scratchpad_desc().get_size();
    p->impl = pd.impl_info_str();
    std::unique_lock lock(mu);
    if (prims.size() >= 512) prims.clear();  // bound the cache under many distinct batch sizes
    return prims.emplace(key, std::move(p)).first->second;
  }
};

Bf16Gemm::Bf16Gemm(std::unique_ptr<State> s) : s_(std::move(s)) {}
Bf16Gemm::~Bf16Gemm() = default;
int Bf16Gemm::n() const { return s_->n; }
int Bf16Gemm::k() const { return s_->k; }

bool HaveBf16Gemm(std::string* why) {
  const CpuFeatures& f = DetectCpuFeatures();
  if (f.avx512_bf16 || f.amx_bf16) return true;
  if (why) {
    *why = "bf16 CPU GEMMs need avx512_bf16 or AMX-BF16; this CPU: " + f.Describe();
  }
  return false;
}

StatusOr<std::shared_ptr<const Bf16Gemm>> Bf16Gemm::Create(const float* w, const float* bias, int n,
                                                           int k) {
  std::string why;
  if (!HaveBf16Gemm(&why)) return FailedPrecondition(why);
  if (n <= 0 || k <= 0) return InvalidArgument("Bf16Gemm: empty weight");
  auto s = std::make_unique<State>();
  s->n = n;
  s->k = k;
  s->has_bias = bias != nullptr;
  try {
    // W [n, k] row-major is the matmul's weights {k, n} in "ba" order.
    const dnnl::memory::desc user({k, n}, dt::f32, tag::ba), any({k, n}, dt::bf16, tag::any);
    s->wdesc = s->Desc(kLayoutRows, false, any).weights_desc();
    dnnl::memory src(user, Engine(), const_cast<float*>(w));
    s->weights = dnnl::memory(s->wdesc, Engine());
    dnnl::stream& st = ThreadStream();
    dnnl::reorder(src, s->weights).execute(st, src, s->weights);
    if (bias) {
      s->bias = dnnl::memory({{1, n}, dt::f32, tag::ab}, Engine());
      std::copy(bias, bias + n, static_cast<float*>(s->bias.get_data_handle()));
    }
    st.wait();
  } catch (const dnnl::error& e) {
    return Internal(std::string("oneDNN bf16 matmul setup failed: ") + e.what());
  }
  return std::shared_ptr<const Bf16Gemm>(new Bf16Gemm(std::move(s)));
}

void Bf16Gemm::Run(const uint16_t* xb, int m, void* y, bool gelu, bool bf16_out) const {
  if (m <= 0) return;
  const auto p = s_->Get(m, gelu, bf16_out);
  const dnnl::engine& eng = Engine();
  dnnl::memory src({{m, s_->k}, dt::bf16, tag::ab}, eng, const_cast<uint16_t*>(xb));
  dnnl::memory dst({{m, s_->n}, bf16_out ? dt::bf16 : dt::f32, tag::ab}, eng, y);
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, s_->weights}, {DNNL_ARG_DST, dst}};
  if (s_->has_bias) args.emplace(DNNL_ARG_BIAS, s_->bias);
  if (p->scratch > 0) {
    dnnl::memory pad({{static_cast<int64_t>(p->scratch)}, dt::u8, tag::a}, eng,
                     ThreadScratchpad(p->scratch));
    args.emplace(DNNL_ARG_SCRATCHPAD, pad);
  }
  dnnl::stream& st = ThreadStream();
  p->mm.execute(st, args);
  st.wait();
}

std::string Bf16Gemm::ImplName(int m) const { return s_->Get(m, false, false)->impl; }

void ConvertToBf16(const float* x, int64_t count, uint16_t* out) {
  const bool fast = DetectCpuFeatures().avx512_bf16;
  auto convert = [&](int64_t begin, int64_t len) {
    if (fast) {
      ConvertAvx512Bf16(x + begin, len, out + begin);
    } else {
      for (int64_t i = 0; i < len; ++i) out[begin + i] = ToBf16Bits(x[begin + i]);
    }
  };
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  // Below one chunk no parallel region at all: `omp parallel if (false)` still starts a team of
  // one, and from inside a parallel loop (AddLayerNorm calls this per row) that is a nested
  // team per call, a futex wake each time: 9% of a 1-thread bf16 MiniLM profile.
  if (chunks <= 1) {
    convert(0, count);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) convert(c * kChunk, std::min(kChunk, count - c * kChunk));
}

}  // namespace petal::cpu
