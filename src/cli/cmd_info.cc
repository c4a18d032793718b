// `petal info`: describes a model folder (architecture, dimensions, parameter count, pooling,
// weights on disk) as aligned text or, with --json, one JSON object. Reads only the config and
// the safetensors headers, so it is fast even for large checkpoints. Also reports this machine's
// CPU features as the CPU engine detects them.
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/model_arg.h"
#include "common/json_literal.h"
#include "kernels/cpu/cpu_features.h"
#include "model/config.h"
#include "model/router_folder.h"
#include "model/safetensors.h"

namespace petal::cli {
namespace {

struct InfoOptions {
  std::string model_dir = "models/all-MiniLM-L6-v2";
  bool json = false;
};

// One row of the report: its value as text, and whether JSON should quote it.
struct Field {
  std::string key;
  std::string value;
  bool quoted;
};

int RunInfo(const InfoOptions& opts) {
  auto config = LoadModelConfig(opts.model_dir);
  if (!config.ok()) {
    std::fprintf(stderr, "petal info: %s\n", config.status().ToString().c_str());
    return 1;
  }
  auto store = WeightStore::Open(TransformerDir(opts.model_dir));
  if (!store.ok()) {
    std::fprintf(stderr, "petal info: %s\n", store.status().ToString().c_str());
    return 1;
  }
  // Weight dtypes on disk, with how many values each holds ("F32" for MiniLM).
  std::map<std::string, int64_t> dtypes;
  int64_t on_disk = 0;
  for (const std::string& name : (*store)->Names()) {
    const TensorView* t = (*store)->Find(name);
    dtypes[DTypeName(t->dtype)] += t->numel();
    on_disk += t->numel();
  }
  std::string dtype_list;
  for (const auto& [d, n] : dtypes) dtype_list += (dtype_list.empty() ? "" : "+") + d;

  const ModelConfig& c = *config;
  auto num = [](int64_t v) { return std::to_string(v); };
  std::vector<Field> fields = {
      {"model_dir", c.model_dir, true},
      {"architecture", ArchitectureName(c.architecture), true},
      {"hf_architecture", c.hf_architecture, true},
      {"hidden_size", num(c.hidden_size), false},
      {"num_layers", num(c.num_layers), false},
      {"num_heads", num(c.num_heads), false},
      {"num_kv_heads", num(c.num_kv_heads), false},
      {"head_dim", num(c.head_dim), false},
      {"intermediate_size", num(c.intermediate_size), false},
      {"vocab_size", num(c.vocab_size), false},
      {"max_position_embeddings", num(c.max_position_embeddings), false},
      {"max_seq_length", num(c.max_seq_length), false},
      {"parameters", num(c.ParameterCount()), false},
      {"parameters_on_disk", num(on_disk), false},
      {"pooling", PoolingModeName(c.pooling), true},
      {"normalize", c.normalize ? "true" : "false", false},
      {"attention_mask", AttentionMaskName(c.mask), true},
      {"weights_dtype", dtype_list, true},
      {"model_type", c.model_type, true},
      {"int8_mode", Int8ModeName(c.int8_mode), true},
      {"default_prompt_name", c.default_prompt_name, true},
      {"task", ModelTaskName(c.task), true},
      {"task_source", c.task_source, true},
  };
  // Prompts: a JSON object with --json, `name="text"` pairs otherwise.
  std::string prompts_json = "{", prompts_text;
  for (const auto& [name, text] : c.prompts) {
    prompts_json +=
        (prompts_json.size() > 1 ? "," : "") + JsonLiteral(name) + ":" + JsonLiteral(text);
    prompts_text += (prompts_text.empty() ? "" : ", ") + name + "=" + JsonLiteral(text);
  }
  fields.push_back({"prompts", opts.json ? prompts_json + "}" : prompts_text, false});
  // This machine, for the CPU engine: features detected at run time (PETAL_CPU_ISA caps them).
  const cpu::CpuFeatures& f = cpu::DetectCpuFeatures();
  fields.push_back({"cpu", f.Describe(), true});
  fields.push_back({"cpu_isa", f.BestIsa(), true});
  fields.push_back({"cpu_default_path", f.BestIsa() == "generic" ? "reference" : "fp32", true});
  if (c.task == ModelTask::kScore) {
    fields.push_back({"score_head", ScoreHeadName(c.score_head), true});
    fields.push_back({"score_outputs", num(c.score_outputs), false});
    fields.push_back({"score_activation",
                      c.score_activation == ScoreActivation::kIdentity ? "identity" : "sigmoid",
                      true});
  }
  if (c.task == ModelTask::kClassify) {
    // Labels: a JSON array with --json, comma-separated otherwise.
    std::string labels_json = "[", labels_text;
    for (const auto& l : c.labels) {
      labels_json += (labels_json.size() > 1 ? "," : "") + JsonLiteral(l);
      labels_text += (labels_text.empty() ? "" : ", ") + l;
    }
    fields.push_back({"score_head", ScoreHeadName(c.score_head), true});
    fields.push_back({"num_labels", num(c.score_outputs), false});
    fields.push_back({"labels", opts.json ? labels_json + "]" : labels_text, false});
    fields.push_back({"class_activation", ClassActivationName(c.class_activation), true});
  }
  if (c.task == ModelTask::kMultiVector) {
    const MultiVectorConfig& mv = c.multivector;
    fields.push_back({"token_dim", num(c.score_outputs), false});
    fields.push_back({"query_prefix", mv.query_prefix, true});
    fields.push_back({"document_prefix", mv.document_prefix, true});
    fields.push_back({"query_length", num(mv.query_length), false});
    fields.push_back({"document_length", num(mv.document_length), false});
    fields.push_back({"do_query_expansion", mv.do_query_expansion ? "true" : "false", false});
    fields.push_back(
        {"attend_to_expansion_tokens", mv.attend_to_expansion_tokens ? "true" : "false", false});
    fields.push_back({"skiplist_tokens", num(static_cast<int>(mv.skiplist_ids.size())), false});
  }
  if (opts.json) {
    std::string out = "{";
    for (size_t i = 0; i < fields.size(); ++i) {
      out += (i ? "," : "") + JsonLiteral(fields[i].key) + ":" +
             (fields[i].quoted ? JsonLiteral(fields[i].value) : fields[i].value);
    }
    std::printf("%s}\n", out.c_str());
    return 0;
  }
  size_t width = 0;
  for (const Field& f : fields) width = std::max(width, f.key.size());
  for (const Field& f : fields) {
    std::printf("%-*s  %s\n", static_cast<int>(width), f.key.c_str(), f.value.c_str());
  }
  return 0;
}

std::function<int()> SetupInfo(CLI::App* sub) {
  auto opts = std::make_shared<InfoOptions>();
  sub->add_option("--model", opts->model_dir,
                  "Model folder (Hugging Face layout) or hub id ORG/NAME[@REV]")
      ->capture_default_str();
  sub->add_flag("--json", opts->json, "Print one JSON object instead of aligned text");
  return [opts] {
    if (!ResolveModelFlag("petal info", &opts->model_dir)) return 1;
    return RunInfo(*opts);
  };
}

}  // namespace
}  // namespace petal::cli

PETAL_REGISTER_COMMAND(info, "info", "Describe a model folder: architecture, sizes, pooling",
                       petal::cli::SetupInfo);
