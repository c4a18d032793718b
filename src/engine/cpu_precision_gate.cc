#include "engine/cpu_precision_gate.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"

namespace petal {

Batch CpuGateProbeBatch(const ModelConfig& config) {
  const int max_len =
      std::max(1, std::min(config.max_seq_length > 0 ? config.max_seq_length : 128,
                           config.max_position_embeddings - config.position_offset));
  std::mt19937 rng(20261202);
  // Ids away from the special tokens at the bottom of most vocabularies where there are enough.
  const int lo = config.vocab_size > 2000 ? 1000 : 0;
  std::uniform_int_distribution<int32_t> id(lo, std::max(lo, config.vocab_size - 1));
  std::vector<std::vector<int32_t>> seqs;
  for (int len : {7, 31, 64, 128}) {
    std::vector<int32_t> s(std::min(len, max_len));
    for (auto& t : s) t = id(rng);
    seqs.push_back(std::move(s));
  }
  return Batch::FromSequences(seqs);
}

StatusOr<CpuGateResult> RunCpuFidelityGate(const CpuModel& candidate, const CpuModel& reference) {
  const ModelConfig& c = reference.config();
  const Batch batch = CpuGateProbeBatch(c);
  std::vector<float> hc, hr;
  PETAL_RETURN_IF_ERROR(candidate.Forward(batch, &hc));
  PETAL_RETURN_IF_ERROR(reference.Forward(batch, &hr));
  const int S = batch.num_seqs(), H = c.hidden_size;
  std::vector<float> pc(static_cast<size_t>(S) * H), pr(pc.size());
  const auto mode = static_cast<cpu::Pooling>(c.pooling);
  cpu::Pool(hc.data(), batch.cu_seqlens.data(), S, H, mode, false, pc.data());
  cpu::Pool(hr.data(), batch.cu_seqlens.data(), S, H, mode, false, pr.data());
  CpuGateResult r;
  r.sequences = S;
  r.tokens = batch.num_tokens();
  for (int s = 0; s < S; ++s) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < H; ++i) {
      const double a = pc[static_cast<size_t>(s) * H + i], b = pr[static_cast<size_t>(s) * H + i];
      ab += a * b;
      aa += a * a;
      bb += b * b;
    }
    const double cos = aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
    r.min_cosine = std::min(r.min_cosine, std::isfinite(cos) ? cos : 0.0);
  }
  return r;
}

}  // namespace petal
