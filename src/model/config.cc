#include "model/config.h"

#include <cmath>

#include <simdjson.h>

#include <algorithm>

#include "common/file_util.h"

namespace petal {

const char* ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kBert:
      return "bert";
    case Architecture::kQwen3:
      return "qwen3";
  }
  return "?";
}

const char* PoolingModeName(PoolingMode p) {
  switch (p) {
    case PoolingMode::kMean:
      return "mean";
    case PoolingMode::kCls:
      return "cls";
    case PoolingMode::kLastToken:
      return "last_token";
  }
  return "?";
}

const char* AttentionMaskName(AttentionMask m) {
  return m == AttentionMask::kCausal ? "causal" : "bidirectional";
}

int64_t ModelConfig::ParameterCount() const {
  const int64_t h = hidden_size, i = intermediate_size, L = num_layers;
  const int64_t q = static_cast<int64_t>(num_heads) * head_dim;
  const int64_t kv = static_cast<int64_t>(num_kv_heads) * head_dim;
  if (architecture == Architecture::kBert) {
    int64_t emb = (int64_t{vocab_size} + max_position_embeddings + type_vocab_size) * h + 2 * h;
    int64_t layer = (h * 3 * h + 3 * h) + (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h;
    return emb + L * layer;  // the pooler head is not used for embeddings and not counted
  }
  int64_t emb = static_cast<int64_t>(vocab_size) * h + h;
  int64_t layer = h * (q + 2 * kv) + q * h + 2 * head_dim + 3 * h * i + 2 * h;
  return emb + L * layer;
}

namespace {

using simdjson::dom::element;

constexpr double kMaxParameters = 1e13;

// A positive epsilon that fits a float: NaN or infinity would turn every embedding into NaN
// (and converting a double beyond float's range is undefined behaviour).
StatusOr<float> NormEps(double eps, const std::string& file) {
  if (!(eps > 0) || eps > 1.0) {
    return InvalidArgument(file + ": norm epsilon " + std::to_string(eps) + " is not in (0, 1]");
  }
  return static_cast<float>(eps);
}

// ParameterCount in floating point, which cannot overflow whatever the fields are.
double ApproxParameterCount(const ModelConfig& c) {
  const double h = c.hidden_size, i = c.intermediate_size, L = c.num_layers, d = c.head_dim;
  const double q = c.num_heads * d, kv = c.num_kv_heads * d;
  if (c.architecture == Architecture::kBert) {
    return (static_cast<double>(c.vocab_size) + c.max_position_embeddings + c.type_vocab_size + 2) *
               h +
           L * (4 * h * h + 2 * h * i + 9 * h + i);
  }
  return c.vocab_size * h + h + L * (h * (q + 2 * kv) + q * h + 2 * d + 3 * h * i + 2 * h);
}
using simdjson::dom::object;

// Small typed accessors that name the missing or mistyped field.
class Fields {
 public:
  Fields(object obj, std::string file) : obj_(obj), file_(std::move(file)) {}
  bool Has(const char* key) const {
    element e;
    return obj_[key].get(e) == simdjson::SUCCESS && !e.is_null();
  }
  StatusOr<int> Int(const char* key) const {
    int64_t v;
    if (obj_[key].get_int64().get(v) != simdjson::SUCCESS) {
      return InvalidArgument(file_ + ": field '" + key + "' is missing or not an integer");
    }
    if (v < 0 || v > (int64_t{1} << 30)) {
      return InvalidArgument(file_ + ": field '" + key + "' = " + std::to_string(v) +
                             " is out of range");
    }
    return static_cast<int>(v);
  }
  StatusOr<int> IntOr(const char* key, int dflt) const {
    if (!Has(key)) return dflt;
    return Int(key);
  }
  StatusOr<double> Double(const char* key) const {
    double v;
    if (obj_[key].get_double().get(v) == simdjson::SUCCESS) return v;
    int64_t i;
    if (obj_[key].get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
    return InvalidArgument(file_ + ": field '" + key + "' is missing or not a number");
  }
  std::string StrOr(const char* key, std::string dflt) const {
    std::string_view s;
    return obj_[key].get_string().get(s) == simdjson::SUCCESS ? std::string(s) : dflt;
  }
  bool BoolOr(const char* key, bool dflt) const {
    bool b;
    return obj_[key].get_bool().get(b) == simdjson::SUCCESS ? b : dflt;
  }

 private:
  object obj_;
  std::string file_;
};

StatusOr<object> ParseObject(simdjson::dom::parser& parser, const std::string& text,
                             const std::string& file) {
  object obj;
  if (parser.parse(text).get_object().get(obj) != simdjson::SUCCESS) {
    return InvalidArgument(file + " is not a JSON object");
  }
  return obj;
}

StatusOr<AttentionMask> ParseMask(const std::string& s, const std::string& where) {
  if (s == "bidirectional") return AttentionMask::kBidirectional;
  if (s == "causal") return AttentionMask::kCausal;
  return InvalidArgument(where + ": attention_mask '" + s +
                         "' (expected 'bidirectional' or 'causal')");
}

StatusOr<PoolingMode> ParsePooling(const std::string& s, const std::string& where) {
  if (s == "mean") return PoolingMode::kMean;
  if (s == "cls") return PoolingMode::kCls;
  if (s == "last_token" || s == "lasttoken") return PoolingMode::kLastToken;
  return InvalidArgument(where + ": pooling '" + s + "' (expected 'mean', 'cls' or 'last_token')");
}

StatusOr<ModelConfig> ParseConfigObject(object obj, const std::string& file) {
  Fields f(obj, file);
  ModelConfig c;
  std::string model_type = f.StrOr("model_type", "");
  simdjson::dom::array archs;
  if (obj["architectures"].get_array().get(archs) == simdjson::SUCCESS && archs.size() > 0) {
    std::string_view a;
    if (archs.at(0).get_string().get(a) == simdjson::SUCCESS) c.hf_architecture = std::string(a);
  }
  if (model_type.empty() && c.hf_architecture.empty()) {
    return InvalidArgument(file + ": neither 'model_type' nor 'architectures' is set");
  }
  const std::string& name = model_type.empty() ? c.hf_architecture : model_type;
  if (model_type == "bert" || c.hf_architecture.rfind("Bert", 0) == 0) {
    c.architecture = Architecture::kBert;
  } else if (model_type == "qwen3" || c.hf_architecture.rfind("Qwen3", 0) == 0) {
    c.architecture = Architecture::kQwen3;
  } else {
    return Unimplemented(file + ": unsupported architecture '" + name +
                         "' (supported: bert, qwen3)");
  }
  PETAL_ASSIGN_OR_RETURN(c.hidden_size, f.Int("hidden_size"));
  PETAL_ASSIGN_OR_RETURN(c.num_layers, f.Int("num_hidden_layers"));
  PETAL_ASSIGN_OR_RETURN(c.num_heads, f.Int("num_attention_heads"));
  PETAL_ASSIGN_OR_RETURN(c.intermediate_size, f.Int("intermediate_size"));
  PETAL_ASSIGN_OR_RETURN(c.vocab_size, f.Int("vocab_size"));
  PETAL_ASSIGN_OR_RETURN(c.max_position_embeddings, f.Int("max_position_embeddings"));
  if (c.hidden_size == 0 || c.num_heads == 0 || c.num_layers == 0 || c.vocab_size == 0) {
    return InvalidArgument(file +
                           ": hidden_size, num_hidden_layers, num_attention_heads and "
                           "vocab_size must be positive");
  }
  PETAL_ASSIGN_OR_RETURN(c.num_kv_heads, f.IntOr("num_key_value_heads", c.num_heads));
  PETAL_ASSIGN_OR_RETURN(c.head_dim, f.IntOr("head_dim", c.hidden_size / c.num_heads));
  if (c.num_kv_heads == 0 || c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument(file + ": num_attention_heads (" + std::to_string(c.num_heads) +
                           ") must be a multiple of num_key_value_heads (" +
                           std::to_string(c.num_kv_heads) + ")");
  }
  if (c.head_dim == 0 || c.head_dim % 2 != 0) {
    return InvalidArgument(file + ": head_dim " + std::to_string(c.head_dim) +
                           " must be even and positive");
  }
  std::string act = f.StrOr("hidden_act", c.architecture == Architecture::kBert ? "gelu" : "silu");
  if (act == "gelu")
    c.activation = Activation::kGelu;
  else if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    c.activation = Activation::kGeluTanh;
  else if (act == "silu" || act == "swish")
    c.activation = Activation::kSilu;
  else
    return Unimplemented(file + ": unsupported hidden_act '" + act + "'");

  if (c.architecture == Architecture::kBert) {
    // 64-bit: both factors may be up to 2^30 (found by fuzz_model_config; UB in int).
    if (c.hidden_size != static_cast<int64_t>(c.num_heads) * c.head_dim) {
      return InvalidArgument(file +
                             ": hidden_size must equal num_attention_heads * head_dim for BERT");
    }
    if (c.activation != Activation::kGelu) {
      return Unimplemented(file + ": BERT with hidden_act '" + act +
                           "' (only 'gelu' is supported)");
    }
    PETAL_ASSIGN_OR_RETURN(c.type_vocab_size, f.IntOr("type_vocab_size", 2));
    PETAL_ASSIGN_OR_RETURN(
        double eps, f.Has("layer_norm_eps") ? f.Double("layer_norm_eps") : StatusOr<double>(1e-12));
    PETAL_ASSIGN_OR_RETURN(c.norm_eps, NormEps(eps, file));
    std::string pos = f.StrOr("position_embedding_type", "absolute");
    if (pos != "absolute") return Unimplemented(file + ": position_embedding_type '" + pos + "'");
    c.pooling = PoolingMode::kCls;
    c.mask = AttentionMask::kBidirectional;
  } else {
    if (c.activation != Activation::kSilu) {
      return Unimplemented(file + ": Qwen3 with hidden_act '" + act +
                           "' (only 'silu' is supported)");
    }
    PETAL_ASSIGN_OR_RETURN(
        double eps, f.Has("rms_norm_eps") ? f.Double("rms_norm_eps") : StatusOr<double>(1e-6));
    PETAL_ASSIGN_OR_RETURN(c.norm_eps, NormEps(eps, file));
    PETAL_ASSIGN_OR_RETURN(c.rope_theta,
                           f.Has("rope_theta") ? f.Double("rope_theta") : StatusOr<double>(1e6));
    // HF Qwen3 checkpoints are causal; pplx-embed style checkpoints say "is_causal": false.
    c.mask = f.BoolOr("is_causal", true) ? AttentionMask::kCausal : AttentionMask::kBidirectional;
    c.pooling = c.mask == AttentionMask::kCausal ? PoolingMode::kLastToken : PoolingMode::kMean;
    c.normalize = true;
  }
  c.max_seq_length = c.max_position_embeddings;
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) {
    return InvalidArgument(file + ": rope_theta must be positive and finite");
  }
  // Each field is at most 2^30, but their products are not bounded: reject shapes no real model
  // has, so that ParameterCount and every buffer size derived from the shapes fit in int64.
  const double params = ApproxParameterCount(c);
  if (params > kMaxParameters) {
    return InvalidArgument(file + ": the shapes imply " + std::to_string(params) +
                           " parameters, more than the 10^13 Petal accepts");
  }
  return c;
}

// Reads the sentence-transformers files, if present, into `c`.
Status ApplySentenceTransformers(const std::string& dir, ModelConfig& c) {
  simdjson::dom::parser parser;
  const std::string modules_path = JoinPath(dir, "modules.json");
  std::string pooling_dir;
  if (FileExists(modules_path)) {
    PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(modules_path));
    simdjson::dom::array mods;
    if (parser.parse(text).get_array().get(mods) != simdjson::SUCCESS) {
      return InvalidArgument(modules_path + " is not a JSON array");
    }
    c.normalize = false;
    for (auto m : mods) {
      std::string_view type, path;
      if (m["type"].get_string().get(type) != simdjson::SUCCESS) continue;
      if (m["path"].get_string().get(path) != simdjson::SUCCESS) path = "";
      if (type.find("Pooling") != std::string_view::npos) pooling_dir = std::string(path);
      if (type.find("Normalize") != std::string_view::npos) c.normalize = true;
    }
  }
  if (!pooling_dir.empty()) {
    if (pooling_dir.find("..") != std::string::npos) {
      return InvalidArgument(modules_path + ": pooling path '" + pooling_dir +
                             "' leaves the model folder");
    }
    const std::string p = JoinPath(JoinPath(dir, pooling_dir), "config.json");
    PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(p));
    PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, text, p));
    Fields f(obj, p);
    int modes = 0;
    if (f.BoolOr("pooling_mode_cls_token", false)) {
      c.pooling = PoolingMode::kCls;
      ++modes;
    }
    if (f.BoolOr("pooling_mode_mean_tokens", false)) {
      c.pooling = PoolingMode::kMean;
      ++modes;
    }
    if (f.BoolOr("pooling_mode_lasttoken", false)) {
      c.pooling = PoolingMode::kLastToken;
      ++modes;
    }
    for (const char* k : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                          "pooling_mode_weightedmean_tokens"}) {
      if (f.BoolOr(k, false)) return Unimplemented(p + ": '" + k + "' pooling is not supported");
    }
    if (modes != 1) return Unimplemented(p + ": exactly one pooling mode must be set");
  }
  const std::string sbert = JoinPath(dir, "sentence_bert_config.json");
  if (FileExists(sbert)) {
    PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(sbert));
    PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, text, sbert));
    Fields f(obj, sbert);
    if (f.Has("max_seq_length")) {
      PETAL_ASSIGN_OR_RETURN(int m, f.Int("max_seq_length"));
      if (m > 0) c.max_seq_length = std::min(m, c.max_position_embeddings);
    }
  }
  return Status::Ok();
}

// petal_config.json: Petal's own keys for what checkpoints do not say (docs/models.md).
Status ApplyPetalConfig(const std::string& dir, ModelConfig& c) {
  const std::string p = JoinPath(dir, "petal_config.json");
  if (!FileExists(p)) return Status::Ok();
  simdjson::dom::parser parser;
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(p));
  PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, text, p));
  Fields f(obj, p);
  if (f.Has("attention_mask")) {
    PETAL_ASSIGN_OR_RETURN(c.mask, ParseMask(f.StrOr("attention_mask", ""), p));
  }
  if (f.Has("pooling")) {
    PETAL_ASSIGN_OR_RETURN(c.pooling, ParsePooling(f.StrOr("pooling", ""), p));
  }
  c.normalize = f.BoolOr("normalize", c.normalize);
  if (f.Has("max_seq_length")) {
    PETAL_ASSIGN_OR_RETURN(int m, f.Int("max_seq_length"));
    if (m > 0) c.max_seq_length = std::min(m, c.max_position_embeddings);
  }
  if (c.architecture == Architecture::kBert && c.mask == AttentionMask::kCausal) {
    return InvalidArgument(p + ": BERT models cannot use a causal attention mask");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ModelConfig> ParseModelConfig(const std::string& config_json) {
  simdjson::dom::parser parser;
  PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, config_json, "config.json"));
  return ParseConfigObject(obj, "config.json");
}

StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path = JoinPath(dir, "config.json");
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  simdjson::dom::parser parser;
  PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, text, path));
  PETAL_ASSIGN_OR_RETURN(ModelConfig c, ParseConfigObject(obj, path));
  c.model_dir = dir;
  PETAL_RETURN_IF_ERROR(ApplySentenceTransformers(dir, c));
  PETAL_RETURN_IF_ERROR(ApplyPetalConfig(dir, c));
  return c;
}

}  // namespace petal
