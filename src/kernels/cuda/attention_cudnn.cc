#include "kernels/cuda/attention_cudnn.h"

#include <map>
#include <tuple>
#include <utility>

#include "kernels/cuda/cuda_check.h"

#if PETAL_HAVE_CUDNN
#include <cudnn.h>

#include <cudnn_frontend.h>
#include <unordered_map>
#endif

namespace petal::cuda {

size_t CudnnAttentionMetaBytes(int max_seqs) {
  auto round16 = [](size_t n) { return (n + 15) / 16 * 16; };
  return round16(sizeof(int32_t) * max_seqs) + 2 * round16(sizeof(int32_t) * (max_seqs + 1));
}

CudnnAttentionMeta CarveCudnnAttentionMeta(void* storage, int max_seqs) {
  auto round16 = [](size_t n) { return (n + 15) / 16 * 16; };
  char* p = static_cast<char*>(storage);
  CudnnAttentionMeta m;
  m.seq_lens = reinterpret_cast<int32_t*>(p);
  p += round16(sizeof(int32_t) * max_seqs);
  m.qkv_offset = reinterpret_cast<int32_t*>(p);
  p += round16(sizeof(int32_t) * (max_seqs + 1));
  m.out_offset = reinterpret_cast<int32_t*>(p);
  return m;
}

#if PETAL_HAVE_CUDNN

namespace fe = cudnn_frontend;

namespace {

// Tensor uids of the SDPA graph (the variant pack maps them to device pointers).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kSeqLen, kQOff, kKOff, kVOff, kOOff };

// Everything a plan depends on.
using PlanKey = std::tuple<int, int, int, int, int, bool, int64_t>;  // seqs, len, hq, hkv, d,
                                                                     // causal, qkv stride

PlanKey KeyOf(const AttentionParams& p, int max_seqlen) {
  return {p.max_seqs, max_seqlen, p.num_heads, p.num_kv_heads, p.head_dim, p.causal, p.q_stride};
}

Status FeError(fe::error_t e, const char* what) {
  if (e.is_good()) return Status::Ok();
  return Internal(std::string("cuDNN ") + what + ": " + e.get_message());
}

}  // namespace

struct CudnnAttention::Impl {
  cudnnHandle_t handle = nullptr;
  std::map<PlanKey, std::shared_ptr<fe::graph::Graph>> plans;
  std::map<PlanKey, Status> failures;  // shapes cuDNN refused, so we do not retry each batch
};

StatusOr<std::unique_ptr<CudnnAttention>> CudnnAttention::Create(cudaStream_t stream) {
  if (cudnnGetVersion() < 90000) {
    return Unavailable("cuDNN " + std::to_string(cudnnGetVersion()) + " is older than 9.0");
  }
  int device = 0, major = 0;
  PETAL_CUDA_CHECK(cudaGetDevice(&device));
  PETAL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9) return Unavailable("cuDNN ragged attention needs sm_90 or newer");
  auto impl = std::make_unique<Impl>();
  if (cudnnCreate(&impl->handle) != CUDNN_STATUS_SUCCESS) {
    return Unavailable("cudnnCreate failed (is libcudnn installed?)");
  }
  if (cudnnSetStream(impl->handle, stream) != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(impl->handle);
    return Internal("cudnnSetStream failed");
  }
  return std::unique_ptr<CudnnAttention>(new CudnnAttention(std::move(impl)));
}

CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CudnnAttention::~CudnnAttention() {
  if (impl_ && impl_->handle) {
    impl_->plans.clear();
    cudnnDestroy(impl_->handle);
  }
}

std::string CudnnAttention::Version() const {
  const size_t v = cudnnGetVersion();  // e.g. 91400
  return "cudnn " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

Status CudnnAttention::Prepare(const AttentionParams& p, int max_seqlen) {
  const PlanKey key = KeyOf(p, max_seqlen);
  if (impl_->plans.count(key)) return Status::Ok();
  if (auto it = impl_->failures.find(key); it != impl_->failures.end()) return it->second;
  if (p.q_stride != p.k_stride || p.q_stride != p.v_stride) {
    return Unimplemented("cuDNN attention backend needs equal q/k/v row strides");
  }
  const int64_t B = p.max_seqs, S = max_seqlen, Hq = p.num_heads, Hkv = p.num_kv_heads,
                D = p.head_dim, row = p.q_stride, out_row = Hq * D;

  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto index = [&](const char* name, int64_t uid, int64_t n) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim({n, 1, 1, 1})
                         .set_stride({1, 1, 1, 1})
                         .set_data_type(fe::DataType_t::INT32));
  };
  // Token-major rows: head h of token t at t * row + h * D; the ragged offsets place sequences.
  auto qkv = [&](const char* name, int64_t uid, int64_t heads, const char* off_name,
                 int64_t off_uid) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim({B, heads, S, D})
                         .set_stride({S * row, D, row, 1})
                         .set_ragged_offset(index(off_name, off_uid, B + 1)));
  };
  auto q = qkv("Q", kQ, Hq, "q_off", kQOff);
  auto k = qkv("K", kK, Hkv, "k_off", kKOff);
  auto v = qkv("V", kV, Hkv, "v_off", kVOff);
  auto seq_len = index("seq_len", kSeqLen, B);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("petal_sdpa")
                     .set_generate_stats(false)
                     .set_attn_scale(p.scale)
                     .set_padding_mask(true)
                     .set_seq_len_q(seq_len)
                     .set_seq_len_kv(seq_len);
  if (p.causal) options.set_causal_mask(true);
  auto [o, stats] = g->sdpa(q, k, v, options);
  (void)stats;
  o->set_output(true)
      .set_uid(kO)
      .set_dim({B, Hq, S, D})
      .set_stride({S * out_row, D, out_row, 1})
      .set_ragged_offset(index("o_off", kOOff, B + 1));

  Status s = FeError(g->validate(), "validate");
  if (s.ok()) s = FeError(g->build_operation_graph(impl_->handle), "build_operation_graph");
  if (s.ok()) s = FeError(g->create_execution_plans({fe::HeurMode_t::A}), "execution plans");
  if (s.ok()) s = FeError(g->check_support(impl_->handle), "check_support");
  if (s.ok()) s = FeError(g->build_plans(impl_->handle), "build_plans");
  int64_t ws = 0;
  if (s.ok()) s = FeError(g->get_workspace_size(ws), "workspace size");
  if (!s.ok()) {
    impl_->failures.emplace(key, s);
    return s;
  }
  max_workspace_ = std::max(max_workspace_, static_cast<size_t>(ws));
  impl_->plans.emplace(key, std::move(g));
  return Status::Ok();
}

Status CudnnAttention::Run(const AttentionParams& p, int max_seqlen, const CudnnAttentionMeta& m,
                           void* workspace, cudaStream_t stream) {
  auto it = impl_->plans.find(KeyOf(p, max_seqlen));
  if (it == impl_->plans.end()) return FailedPrecondition("cuDNN attention: shape not prepared");
  if (cudnnSetStream(impl_->handle, stream) != CUDNN_STATUS_SUCCESS) {
    return Internal("cudnnSetStream failed");
  }
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<__nv_bfloat16*>(p.q)},
                                             {kK, const_cast<__nv_bfloat16*>(p.k)},
                                             {kV, const_cast<__nv_bfloat16*>(p.v)},
                                             {kO, p.out},
                                             {kSeqLen, m.seq_lens},
                                             {kQOff, m.qkv_offset},
                                             {kKOff, m.qkv_offset},
                                             {kVOff, m.qkv_offset},
                                             {kOOff, m.out_offset}};
  return FeError(it->second->execute(impl_->handle, pack, workspace), "execute");
}

#else  // !PETAL_HAVE_CUDNN

struct CudnnAttention::Impl {};

StatusOr<std::unique_ptr<CudnnAttention>> CudnnAttention::Create(cudaStream_t) {
  return Unavailable("built without the cuDNN frontend (run scripts/setup.sh, then reconfigure)");
}
CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnAttention::~CudnnAttention() = default;
std::string CudnnAttention::Version() const { return "none"; }
Status CudnnAttention::Prepare(const AttentionParams&, int) {
  return Unavailable("built without cuDNN");
}
Status CudnnAttention::Run(const AttentionParams&, int, const CudnnAttentionMeta&, void*,
                           cudaStream_t) {
  return Unavailable("built without cuDNN");
}

#endif  // PETAL_HAVE_CUDNN

}  // namespace petal::cuda
