#include "engine/cuda/fp8_gate.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace petal::cuda {
namespace {

double Cosine(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  if (aa == 0 && bb == 0) return 1.0;
  if (aa == 0 || bb == 0) return 0.0;
  return ab / std::sqrt(aa * bb);
}

}  // namespace

StatusOr<Fp8GateResult> RunFp8Gate(CudaModel& model, const Capacity& cap, int max_seq_len,
                                   cudaStream_t stream) {
  const ModelConfig& config = model.config();
  const int want = std::max(cap.fp8_min_tokens, 2048);
  std::vector<int> lengths;
  int total = 0;
  auto add = [&](int len) {
    len = std::min(len, max_seq_len);
    if (len <= 0 || total + len > cap.max_tokens || int(lengths.size()) + 1 > cap.max_seqs) return;
    lengths.push_back(len);
    total += len;
  };
  for (int len : {1, 5, 33, 128, 511, 1024}) add(len);
  while (total < want) {
    const int before = total;
    add(std::min(512, want - total));
    if (total == before) break;
  }
  if (total < cap.fp8_min_tokens)
    return FailedPrecondition("--quantize fp8: the engine capacity (" +
                              std::to_string(cap.max_tokens) + " tokens) cannot hold a batch of " +
                              std::to_string(cap.fp8_min_tokens) +
                              " tokens (--fp8-min-tokens), so the fp8 path would never run");
  std::vector<int32_t> ids(total), cu(lengths.size() + 1, 0);
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int32_t> tok(0, config.vocab_size - 1);
  for (int32_t& t : ids) t = tok(rng);
  for (size_t i = 0; i < lengths.size(); ++i) cu[i + 1] = cu[i] + lengths[i];
  const int S = static_cast<int>(lengths.size()), H = config.hidden_size;
  const int32_t num = S;

  DeviceBuffer<int32_t> d_ids, d_types, d_cu, d_num;
  DeviceBuffer<float> d_out;
  PETAL_RETURN_IF_ERROR(d_ids.Allocate(total));
  PETAL_RETURN_IF_ERROR(d_types.Allocate(total));
  PETAL_RETURN_IF_ERROR(d_cu.Allocate(cu.size()));
  PETAL_RETURN_IF_ERROR(d_num.Allocate(1));
  PETAL_RETURN_IF_ERROR(d_out.Allocate(static_cast<size_t>(S) * H));
  PETAL_RETURN_IF_ERROR(d_ids.CopyFromHost(ids.data(), ids.size()));
  PETAL_CUDA_CHECK(cudaMemset(d_types.get(), 0, d_types.bytes()));
  PETAL_RETURN_IF_ERROR(d_cu.CopyFromHost(cu.data(), cu.size()));
  PETAL_RETURN_IF_ERROR(d_num.CopyFromHost(&num, 1));
  const int longest = *std::max_element(lengths.begin(), lengths.end());
  DeviceBatch b{d_ids.get(), d_types.get(), d_cu.get(), d_num.get(), total, S, longest};

  std::vector<float> fp8_out(static_cast<size_t>(S) * H), bf16_out(fp8_out.size());
  for (bool fp8 : {true, false}) {
    model.set_fp8_enabled(fp8);
    const Status s = model.Forward(b, d_out.get(), stream);
    if (s.ok()) PETAL_CUDA_CHECK(cudaStreamSynchronize(stream));
    model.set_fp8_enabled(true);
    PETAL_RETURN_IF_ERROR(s);
    PETAL_RETURN_IF_ERROR(d_out.CopyToHost(fp8 ? fp8_out.data() : bf16_out.data(), fp8_out.size()));
  }
  Fp8GateResult r;
  r.sequences = S;
  r.tokens = total;
  for (int i = 0; i < S; ++i)
    r.min_cosine =
        std::min(r.min_cosine, Cosine(&fp8_out[size_t(i) * H], &bf16_out[size_t(i) * H], H));
  return r;
}

}  // namespace petal::cuda
