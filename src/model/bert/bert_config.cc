// The BERT family's config.json keys: BERT (model_type "bert": all-MiniLM, bge, e5, gte) and
// XLM-RoBERTa (model_type "xlm-roberta": multilingual-e5, bge-m3), which differ only in where
// position ids start (XLM-R: pad_token_id + 1) and in their defaults. docs/models.md has the table.
#include <string>

#include "model/bert/bert_arch.h"
#include "model/config_fields.h"

#include <simdjson.h>

namespace petal {
namespace {

bool IsXlmr(const ConfigFields& f) {
  const std::string mt = f.StrOr("model_type", "");
  if (!mt.empty()) return mt == "xlm-roberta";
  return f.FirstArchitecture().rfind("XLMRoberta", 0) == 0;
}

// The checkpoint classes whose encoder is the embedder: the bare model, and the pre-training
// heads around it (their extra tensors are ignored).
bool KnownClass(const std::string& a, bool xlmr) {
  if (xlmr) return a == "XLMRobertaModel" || a == "XLMRobertaForMaskedLM";
  return a == "BertModel" || a == "BertForMaskedLM" || a == "BertForPreTraining";
}

// The sequence-classification classes: cross-encoders (ms-marco-MiniLM, bge-reranker-*; one
// label), run as ranking models, and classifiers (num_labels > 1: sentiment, NLI, ...). Other
// task heads (token classification, QA, ...) are refused.
bool ClassifierClass(const std::string& a, bool xlmr) {
  return a == (xlmr ? "XLMRobertaForSequenceClassification" : "BertForSequenceClassification");
}

// Bounds the classes a classifier may have (its head is a [num_labels, H] matrix, and every
// label travels in each answer).
constexpr int kMaxLabels = 4096;

// num_labels: the key, else the size of id2label (how transformers derives it), else 2 (its
// default); both given must agree. One label is a cross-encoder's relevance logit (task score);
// more make a sequence classifier (task classify) whose class names are id2label's values,
// "LABEL_i" where it has none, and whose probabilities follow problem_type.
Status ReadLabels(const ConfigFields& f, ModelConfig* c) {
  int labels = 2;
  simdjson::dom::object id2label;
  const bool has_map = f.Has("id2label");
  if (has_map && f.object()["id2label"].get_object().get(id2label) != simdjson::SUCCESS) {
    return f.Unsupported("id2label", "is not an object");
  }
  if (f.Has("num_labels")) {
    PETAL_ASSIGN_OR_RETURN(labels, f.Int("num_labels"));
    if (has_map && static_cast<int>(id2label.size()) != labels) {
      return f.Unsupported("num_labels", "disagrees with id2label's " +
                                             std::to_string(id2label.size()) + " entries");
    }
  } else if (has_map) {
    labels = static_cast<int>(id2label.size());
  }
  if (labels < 1 || labels > kMaxLabels) {
    return f.Unsupported(f.Has("num_labels") ? "num_labels" : "id2label",
                         "gives " + std::to_string(labels) + " labels (1 for a cross-encoder, 2.." +
                             std::to_string(kMaxLabels) + " for a sequence classifier)");
  }
  c->score_outputs = labels;
  if (labels == 1) {
    c->task = ModelTask::kScore;
    return Status::Ok();
  }
  c->task = ModelTask::kClassify;
  c->labels.assign(labels, "");
  if (has_map) {
    for (auto [key, value] : id2label) {
      const std::string k(key);
      int i = -1;
      if (!k.empty() && k.size() <= 5 && k.find_first_not_of("0123456789") == std::string::npos) {
        i = std::stoi(k);
      }
      std::string_view name;
      if (i < 0 || i >= labels) {
        return f.Unsupported("id2label", "has key '" + k + "' (keys are the class ids 0.." +
                                             std::to_string(labels - 1) + ")");
      }
      if (value.get_string().get(name) != simdjson::SUCCESS) {
        return f.Unsupported("id2label", "maps '" + k + "' to a value that is not a string");
      }
      c->labels[i] = std::string(name);
    }
  }
  for (int i = 0; i < labels; ++i) {
    if (c->labels[i].empty()) c->labels[i] = "LABEL_" + std::to_string(i);
  }
  const std::string problem = f.StrOr("problem_type", "single_label_classification");
  if (problem == "single_label_classification") {
    c->class_activation = ClassActivation::kSoftmax;
  } else if (problem == "multi_label_classification") {
    c->class_activation = ClassActivation::kSigmoid;
  } else {
    return f.Unsupported("problem_type",
                         "is not served for num_labels > 1 (expected "
                         "single_label_classification or multi_label_classification)");
  }
  return Status::Ok();
}

}  // namespace

bool DetectBert(const ConfigFields& f) {
  const std::string mt = f.StrOr("model_type", "");
  if (!mt.empty()) return mt == "bert" || mt == "xlm-roberta";
  const std::string a = f.FirstArchitecture();
  return KnownClass(a, false) || KnownClass(a, true) || ClassifierClass(a, false) ||
         ClassifierClass(a, true);
}

Status ParseBertExtras(const ConfigFields& f, ModelConfig* c) {
  const bool xlmr = IsXlmr(f);
  const std::string arch = f.FirstArchitecture();
  const bool classifier = ClassifierClass(arch, xlmr);
  if (!arch.empty() && !KnownClass(arch, xlmr) && !classifier) {
    return f.Unsupported("architectures",
                         xlmr ? "is not an XLM-RoBERTa encoder Petal runs (expected "
                                "XLMRobertaModel, XLMRobertaForMaskedLM or "
                                "XLMRobertaForSequenceClassification)"
                              : "is not a BERT encoder Petal runs (expected BertModel, "
                                "BertForMaskedLM, BertForPreTraining or "
                                "BertForSequenceClassification)");
  }
  if (classifier) {
    PETAL_RETURN_IF_ERROR(ReadLabels(f, c));
    c->score_head = xlmr ? ScoreHead::kRobertaClassifier : ScoreHead::kBertPooler;
  }
  // 64-bit: both factors may be up to 2^30 (found by fuzz_model_config; UB in int).
  if (c->hidden_size != static_cast<int64_t>(c->num_heads) * c->head_dim) {
    return InvalidArgument(f.file() +
                           ": hidden_size must equal num_attention_heads * head_dim for BERT");
  }
  PETAL_ASSIGN_OR_RETURN(c->activation, ReadActivation(f, "gelu"));
  if (c->activation != Activation::kGelu) {
    return Unimplemented(f.file() + ": BERT with hidden_act '" + f.StrOr("hidden_act", "") +
                         "' (only 'gelu' is supported)");
  }
  PETAL_ASSIGN_OR_RETURN(c->type_vocab_size, f.IntOr("type_vocab_size", xlmr ? 1 : 2));
  PETAL_ASSIGN_OR_RETURN(c->norm_eps, ReadNormEps(f, "layer_norm_eps", xlmr ? 1e-5 : 1e-12));
  std::string pos = f.StrOr("position_embedding_type", "absolute");
  if (pos != "absolute") return Unimplemented(f.file() + ": position_embedding_type '" + pos + "'");
  PETAL_ASSIGN_OR_RETURN(bool decoder, f.StrictBoolOr("is_decoder", false));
  if (decoder) return f.Unsupported("is_decoder", "makes the encoder causal (not supported)");
  if (xlmr) {
    // XLM-R numbers the positions of a sequence padding_idx + 1, padding_idx + 2, ...
    PETAL_ASSIGN_OR_RETURN(int pad, f.IntOr("pad_token_id", 1));
    c->position_offset = pad + 1;
  }
  c->pooling = PoolingMode::kCls;
  c->mask = AttentionMask::kBidirectional;
  return Status::Ok();
}

double BertParameterCount(const ModelConfig& c) {
  const double h = c.hidden_size, i = c.intermediate_size, L = c.num_layers;
  // The pooler head is not used for embeddings and not counted.
  const double emb =
      (static_cast<double>(c.vocab_size) + c.max_position_embeddings + c.type_vocab_size) * h +
      2 * h;
  const double layer =
      (h * 3 * h + 3 * h) + (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h;
  // A cross-encoder's or classifier's head: a dense H x H + bias (BERT's pooler, XLM-R's
  // classifier.dense) and one output row + bias per label.
  double head = c.HasHead() ? (h * h + h) + (h + 1) * c.score_outputs : 0;
  // SPLADE's masked-LM head: dense H x H + bias, LayerNorm, and a bias per vocabulary entry (the
  // decoder is the word embeddings, tied, as BertForMaskedLM checkpoints store it).
  if (c.task == ModelTask::kSparse) head = (h * h + h) + 2 * h + static_cast<double>(c.vocab_size);
  return emb + L * layer + head;
}

}  // namespace petal
