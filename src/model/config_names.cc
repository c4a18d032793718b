// The names of ModelConfig's enums (config.h), as config files, logs and `petal info` spell them.
// Thread-safety: pure functions.
#include "model/config.h"

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

const char* Int8ModeName(Int8Mode m) { return m == Int8Mode::kTanh ? "tanh" : "linear"; }

const char* ModelTaskName(ModelTask t) {
  switch (t) {
    case ModelTask::kEmbed:
      return "embed";
    case ModelTask::kScore:
      return "score";
    case ModelTask::kClassify:
      return "classify";
    case ModelTask::kSparse:
      return "sparse";
    case ModelTask::kMultiVector:
      return "multivector";
  }
  return "?";
}

const char* ClassActivationName(ClassActivation a) {
  return a == ClassActivation::kSigmoid ? "sigmoid" : "softmax";
}

const char* ScoreHeadName(ScoreHead h) {
  switch (h) {
    case ScoreHead::kNone:
      return "none";
    case ScoreHead::kBertPooler:
      return "bert_pooler_classifier";
    case ScoreHead::kRobertaClassifier:
      return "roberta_classifier";
    case ScoreHead::kLmYesNo:
      return "lm_yes_no";
    case ScoreHead::kBertMlmSplade:
      return "bert_mlm_splade";
  }
  return "?";
}

}  // namespace petal
