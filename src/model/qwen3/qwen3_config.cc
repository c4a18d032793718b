// The Qwen3 decoder family's config.json keys: plain Qwen3 checkpoints (model_type "qwen3":
// Qwen3-Embedding, causal + last token by default) and pplx-embed-v1 (model_type
// "bidirectional_pplx_qwen3", run natively: the same decoder without the causal mask). Every key
// that would change the maths and is not implemented (sliding windows, scaled RoPE, experts) is
// refused with its value. docs/models.md has the table.
#include <string>

#include "model/config_fields.h"
#include "model/qwen3/qwen3_arch.h"

namespace petal {
namespace {

constexpr const char* kPplxType = "bidirectional_pplx_qwen3";

bool KnownClass(const std::string& a, bool pplx) {
  if (pplx) return a == "PPLXQwen3Model";
  return a == "Qwen3Model" || a == "Qwen3ForCausalLM";
}

// rope_theta: top level (transformers 4.x) or rope_parameters.rope_theta (transformers 5);
// rope_scaling or a rope_type other than "default" would change the rotary embedding.
Status ReadRope(const ConfigFields& f, ModelConfig* c) {
  if (f.Has("rope_scaling")) {
    return f.Unsupported("rope_scaling",
                         "changes the rotary embedding (scaled RoPE is not "
                         "implemented)");
  }
  PETAL_ASSIGN_OR_RETURN(c->rope_theta, f.DoubleOr("rope_theta", 1e6));
  simdjson::dom::object rp;
  if (f.Has("rope_parameters")) {
    if (f.object()["rope_parameters"].get_object().get(rp) != simdjson::SUCCESS) {
      return f.Unsupported("rope_parameters", "is not an object");
    }
    ConfigFields p(rp, f.file() + " (rope_parameters)");
    const std::string type = p.StrOr("rope_type", "default");
    if (type != "default") {
      return f.Unsupported("rope_parameters",
                           "has rope_type '" + type + "' (only 'default' RoPE is implemented)");
    }
    if (p.Has("rope_theta")) {
      PETAL_ASSIGN_OR_RETURN(double theta, p.Double("rope_theta"));
      if (f.Has("rope_theta") && theta != c->rope_theta) {
        return f.Unsupported("rope_parameters",
                             "disagrees with 'rope_theta' = " + f.Json("rope_theta"));
      }
      c->rope_theta = theta;
    }
  }
  return Status::Ok();
}

// Sliding-window attention, in either spelling, is refused when it is on.
Status RefuseSlidingWindow(const ConfigFields& f) {
  PETAL_ASSIGN_OR_RETURN(bool sliding, f.StrictBoolOr("use_sliding_window", false));
  if (sliding) {
    return f.Unsupported("use_sliding_window",
                         "turns on sliding-window attention, which Petal does not implement");
  }
  simdjson::dom::array types;
  if (f.Has("layer_types")) {
    if (f.object()["layer_types"].get_array().get(types) != simdjson::SUCCESS) {
      return f.Unsupported("layer_types", "is not a list");
    }
    for (auto t : types) {
      std::string_view s;
      if (t.get_string().get(s) != simdjson::SUCCESS || s != "full_attention") {
        return f.Unsupported("layer_types",
                             "has an entry other than 'full_attention' "
                             "(sliding-window layers are not implemented)");
      }
    }
  }
  return Status::Ok();
}

// The attention mask: pplx-embed says use_bidirectional_attention (default true for its
// model_type); plain Qwen3 checkpoints are causal unless that key or Petal's is_causal says not.
StatusOr<AttentionMask> ReadMask(const ConfigFields& f, bool pplx) {
  bool bidirectional = pplx;
  PETAL_ASSIGN_OR_RETURN(bidirectional, f.StrictBoolOr("use_bidirectional_attention", pplx));
  if (f.Has("is_causal")) {
    PETAL_ASSIGN_OR_RETURN(bool causal, f.StrictBoolOr("is_causal", true));
    if (f.Has("use_bidirectional_attention") && causal == bidirectional) {
      return f.Unsupported("is_causal", "contradicts 'use_bidirectional_attention' = " +
                                            f.Json("use_bidirectional_attention"));
    }
    bidirectional = !causal;
  }
  return bidirectional ? AttentionMask::kBidirectional : AttentionMask::kCausal;
}

}  // namespace

bool DetectQwen3(const ConfigFields& f) {
  const std::string mt = f.StrOr("model_type", "");
  if (!mt.empty()) return mt == "qwen3" || mt == kPplxType;
  const std::string a = f.FirstArchitecture();
  return KnownClass(a, false) || KnownClass(a, true);
}

Status ParseQwen3Extras(const ConfigFields& f, ModelConfig* c) {
  const std::string mt = f.StrOr("model_type", "");
  const bool pplx = mt == kPplxType || (mt.empty() && KnownClass(f.FirstArchitecture(), true));
  const std::string arch = f.FirstArchitecture();
  if (!arch.empty() && !KnownClass(arch, pplx)) {
    return f.Unsupported("architectures",
                         pplx ? "is not the pplx-embed model class (expected PPLXQwen3Model)"
                              : "is not a Qwen3 decoder Petal runs (expected Qwen3Model or "
                                "Qwen3ForCausalLM)");
  }
  for (const char* moe : {"num_experts", "num_local_experts"}) {
    PETAL_ASSIGN_OR_RETURN(int experts, f.IntOr(moe, 0));
    if (experts > 0) return f.Unsupported(moe, "makes it a mixture of experts (not supported)");
  }
  PETAL_ASSIGN_OR_RETURN(c->activation, ReadActivation(f, "silu"));
  if (c->activation != Activation::kSilu) {
    return Unimplemented(f.file() + ": Qwen3 with hidden_act '" + f.StrOr("hidden_act", "") +
                         "' (only 'silu' is supported)");
  }
  PETAL_ASSIGN_OR_RETURN(c->norm_eps, ReadNormEps(f, "rms_norm_eps", 1e-6));
  PETAL_RETURN_IF_ERROR(ReadRope(f, c));
  PETAL_RETURN_IF_ERROR(RefuseSlidingWindow(f));
  PETAL_ASSIGN_OR_RETURN(c->attention_bias, f.StrictBoolOr("attention_bias", false));
  c->qk_norm = true;  // every Qwen3 layer normalises q and k per head
  PETAL_ASSIGN_OR_RETURN(c->mask, ReadMask(f, pplx));
  // tie_word_embeddings only concerns the LM head, which an embedder does not run; an LM
  // reranker (config.cc ResolveTask) reads its yes/no rows from the input embedding when it is
  // set (Qwen3Config's default is false), else from lm_head.weight.
  PETAL_ASSIGN_OR_RETURN(c->tie_word_embeddings, f.StrictBoolOr("tie_word_embeddings", false));
  c->pooling = c->mask == AttentionMask::kCausal ? PoolingMode::kLastToken : PoolingMode::kMean;
  c->normalize = true;
  if (pplx) c->int8_mode = Int8Mode::kTanh;
  return Status::Ok();
}

double Qwen3ParameterCount(const ModelConfig& c) {
  const double h = c.hidden_size, i = c.intermediate_size, L = c.num_layers, d = c.head_dim;
  const double q = c.num_heads * d, kv = c.num_kv_heads * d;
  const double bias = c.attention_bias ? q + 2 * kv + h : 0;
  const double qk_norm = c.qk_norm ? 2 * d : 0;
  return c.vocab_size * h + h + L * (h * (q + 2 * kv) + q * h + bias + qk_norm + 3 * h * i + 2 * h);
}

}  // namespace petal
