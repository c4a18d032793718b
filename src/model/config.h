// ModelConfig: one typed view of a Hugging Face model folder (config.json plus the
// sentence-transformers files modules.json, 1_Pooling/config.json, sentence_bert_config.json,
// config_sentence_transformers.json, and Petal's own optional petal_config.json). Which keys are
// read, per family, is docs/models.md; the architecture-specific ones are read by the entry of
// src/model/registry.h. Thread-safety: plain value type.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace petal {

enum class Architecture { kBert, kQwen3 };
enum class PoolingMode { kMean, kCls, kLastToken };
enum class AttentionMask { kBidirectional, kCausal };
enum class Activation { kGelu, kGeluTanh, kSilu };
// How the model's own int8 output is defined: kLinear is Petal's per-row scaled int8; kTanh is
// round(127 * tanh(x)) of the pooled state (pplx-embed-v1's native int8; binary is its sign).
enum class Int8Mode { kLinear, kTanh };
// What a model returns per sequence: a pooled vector (embedders), a few relevance logits
// (rankers: cross-encoders and LM rerankers; docs/models.md "Ranking models"), or one logit per
// class (sequence classifiers with num_labels > 1: sentiment, NLI, ...; "Sequence classifiers"),
// or a vocabulary-sized sparse vector (SPLADE: a BERT masked-LM head, max over tokens of
// log(1 + relu(logits)); "Sparse embeddings"), or one vector per token (late interaction:
// ColBERT / PyLate, the encoder's token states through the model's Dense projection,
// L2-normalised per token; "Multi-vector models").
enum class ModelTask { kEmbed, kScore, kClassify, kSparse, kMultiVector };
// How a classifier's class probabilities are made from its logits: softmax over the classes
// (config.json problem_type single_label_classification, or none), or an independent sigmoid per
// class (multi_label_classification).
enum class ClassActivation { kSoftmax, kSigmoid };
// The head a ranking model or classifier runs on its pooled state:
//   kBertPooler: BertForSequenceClassification, classifier(tanh(pooler.dense(CLS))), num_labels
//       logits (1 for a cross-encoder);
//   kRobertaClassifier: XLMRobertaForSequenceClassification,
//       classifier.out_proj(tanh(classifier.dense(<s>))), num_labels logits;
//   kLmYesNo: a causal LM reranker (Qwen3-Reranker): the LM head's rows of the "yes" and "no"
//       tokens on the last position's final hidden state, 2 logits [yes, no];
//   kBertMlmSplade: BertForMaskedLM's cls.predictions head on every token (dense + GELU +
//       LayerNorm, then the decoder: vocab_size logits), max-pooled per sequence over
//       log(1 + relu(logit)) (sentence-transformers SpladePooling, max / relu).
enum class ScoreHead { kNone, kBertPooler, kRobertaClassifier, kLmYesNo, kBertMlmSplade };
// How relevance scores are made from the logits (sentence-transformers CrossEncoder's
// activation_fn): kSigmoid (its default for one label), kIdentity (raw logits). For the 2-logit
// yes/no head the score is softmax([yes, no])[yes] = sigmoid(yes - no) either way of spelling it.
enum class ScoreActivation { kSigmoid, kIdentity };

const char* ArchitectureName(Architecture a);
const char* PoolingModeName(PoolingMode p);
const char* AttentionMaskName(AttentionMask m);
const char* Int8ModeName(Int8Mode m);
// "embed", "score", "classify", "sparse", "multivector"
const char* ModelTaskName(ModelTask t);
const char* ClassActivationName(ClassActivation a);  // "softmax", "sigmoid"
const char* ScoreHeadName(ScoreHead h);

// One sentence-transformers Dense module of a multi-vector model (its folder's config.json and
// model.safetensors): out = x W^T (+ b), identity activation, applied to every token's state.
struct DenseModule {
  std::string path;  // the module's folder, relative to the model folder (e.g. "1_Dense")
  int in_features = 0;
  int out_features = 0;
  bool bias = false;
};

// A late-interaction (ColBERT / PyLate) model's input and output rules, from
// config_sentence_transformers.json (PyLate's keys; defaults are PyLate's) and the tokenizer
// (docs/models.md "Multi-vector models"). A prefix id is inserted after the first token;
// queries are padded with mask tokens up to query_length when do_query_expansion is on.
struct MultiVectorConfig {
  std::vector<DenseModule> dense;                     // modules.json order; at least one
  std::string query_prefix, document_prefix;          // "" = none
  int query_prefix_id = -1, document_prefix_id = -1;  // -1 = none
  int query_length = 32;      // tokens of a query, prefix included (expansion pads to it)
  int document_length = 180;  // longest document, prefix included
  bool do_query_expansion = true;
  // false (PyLate's default): expansion tokens attend to the text, but no token attends to them
  // (their keys are masked); the engine treats a sequence's trailing run of mask_token_id as
  // expansion tokens.
  bool attend_to_expansion_tokens = false;
  int mask_token_id = -1;
  // Token ids left out of a document's vectors (PyLate's skiplist_words, by default every
  // ASCII punctuation character, through the tokenizer's vocabulary; a word outside it maps to
  // the unknown token, as transformers' convert_tokens_to_ids does). Sorted, unique.
  std::vector<int32_t> skiplist_ids;
};

struct ModelConfig {
  std::string model_dir;
  std::string hf_architecture;  // e.g. "BertModel", "Qwen3Model", as config.json says
  std::string model_type;       // e.g. "bert", "xlm-roberta", "bidirectional_pplx_qwen3"
  Architecture architecture = Architecture::kBert;

  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // == num_heads for BERT
  int head_dim = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  int type_vocab_size = 0;  // BERT only
  float norm_eps = 1e-12f;
  double rope_theta = 10000.0;  // Qwen3 only
  Activation activation = Activation::kGelu;
  // BERT family: first position id (XLM-RoBERTa numbers positions from pad_token_id + 1).
  int position_offset = 0;
  // Qwen3 decoder family variants: q/k projection biases, per-head RMSNorm of q and k.
  bool attention_bias = false;
  bool qk_norm = true;

  PoolingMode pooling = PoolingMode::kMean;
  bool normalize = false;  // L2-normalise pooled embeddings
  AttentionMask mask = AttentionMask::kBidirectional;
  // Longest input in tokens, special tokens included, as sentence-transformers truncates it
  // (max_seq_length in sentence_bert_config.json), capped by max_position_embeddings.
  int max_seq_length = 0;
  Int8Mode int8_mode = Int8Mode::kLinear;
  // config_sentence_transformers.json: instruction prompts by name (prepended to the text before
  // tokenizing) and the one applied when a request names none ("" = none).
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;

  // Ranking models (task kScore) and classifiers (kClassify). score_outputs is how many logits a
  // sequence yields: 1 for a cross-encoder, 2 for kLmYesNo, config.json's num_labels (> 1) for a
  // classifier, vocab_size for a sparse (SPLADE) model.
  ModelTask task = ModelTask::kEmbed;
  ScoreHead score_head = ScoreHead::kNone;
  int score_outputs = 0;
  ScoreActivation score_activation = ScoreActivation::kSigmoid;
  // kLmYesNo: the token ids of "yes" and "no" (from the tokenizer), and whether the LM head is
  // the input embedding (tie_word_embeddings) rather than a separate lm_head.weight.
  int yes_token_id = -1;
  int no_token_id = -1;
  bool tie_word_embeddings = false;
  // Classifiers (task kClassify): the class names, labels[i] = config.json id2label["i"]
  // ("LABEL_i" where id2label has no entry), score_outputs of them; and how probabilities are
  // made (problem_type).
  std::vector<std::string> labels;
  ClassActivation class_activation = ClassActivation::kSoftmax;
  // Multi-vector models (task kMultiVector); score_outputs is then the projection's output size.
  MultiVectorConfig multivector;
  // Where the task came from, for `petal info` and logs (e.g. "config.json 'architectures'",
  // "folder name contains 'reranker'", "petal_config.json 'task'").
  std::string task_source;

  // Whether the engine runs a head after pooling (rankers and classifiers): its rows are then
  // score_outputs float32 logits, unnormalised, and the embedding options do not apply.
  bool HasHead() const { return task != ModelTask::kEmbed; }
  // Values per row the engine returns: hidden_size for embedders, score_outputs for rankers,
  // classifiers and sparse models, and per token for multi-vector models.
  int OutputDim() const { return HasHead() ? score_outputs : hidden_size; }

  // Parameter count implied by the shapes (embeddings included).
  int64_t ParameterCount() const;
};

// Parses `dir`/config.json and the sentence-transformers files. Unsupported architectures and
// missing or invalid fields fail with the field named.
StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);
// Parses config from JSON text (for tests and fuzzing); sentence-transformers files are not read.
StatusOr<ModelConfig> ParseModelConfig(const std::string& config_json);

}  // namespace petal
