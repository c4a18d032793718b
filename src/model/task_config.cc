// The task rule of a model folder (see task_config.h).
#include "model/task_config.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>

#include "common/file_util.h"

namespace petal::internal {
namespace {

bool ContainsNoCase(std::string hay, std::string needle) {
  for (auto* s : {&hay, &needle}) {
    std::transform(s->begin(), s->end(), s->begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
  }
  return hay.find(needle) != std::string::npos;
}

// The model's own folder name: the last path component, or, in a huggingface_hub cache snapshot
// (".../models--ORG--NAME/snapshots/REV"), the repository folder's.
std::string ModelFolderName(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t snap = dir.rfind("/snapshots/");
  if (snap != std::string::npos) dir.resize(snap);
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

// The id of token `token` in dir/tokenizer.json's model vocabulary (what transformers'
// convert_tokens_to_ids returns for a plain token).
StatusOr<int> VocabId(const std::string& dir, const std::string& token) {
  const std::string p = JoinPath(dir, "tokenizer.json");
  if (!FileExists(p)) {
    return NotFound(p +
                    " is missing: an LM reranker needs it for the ids of its 'yes' and 'no' "
                    "tokens");
  }
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(p));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS) return InvalidArgument(p + " is not JSON");
  int64_t id = -1;
  if (doc["model"]["vocab"][token].get_int64().get(id) != simdjson::SUCCESS || id < 0) {
    return InvalidArgument(p + ": model.vocab has no token '" + token +
                           "' (an LM reranker scores with the logits of 'yes' and 'no')");
  }
  return static_cast<int>(id);
}

}  // namespace

// Which task the folder serves, for the families where config.json does not say it
// (docs/models.md "Ranking models"): a Qwen3 causal LM is a reranker when petal_config.json says
// "task": "score", or, with no such key, when the folder's path names it a reranker
// (its last component, e.g. ".../Qwen3-Reranker-0.6B", or the hub cache's
// "models--Qwen--Qwen3-Reranker-4B" above "snapshots/REV", contains "reranker") and no
// sentence-transformers Pooling module says it is an embedder; a path that says reranker beside a
// Pooling module is refused as ambiguous. The task and its source are in ModelInfo / petal info.
Status ResolveTask(const std::string& dir, bool has_pooling_module, ModelConfig& c) {
  if (c.architecture == Architecture::kBert && c.task == ModelTask::kSparse) {
    // SPLADE: BertForMaskedLM's cls.predictions or XLMRobertaForMaskedLM's lm_head on every token.
    if (c.hf_architecture != "BertForMaskedLM" && c.hf_architecture != "XLMRobertaForMaskedLM") {
      return InvalidArgument(JoinPath(dir, "modules.json") +
                             ": a SpladePooling module needs a BertForMaskedLM or "
                             "XLMRobertaForMaskedLM checkpoint, but " +
                             JoinPath(dir, "config.json") + " 'architectures' = \"" +
                             c.hf_architecture + "\"");
    }
    c.score_head = ScoreHead::kBertMlmSplade;
    c.score_outputs = c.vocab_size;
    c.normalize = false;
    return Status::Ok();
  }
  if (c.architecture == Architecture::kBert) {
    if (c.task == ModelTask::kScore && c.score_head == ScoreHead::kNone) {
      return InvalidArgument(
          JoinPath(dir, "petal_config.json") + ": 'task' = \"score\" but " +
          JoinPath(dir, "config.json") + " 'architectures' = \"" + c.hf_architecture +
          "\" has no classification head (a BERT cross-encoder is "
          "BertForSequenceClassification or XLMRobertaForSequenceClassification)");
    }
    // What config.json's head is: a cross-encoder (one label) or a classifier (more).
    const bool classifier = c.score_head != ScoreHead::kNone && c.score_outputs > 1;
    const char* what = classifier ? "\" is a sequence classifier (" : "\" is a cross-encoder (";
    const std::string labels = std::to_string(c.score_outputs) + " labels)";
    if (c.score_head != ScoreHead::kNone &&
        c.task != (classifier ? ModelTask::kClassify : ModelTask::kScore)) {
      return InvalidArgument(JoinPath(dir, "petal_config.json") + ": 'task' = \"" +
                             ModelTaskName(c.task) + "\" but " + JoinPath(dir, "config.json") +
                             " 'architectures' = \"" + c.hf_architecture + what + labels +
                             ", task \"" + (classifier ? "classify" : "score") + "\"");
    }
    if (c.task == ModelTask::kClassify && c.score_head == ScoreHead::kNone) {
      return InvalidArgument(JoinPath(dir, "petal_config.json") + ": 'task' = \"classify\" but " +
                             JoinPath(dir, "config.json") + " 'architectures' = \"" +
                             c.hf_architecture +
                             "\" has no classification head (BertForSequenceClassification or "
                             "XLMRobertaForSequenceClassification with num_labels > 1)");
    }
    if (c.task_source.empty()) {
      c.task_source = JoinPath(dir, "config.json") + " 'architectures'";
    }
    if (c.HasHead()) {  // the head reads the first token, unnormalised
      c.pooling = PoolingMode::kCls;
      c.normalize = false;
    }
    return Status::Ok();
  }
  if (c.architecture != Architecture::kQwen3) return Status::Ok();
  if (c.task == ModelTask::kClassify) {
    return InvalidArgument(JoinPath(dir, "petal_config.json") +
                           ": 'task' = \"classify\" is for BERT / XLM-R sequence classifiers, "
                           "not Qwen3 models");
  }
  const bool named = ContainsNoCase(ModelFolderName(dir), "reranker");
  if (c.task_source.empty()) {
    if (named && has_pooling_module) {
      return InvalidArgument(
          dir +
          ": the folder's name says reranker but modules.json has a sentence-transformers "
          "Pooling module (an embedder); set \"task\" to \"score\" or \"embed\" in "
          "petal_config.json");
    }
    if (named) {
      c.task = ModelTask::kScore;
      c.task_source = "folder name contains 'reranker'";
    } else {
      c.task_source = "default (embedder)";
    }
  }
  if (c.task != ModelTask::kScore) return Status::Ok();
  if (c.mask != AttentionMask::kCausal) {
    return InvalidArgument(dir +
                           ": an LM reranker is a causal Qwen3 LM, but the attention mask is "
                           "bidirectional");
  }
  c.score_head = ScoreHead::kLmYesNo;
  c.score_outputs = 2;
  c.pooling = PoolingMode::kLastToken;
  c.normalize = false;
  PETAL_ASSIGN_OR_RETURN(c.yes_token_id, VocabId(dir, "yes"));
  PETAL_ASSIGN_OR_RETURN(c.no_token_id, VocabId(dir, "no"));
  if (c.yes_token_id >= c.vocab_size || c.no_token_id >= c.vocab_size) {
    return InvalidArgument(JoinPath(dir, "tokenizer.json") + ": the ids of 'yes' (" +
                           std::to_string(c.yes_token_id) + ") and 'no' (" +
                           std::to_string(c.no_token_id) + ") must be below vocab_size " +
                           std::to_string(c.vocab_size));
  }
  return Status::Ok();
}

}  // namespace petal::internal
