// Reading a model folder's configuration: config.json through the architecture registry, then
// sentence-transformers' files and petal_config.json on top (see config.h).
#include "model/config.h"

#include <cmath>

#include <simdjson.h>

#include <algorithm>

#include "common/file_util.h"
#include "model/config_fields.h"
#include "model/multivector_config.h"
#include "model/registry.h"
#include "model/router_folder.h"
#include "model/task_config.h"

namespace petal {

int64_t ModelConfig::ParameterCount() const {
  // Exact: the parse below rejects shapes of more than 10^13 parameters, well under 2^53.
  return static_cast<int64_t>(FindArchitecture(architecture).parameter_count(*this));
}

namespace {

using simdjson::dom::object;

constexpr double kMaxParameters = 1e13;

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

// A cross-encoder's activation (sentence-transformers CrossEncoder): config.json's
// "sentence_transformers": {"activation_fn": ...} (v4+), else the older
// "sbert_ce_default_activation_function"; Sigmoid when neither is set (its default for one label).
Status ReadScoreActivation(const ConfigFields& f, ModelConfig* c) {
  std::string path, key = "sbert_ce_default_activation_function";
  object st;
  if (f.Has("sentence_transformers") &&
      f.object()["sentence_transformers"].get_object().get(st) == simdjson::SUCCESS) {
    ConfigFields s(st, f.file() + " (sentence_transformers)");
    if (s.Has("activation_fn")) {
      path = s.StrOr("activation_fn", "?");
      if (path.empty()) path = "?";
      key = "sentence_transformers";
    }
  }
  if (path.empty() && f.Has(key.c_str())) path = f.StrOr(key.c_str(), "?");
  if (path.empty() || path == "torch.nn.modules.activation.Sigmoid" || path == "torch.nn.Sigmoid") {
    c->score_activation = ScoreActivation::kSigmoid;
  } else if (path == "torch.nn.modules.linear.Identity" || path == "torch.nn.Identity") {
    c->score_activation = ScoreActivation::kIdentity;
  } else {
    return f.Unsupported(key.c_str(), "names activation '" + path +
                                          "' (Petal applies torch.nn.Sigmoid or "
                                          "torch.nn.Identity to a cross-encoder's logit)");
  }
  return Status::Ok();
}

// The keys every architecture shares; the architecture's entry reads the rest.
StatusOr<ModelConfig> ParseConfigObject(object obj, const std::string& file) {
  ConfigFields f(obj, file);
  PETAL_ASSIGN_OR_RETURN(const ArchitectureEntry* arch, DetectArchitecture(f));
  // Pre-quantised checkpoints (compressed-tensors, fbgemm_fp8, ...): their tensors are not the
  // float weights every loader here expects. Petal quantises float checkpoints itself at load.
  if (f.Has("quantization_config")) {
    return f.Unsupported("quantization_config",
                         "marks a pre-quantised checkpoint (not supported: load the float "
                         "checkpoint and serve it with --quantize fp8)");
  }
  ModelConfig c;
  c.architecture = arch->id;
  c.model_type = f.StrOr("model_type", "");
  c.hf_architecture = f.FirstArchitecture();
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
  PETAL_RETURN_IF_ERROR(arch->parse_extras(f, &c));
  if (c.task == ModelTask::kScore) PETAL_RETURN_IF_ERROR(ReadScoreActivation(f, &c));
  if (c.max_position_embeddings < c.position_offset) {
    return InvalidArgument(
        file + ": max_position_embeddings " + std::to_string(c.max_position_embeddings) +
        " is smaller than the first position id " + std::to_string(c.position_offset));
  }
  c.max_seq_length = c.max_position_embeddings - c.position_offset;
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) {
    return InvalidArgument(file + ": rope_theta must be positive and finite");
  }
  // Each field is at most 2^30, but their products are not bounded: reject shapes no real model
  // has, so that ParameterCount and every buffer size derived from the shapes fit in int64.
  const double params = arch->parameter_count(c);
  if (params > kMaxParameters) {
    return InvalidArgument(file + ": the shapes imply " + std::to_string(params) +
                           " parameters, more than the 10^13 Petal accepts");
  }
  return c;
}

// A SpladePooling module's config (`path` in the folder): pooling_strategy "max" and
// activation_function "relu" (sentence-transformers' defaults) are what Petal computes. Marks the
// model a sparse encoder (ResolveTask checks its class).
Status ReadSpladePooling(const std::string& dir, const std::string& path, ModelConfig& c) {
  if (path.find("..") != std::string::npos) {
    return InvalidArgument(JoinPath(dir, "modules.json") + ": SpladePooling path '" + path +
                           "' leaves the model folder");
  }
  const std::string p = JoinPath(JoinPath(dir, path), "config.json");
  if (FileExists(p)) {
    simdjson::dom::parser parser;
    PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(p));
    PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, text, p));
    ConfigFields f(obj, p);
    if (f.StrOr("pooling_strategy", "max") != "max") {
      return f.Unsupported("pooling_strategy", "is not served (Petal's SPLADE pooling is max)");
    }
    if (f.StrOr("activation_function", "relu") != "relu") {
      return f.Unsupported("activation_function",
                           "is not served (Petal's SPLADE activation is relu)");
    }
  }
  c.task = ModelTask::kSparse;
  c.task_source = JoinPath(dir, "modules.json") + " SpladePooling";
  return Status::Ok();
}

// Reads the sentence-transformers files, if present, into `c`.
Status ApplySentenceTransformers(const std::string& dir, ModelConfig& c, bool* has_pooling) {
  simdjson::dom::parser parser;
  const std::string modules_path = JoinPath(dir, "modules.json");
  std::string pooling_dir;
  std::vector<std::string> dense_paths;  // Dense modules: a multi-vector model's projection
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
      if (type.find("Router") != std::string_view::npos) {
        // A query / document Router (an inference-free SPLADE model): the document route's
        // SpladePooling makes the model sparse; its transformer is found by TransformerDir and
        // the query route's static module by the gateway (router_folder.h).
        PETAL_ASSIGN_OR_RETURN(RouterFolder r, ReadRouterFolder(dir));
        if (r.doc_splade.empty()) {
          return Unimplemented(modules_path +
                               ": a Router is served only as a SPLADE model (a document route "
                               "with SpladePooling)");
        }
        PETAL_RETURN_IF_ERROR(ReadSpladePooling(dir, r.doc_splade, c));
        continue;
      }
      if (type.find("SpladePooling") != std::string_view::npos) {
        // A SPLADE model (sentence-transformers SparseEncoder): max over tokens of
        // log(1 + relu(MLM logits)); other strategies and activations are refused.
        PETAL_RETURN_IF_ERROR(ReadSpladePooling(dir, std::string(path), c));
        continue;
      }
      if (type.find("Pooling") != std::string_view::npos) pooling_dir = std::string(path);
      if (type.find("Dense") != std::string_view::npos) dense_paths.emplace_back(path);
      if (type.find("Normalize") != std::string_view::npos) c.normalize = true;
    }
  }
  *has_pooling = !pooling_dir.empty();
  if (!dense_paths.empty() && !pooling_dir.empty()) {
    // A Dense layer on the pooled vector changes every embedding; Petal does not run it.
    return Unimplemented(modules_path + ": a Dense module ('" + dense_paths[0] +
                         "') after pooling is not served");
  }
  if (!pooling_dir.empty()) {
    if (pooling_dir.find("..") != std::string::npos) {
      return InvalidArgument(modules_path + ": pooling path '" + pooling_dir +
                             "' leaves the model folder");
    }
    const std::string p = JoinPath(JoinPath(dir, pooling_dir), "config.json");
    PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(p));
    PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, text, p));
    ConfigFields f(obj, p);
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
  const std::string sbert = JoinPath(TransformerDir(dir), "sentence_bert_config.json");
  if (FileExists(sbert)) {
    PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(sbert));
    PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, text, sbert));
    ConfigFields f(obj, sbert);
    if (f.Has("max_seq_length")) {
      PETAL_ASSIGN_OR_RETURN(int m, f.Int("max_seq_length"));
      if (m > 0) c.max_seq_length = std::min(m, c.max_position_embeddings - c.position_offset);
    }
  }
  // config_sentence_transformers.json: {"prompts": {name: text}, "default_prompt_name": name}.
  const std::string st = JoinPath(dir, "config_sentence_transformers.json");
  if (FileExists(st)) {
    PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(st));
    PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, text, st));
    ConfigFields f(obj, st);
    object prompts;
    if (obj["prompts"].get_object().get(prompts) == simdjson::SUCCESS) {
      for (auto [name, value] : prompts) {
        std::string_view v;
        if (value.get_string().get(v) != simdjson::SUCCESS) {
          return InvalidArgument(st + ": prompt '" + std::string(name) + "' is not a string");
        }
        c.prompts[std::string(name)] = std::string(v);
      }
    }
    c.default_prompt_name = f.StrOr("default_prompt_name", "");
    if (!c.default_prompt_name.empty() && !c.prompts.count(c.default_prompt_name)) {
      return f.Unsupported("default_prompt_name", "names no entry of 'prompts'");
    }
  }
  // Dense modules without pooling: a ColBERT / PyLate late-interaction model.
  if (!dense_paths.empty()) PETAL_RETURN_IF_ERROR(internal::ReadMultiVector(dir, dense_paths, c));
  return Status::Ok();
}

// petal_config.json: Petal's own keys for what checkpoints do not say (docs/models.md).
Status ApplyPetalConfig(const std::string& dir, ModelConfig& c) {
  const std::string p = JoinPath(dir, "petal_config.json");
  if (!FileExists(p)) return Status::Ok();
  simdjson::dom::parser parser;
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(p));
  PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, text, p));
  ConfigFields f(obj, p);
  if (f.Has("attention_mask")) {
    PETAL_ASSIGN_OR_RETURN(c.mask, ParseMask(f.StrOr("attention_mask", ""), p));
  }
  if (f.Has("pooling")) {
    PETAL_ASSIGN_OR_RETURN(c.pooling, ParsePooling(f.StrOr("pooling", ""), p));
  }
  c.normalize = f.BoolOr("normalize", c.normalize);
  if (f.Has("int8_mode")) {
    const std::string m = f.StrOr("int8_mode", "");
    if (m != "linear" && m != "tanh")
      return f.Unsupported("int8_mode", "(expected 'linear' or 'tanh')");
    c.int8_mode = m == "tanh" ? Int8Mode::kTanh : Int8Mode::kLinear;
  }
  if (f.Has("max_seq_length")) {
    PETAL_ASSIGN_OR_RETURN(int m, f.Int("max_seq_length"));
    if (m > 0) c.max_seq_length = std::min(m, c.max_position_embeddings - c.position_offset);
  }
  if (f.Has("task") && c.task == ModelTask::kMultiVector) {
    return f.Unsupported("task", "does not apply: modules.json makes this a multi-vector model");
  }
  if (f.Has("task")) {
    const std::string t = f.StrOr("task", "");
    if (t != "embed" && t != "score" && t != "classify") {
      return f.Unsupported("task", "(expected 'embed', 'score' or 'classify')");
    }
    c.task = t == "score"      ? ModelTask::kScore
             : t == "classify" ? ModelTask::kClassify
                               : ModelTask::kEmbed;
    c.task_source = p + " 'task'";
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
  const std::string path = JoinPath(TransformerDir(dir), "config.json");
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  simdjson::dom::parser parser;
  PETAL_ASSIGN_OR_RETURN(object obj, ParseObject(parser, text, path));
  PETAL_ASSIGN_OR_RETURN(ModelConfig c, ParseConfigObject(obj, path));
  c.model_dir = dir;
  bool has_pooling_module = false;
  PETAL_RETURN_IF_ERROR(ApplySentenceTransformers(dir, c, &has_pooling_module));
  PETAL_RETURN_IF_ERROR(ApplyPetalConfig(dir, c));
  PETAL_RETURN_IF_ERROR(internal::ResolveTask(dir, has_pooling_module, c));
  return c;
}

}  // namespace petal
