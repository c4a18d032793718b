#include "kernels/cpu/cpu_linear.h"

#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/vec_math.h"

namespace petal::cpu {
namespace {

constexpr int kWeightMax = 63;  // 7-bit weights: no int16 saturation in u8*s8 pair sums
constexpr int kActMax = 127;    // activations: [-127, 127] + 128 -> u8 [1, 255]
constexpr uint8_t kActZero = 128;

// Per-call scratch, reused across calls on the same thread.
struct Scratch {
  std::vector<uint8_t, Aligned64Allocator<uint8_t>> xq;
  std::vector<float> xscale;
  std::vector<int32_t, Aligned64Allocator<int32_t>> acc;
  std::vector<uint16_t, Aligned64Allocator<uint16_t>> xb;
  AlignedFloats z;
};
Scratch& ThreadScratch() {
  thread_local Scratch s;
  return s;
}

// x[m, k] -> xq (u8, zero point 128) with one symmetric scale per row.
void QuantizeRows(const float* x, int m, int k, uint8_t* xq, float* xscale) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < m; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * k;
    float mx = 0.0f;
    for (int i = 0; i < k; ++i) mx = std::max(mx, std::fabs(xr[i]));
    const float scale = mx > 0 ? mx / kActMax : 1.0f, inv = 1.0f / scale;
    uint8_t* q = xq + static_cast<int64_t>(r) * k;
    for (int i = 0; i < k; ++i) {
      // |x * inv| <= 127 by construction; nearbyint keeps round-half-even and vectorises.
      q[i] = static_cast<uint8_t>(static_cast<int>(std::nearbyint(xr[i] * inv)) + kActZero);
    }
    xscale[r] = scale;
  }
}

// One row: y = act(z + b) over width n (z may equal y). The bias test is a template argument,
// not a `bias ? bias[i] : 0` in the loop: GCC if-converts that into masked loads from the null
// pointer, which this CPU (AMD Zen) runs through a slow assist on every vector (it was a fifth of
// the tiny Qwen3 profile).
template <bool kBias>
inline __attribute__((always_inline)) void BiasActRow(const float* zr, const float* bias, int n,
                                                      Epilogue e, float* yr) {
  if (e == Epilogue::kSiluMul) {
    const int h = n / 2;
    for (int i = 0; i < h; ++i) {
      float g = zr[i], u = zr[h + i];
      if constexpr (kBias) {
        g += bias[i];
        u += bias[h + i];
      }
      yr[i] = vec::Silu(g) * u;
    }
  } else if (e == Epilogue::kGelu) {
    for (int i = 0; i < n; ++i) {
      if constexpr (kBias) {
        yr[i] = vec::Gelu(zr[i] + bias[i]);
      } else {
        yr[i] = vec::Gelu(zr[i]);
      }
    }
  } else if constexpr (kBias) {
    for (int i = 0; i < n; ++i) yr[i] = zr[i] + bias[i];
  }
}

// The row compiled for AVX-512 (chosen at run time from DetectCpuFeatures(), so PETAL_CPU_ISA
// caps it) and for the build's baseline (x86-64-v3); the same operations in the same order.
template <bool kBias>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,prefer-vector-width=512"))) void
BiasActRowAvx512(const float* zr, const float* bias, int n, Epilogue e, float* yr) {
  BiasActRow<kBias>(zr, bias, n, e, yr);
}
template <bool kBias>
void BiasActRowBase(const float* zr, const float* bias, int n, Epilogue e, float* yr) {
  BiasActRow<kBias>(zr, bias, n, e, yr);
}

template <bool kBias>
void BiasActRows(const float* z, const float* bias, int m, int n, Epilogue e, float* y) {
  auto* row = DetectCpuFeatures().avx512 ? BiasActRowAvx512<kBias> : BiasActRowBase<kBias>;
  const int64_t out_width = e == Epilogue::kSiluMul ? n / 2 : n;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < m; ++r)
    row(z + static_cast<int64_t>(r) * n, bias, n, e, y + static_cast<int64_t>(r) * out_width);
}

void BiasAct(const float* z, const float* bias, int m, int n, Epilogue e, float* y) {
  if (bias) {
    BiasActRows<true>(z, bias, m, n, e, y);
  } else {
    BiasActRows<false>(z, nullptr, m, n, e, y);
  }
}

// z[r, j] = acc[r, j] * xscale[r] * wscale[j] + bias[j], then the activation, into y.
void DequantAct(const int32_t* acc, const float* xscale, const float* wscale, const float* bias,
                int m, int n, Epilogue e, float* y) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < m; ++r) {
    const int32_t* ar = acc + static_cast<int64_t>(r) * n;
    const float sx = xscale[r];
    if (e == Epilogue::kSiluMul) {
      const int h = n / 2;
      float* yr = y + static_cast<int64_t>(r) * h;
      for (int i = 0; i < h; ++i) {
        const float g = static_cast<float>(ar[i]) * sx * wscale[i] + bias[i];
        const float u = static_cast<float>(ar[h + i]) * sx * wscale[h + i] + bias[h + i];
        yr[i] = vec::Silu(g) * u;
      }
      continue;
    }
    float* yr = y + static_cast<int64_t>(r) * n;
    if (e == Epilogue::kGelu) {
      for (int i = 0; i < n; ++i)
        yr[i] = vec::Gelu(static_cast<float>(ar[i]) * sx * wscale[i] + bias[i]);
    } else {
      for (int i = 0; i < n; ++i) yr[i] = static_cast<float>(ar[i]) * sx * wscale[i] + bias[i];
    }
  }
}

}  // namespace

float* ThreadBuffer(int slot, size_t n) {
  thread_local AlignedFloats buffers[8];
  AlignedFloats& b = buffers[slot];
  if (b.size() < n) {
    b.clear();
    b.shrink_to_fit();  // no copy of the old contents
    b.resize(n);
  }
  return b.data();
}

StatusOr<CpuPrecision> ParseCpuPrecision(const std::string& name) {
  if (name == "fp32") return CpuPrecision::kFp32;
  if (name == "int8") return CpuPrecision::kInt8;
  if (name == "bf16") return CpuPrecision::kBf16;
  return InvalidArgument("unknown CPU precision '" + name + "' (expected fp32, bf16 or int8)");
}

const char* CpuPrecisionName(CpuPrecision p) {
  switch (p) {
    case CpuPrecision::kFp32:
      return "fp32";
    case CpuPrecision::kInt8:
      return "int8";
    case CpuPrecision::kBf16:
      return "bf16";
  }
  return "?";
}

StatusOr<Linear> Linear::Pack(const float* w, const float* bias, int n, int k, CpuPrecision p) {
  if (n <= 0 || k <= 0) return InvalidArgument("Linear::Pack: empty weight");
  DetectCpuFeatures();  // applies any PETAL_CPU_ISA cap to oneDNN before its first use
  Linear l;
  l.precision_ = p;
  l.n_ = n;
  l.k_ = k;
  if (p == CpuPrecision::kBf16) {
    PETAL_ASSIGN_OR_RETURN(l.bf16_, Bf16Gemm::Create(w, bias, n, k));
    return l;
  }
  if (bias) l.bias_.assign(bias, bias + n);
  if (p == CpuPrecision::kFp32) {
    const size_t bytes = (static_cast<size_t>(n) * k * sizeof(float) + 63) / 64 * 64;
    l.w_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)), std::free);
    if (!l.w_) return ResourceExhausted("Linear::Pack: out of memory");
    std::copy(w, w + static_cast<size_t>(n) * k, l.w_.get());
    return l;
  }
  if (l.bias_.empty()) l.bias_.assign(n, 0.0f);
  l.wq_.resize(static_cast<size_t>(n) * k);
  l.wscale_.resize(n);
#pragma omp parallel for schedule(static)
  for (int j = 0; j < n; ++j) {
    const float* wr = w + static_cast<int64_t>(j) * k;
    float mx = 0.0f;
    for (int i = 0; i < k; ++i) mx = std::max(mx, std::fabs(wr[i]));
    const float scale = mx > 0 ? mx / kWeightMax : 1.0f, inv = 1.0f / scale;
    int8_t* q = l.wq_.data() + static_cast<int64_t>(j) * k;
    for (int i = 0; i < k; ++i) q[i] = static_cast<int8_t>(std::nearbyint(wr[i] * inv));
    l.wscale_[j] = scale;
  }
  return l;
}

void Linear::ForwardBf16(const uint16_t* xb, int m, float* y, Epilogue e) const {
  if (m <= 0) return;
  if (e == Epilogue::kSiluMul) {
    Scratch& s = ThreadScratch();
    s.z.resize(static_cast<size_t>(m) * n_);
    bf16_->Run(xb, m, s.z.data(), false);
    BiasAct(s.z.data(), nullptr, m, n_, e, y);  // the bias was added by the matmul
  } else {
    bf16_->Run(xb, m, y, e == Epilogue::kGelu);
  }
}

void Linear::ForwardBf16Out(const uint16_t* xb, int m, uint16_t* y, Epilogue e) const {
  if (m > 0) bf16_->Run(xb, m, y, e == Epilogue::kGelu, /*bf16_out=*/true);
}

void Linear::Forward(const float* x, int m, float* y, Epilogue e) const {
  if (m <= 0) return;
  Scratch& s = ThreadScratch();
  const int64_t mn = static_cast<int64_t>(m) * n_;
  if (precision_ == CpuPrecision::kBf16) {
    s.xb.resize(static_cast<size_t>(m) * k_);
    ConvertToBf16(x, static_cast<int64_t>(m) * k_, s.xb.data());
    ForwardBf16(s.xb.data(), m, y, e);
    return;
  }
  if (precision_ == CpuPrecision::kFp32) {
    float* z = y;
    if (e == Epilogue::kSiluMul) {
      s.z.resize(mn);
      z = s.z.data();
    }
    dnnl_sgemm('N', 'T', m, n_, k_, 1.0f, x, k_, w_.get(), k_, 0.0f, z, n_);
    const float* b = bias_.empty() ? nullptr : bias_.data();
    if (e != Epilogue::kNone || b) BiasAct(z, b, m, n_, e, y);
    return;
  }
  s.xq.resize(static_cast<size_t>(m) * k_);
  s.xscale.resize(m);
  s.acc.resize(mn);
  QuantizeRows(x, m, k_, s.xq.data(), s.xscale.data());
  const int32_t zero = 0;
  dnnl_gemm_u8s8s32('N', 'T', 'F', m, n_, k_, 1.0f, s.xq.data(), k_, kActZero, wq_.data(), k_, 0,
                    0.0f, s.acc.data(), n_, &zero);
  DequantAct(s.acc.data(), s.xscale.data(), wscale_.data(), bias_.data(), m, n_, e, y);
}

}  // namespace petal::cpu
