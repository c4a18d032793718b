// Multi-vector (ColBERT / PyLate) folders: Dense modules, PyLate's keys and token ids (see
// multivector_config.h).
#include "model/multivector_config.h"

#include <simdjson.h>

#include <algorithm>

#include "common/file_util.h"
#include "model/config_fields.h"

namespace petal::internal {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

StatusOr<object> ReadObject(simdjson::dom::parser& parser, const std::string& path,
                            std::string* text) {
  PETAL_ASSIGN_OR_RETURN(*text, ReadFile(path));
  object obj;
  if (parser.parse(*text).get_object().get(obj) != simdjson::SUCCESS) {
    return InvalidArgument(path + " is not a JSON object");
  }
  return obj;
}

// One Dense module's config.json: what PyLate's Dense computes is x W^T (+ b) on every token.
StatusOr<DenseModule> ReadDense(const std::string& dir, const std::string& path) {
  if (path.empty() || path.find("..") != std::string::npos) {
    return InvalidArgument(JoinPath(dir, "modules.json") + ": Dense path '" + path +
                           "' is not a folder inside the model folder");
  }
  const std::string p = JoinPath(JoinPath(dir, path), "config.json");
  simdjson::dom::parser parser;
  std::string text;
  PETAL_ASSIGN_OR_RETURN(object obj, ReadObject(parser, p, &text));
  ConfigFields f(obj, p);
  for (auto field : obj) {
    static const char* kKnown[] = {"in_features",         "out_features",      "bias",
                                   "activation_function", "module_input_name", "module_output_name",
                                   "use_residual"};
    // Not a structured binding: clang 14 (the fuzz preset) cannot capture one in the lambda.
    const std::string_view key = field.key;
    if (std::none_of(std::begin(kKnown), std::end(kKnown),
                     [&](const char* k) { return key == k; })) {
      const std::string k(key);
      return f.Unsupported(k.c_str(), "is not a Dense key Petal implements");
    }
  }
  DenseModule d;
  d.path = path;
  PETAL_ASSIGN_OR_RETURN(d.in_features, f.Int("in_features"));
  PETAL_ASSIGN_OR_RETURN(d.out_features, f.Int("out_features"));
  if (d.in_features == 0 || d.out_features == 0) {
    return InvalidArgument(p + ": in_features and out_features must be positive");
  }
  PETAL_ASSIGN_OR_RETURN(d.bias, f.StrictBoolOr("bias", true));  // nn.Linear's default
  const std::string act = f.StrOr("activation_function", "torch.nn.modules.linear.Identity");
  if (act != "torch.nn.modules.linear.Identity") {
    return f.Unsupported("activation_function",
                         "is not served (a multi-vector projection must be "
                         "torch.nn.modules.linear.Identity)");
  }
  for (const char* k : {"module_input_name", "module_output_name"}) {
    if (f.Has(k) && f.StrOr(k, "") != "token_embeddings") {
      return f.Unsupported(k, "is not served (the projection maps token_embeddings)");
    }
  }
  PETAL_ASSIGN_OR_RETURN(bool residual, f.StrictBoolOr("use_residual", false));
  if (residual) return f.Unsupported("use_residual", "is not served");
  return d;  // weights: <path>/model.safetensors, read by the engine (model/multivector.h)
}

// Token ids through dir/tokenizer.json, as transformers' convert_tokens_to_ids: added tokens,
// then the model's vocabulary (an object for WordPiece / BPE, [piece, score] pairs for Unigram).
class TokenLookup {
 public:
  Status Open(const std::string& dir) {
    path_ = JoinPath(dir, "tokenizer.json");
    if (!FileExists(path_)) {
      return NotFound(path_ +
                      " is missing: a multi-vector model needs it for its prefix, mask "
                      "and skiplist token ids");
    }
    PETAL_ASSIGN_OR_RETURN(text_, ReadFile(path_));
    if (parser_.parse(text_).get(doc_) != simdjson::SUCCESS) {
      return InvalidArgument(path_ + " is not JSON");
    }
    return Status::Ok();
  }
  const std::string& path() const { return path_; }

  // The token's id, or -1.
  int Find(std::string_view token) const {
    simdjson::dom::array added;
    if (doc_["added_tokens"].get_array().get(added) == simdjson::SUCCESS) {
      for (element a : added) {
        std::string_view content;
        int64_t id = -1;
        if (a["content"].get_string().get(content) == simdjson::SUCCESS && content == token &&
            a["id"].get_int64().get(id) == simdjson::SUCCESS) {
          return static_cast<int>(id);
        }
      }
    }
    element vocab;
    if (doc_["model"]["vocab"].get(vocab) != simdjson::SUCCESS) return -1;
    int64_t id = -1;
    simdjson::dom::array pieces;
    if (vocab.get_array().get(pieces) == simdjson::SUCCESS) {
      int64_t i = 0;
      for (element p : pieces) {
        std::string_view piece;
        if (p.at(0).get_string().get(piece) == simdjson::SUCCESS && piece == token) {
          return static_cast<int>(i);
        }
        ++i;
      }
      return -1;
    }
    if (vocab[token].get_int64().get(id) == simdjson::SUCCESS) return static_cast<int>(id);
    return -1;
  }

  // The unknown token's id (model.unk_token or model.unk_id), or -1.
  int Unknown() const {
    int64_t id = -1;
    if (doc_["model"]["unk_id"].get_int64().get(id) == simdjson::SUCCESS) {
      return static_cast<int>(id);
    }
    std::string_view unk;
    if (doc_["model"]["unk_token"].get_string().get(unk) == simdjson::SUCCESS) return Find(unk);
    return -1;
  }

 private:
  std::string path_, text_;
  simdjson::dom::parser parser_;
  element doc_;
};

// The tokenizer's mask token: tokenizer_config.json / special_tokens_map.json 'mask_token' (a
// string or {"content": ...}), else "[MASK]" or "<mask>" if the tokenizer has one.
int MaskTokenId(const std::string& dir, const TokenLookup& tok) {
  for (const char* file : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const std::string p = JoinPath(dir, file);
    if (!FileExists(p)) continue;
    simdjson::dom::parser parser;
    std::string text;
    auto obj = ReadObject(parser, p, &text);
    if (!obj.ok()) continue;
    std::string_view m;
    if ((*obj)["mask_token"].get_string().get(m) == simdjson::SUCCESS ||
        (*obj)["mask_token"]["content"].get_string().get(m) == simdjson::SUCCESS) {
      if (int id = tok.Find(m); id >= 0) return id;
    }
  }
  for (const char* m : {"[MASK]", "<mask>"}) {
    if (int id = tok.Find(m); id >= 0) return id;
  }
  return -1;
}

// A prefix's id ("" = none): PyLate adds the prefix to the tokenizer as one token, so a published
// model's tokenizer has it.
StatusOr<int> PrefixId(const ConfigFields& f, const char* key, const std::string& prefix,
                       const TokenLookup& tok) {
  if (prefix.empty()) return -1;
  const int id = tok.Find(prefix);
  if (id < 0) {
    return InvalidArgument(f.file() + ": key '" + key + "' = \"" + prefix + "\": " + tok.path() +
                           " has no such token (PyLate adds the prefix to the tokenizer as one "
                           "token)");
  }
  return id;
}

}  // namespace

Status ReadMultiVector(const std::string& dir, const std::vector<std::string>& dense_paths,
                       ModelConfig& c) {
  const std::string modules = JoinPath(dir, "modules.json");
  if (c.architecture != Architecture::kBert || c.task != ModelTask::kEmbed) {
    return InvalidArgument(modules +
                           ": a Dense module without pooling (a ColBERT / PyLate "
                           "multi-vector model) is served for BERT / XLM-R encoders only; " +
                           JoinPath(dir, "config.json") + " 'architectures' = \"" +
                           c.hf_architecture + "\"");
  }
  MultiVectorConfig& mv = c.multivector;
  int width = c.hidden_size;
  for (const std::string& path : dense_paths) {
    PETAL_ASSIGN_OR_RETURN(DenseModule d, ReadDense(dir, path));
    if (d.in_features != width) {
      return InvalidArgument(JoinPath(JoinPath(dir, path), "config.json") + ": in_features " +
                             std::to_string(d.in_features) + " does not match the " +
                             std::to_string(width) + " values it receives");
    }
    width = d.out_features;
    mv.dense.push_back(std::move(d));
  }
  // PyLate's keys, with its defaults when absent or null.
  const std::string st = JoinPath(dir, "config_sentence_transformers.json");
  simdjson::dom::parser parser;
  std::string text = "{}";
  object obj;
  if (FileExists(st)) {
    PETAL_ASSIGN_OR_RETURN(obj, ReadObject(parser, st, &text));
  } else if (parser.parse(text).get_object().get(obj) != simdjson::SUCCESS) {
    return Internal("empty object");
  }
  ConfigFields f(obj, st);
  const std::string sim = f.StrOr("similarity_fn_name", "MaxSim");
  if (sim != "MaxSim") {
    return f.Unsupported("similarity_fn_name",
                         "is not served (multi-vector models score by "
                         "MaxSim)");
  }
  const std::string type = f.StrOr("model_type", "ColBERT");
  if (type != "ColBERT") {
    return f.Unsupported("model_type", "is not a multi-vector model type Petal serves (ColBERT)");
  }
  mv.query_prefix = f.StrOr("query_prefix", "[Q] ");
  mv.document_prefix = f.StrOr("document_prefix", "[D] ");
  PETAL_ASSIGN_OR_RETURN(mv.query_length, f.IntOr("query_length", 32));
  PETAL_ASSIGN_OR_RETURN(mv.document_length, f.IntOr("document_length", 180));
  PETAL_ASSIGN_OR_RETURN(mv.do_query_expansion, f.StrictBoolOr("do_query_expansion", true));
  PETAL_ASSIGN_OR_RETURN(mv.attend_to_expansion_tokens,
                         f.StrictBoolOr("attend_to_expansion_tokens", false));
  if (!mv.do_query_expansion) mv.attend_to_expansion_tokens = false;  // as PyLate
  const int positions = c.max_position_embeddings - c.position_offset;
  // PyLate's defaults (32, 180) are cut to a small encoder's positions; explicit values must fit.
  if (!f.Has("query_length")) mv.query_length = std::min(mv.query_length, positions);
  if (!f.Has("document_length")) mv.document_length = std::min(mv.document_length, positions);
  for (const char* key : {"query_length", "document_length"}) {
    const int v = key[0] == 'q' ? mv.query_length : mv.document_length;
    if (v < 3 || v > positions) {
      return f.Unsupported(
          key, "is outside [3, " + std::to_string(positions) + "] (the encoder's positions)");
    }
  }
  TokenLookup tok;
  PETAL_RETURN_IF_ERROR(tok.Open(dir));
  PETAL_ASSIGN_OR_RETURN(mv.query_prefix_id, PrefixId(f, "query_prefix", mv.query_prefix, tok));
  PETAL_ASSIGN_OR_RETURN(mv.document_prefix_id,
                         PrefixId(f, "document_prefix", mv.document_prefix, tok));
  mv.mask_token_id = MaskTokenId(dir, tok);
  if (mv.do_query_expansion && mv.mask_token_id < 0) {
    return InvalidArgument(st + ": 'do_query_expansion' is on but " + tok.path() +
                           " has no mask token to expand queries with");
  }
  for (int id : {mv.query_prefix_id, mv.document_prefix_id, mv.mask_token_id}) {
    if (id >= c.vocab_size) {
      return InvalidArgument(tok.path() + ": token id " + std::to_string(id) +
                             " (a prefix or the mask token) is outside the model's vocab_size " +
                             std::to_string(c.vocab_size));
    }
  }
  // Skiplist: PyLate's default is string.punctuation, one word per character.
  std::vector<std::string> words;
  simdjson::dom::array list;
  if (f.Has("skiplist_words")) {
    if (obj["skiplist_words"].get_array().get(list) != simdjson::SUCCESS) {
      return f.Unsupported("skiplist_words", "is not a list of strings");
    }
    for (element w : list) {
      std::string_view s;
      if (w.get_string().get(s) != simdjson::SUCCESS) {
        return f.Unsupported("skiplist_words", "is not a list of strings");
      }
      words.emplace_back(s);
    }
  } else {
    for (char ch : std::string("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")) words.emplace_back(1, ch);
  }
  const int unk = tok.Unknown();
  for (const std::string& w : words) {
    int id = tok.Find(w);
    if (id < 0) id = unk;  // convert_tokens_to_ids maps an unknown word to the unknown token
    if (id >= 0 && id < c.vocab_size) mv.skiplist_ids.push_back(id);
  }
  std::sort(mv.skiplist_ids.begin(), mv.skiplist_ids.end());
  mv.skiplist_ids.erase(std::unique(mv.skiplist_ids.begin(), mv.skiplist_ids.end()),
                        mv.skiplist_ids.end());
  c.task = ModelTask::kMultiVector;
  c.task_source = modules + " Dense without Pooling (ColBERT / PyLate)";
  c.score_outputs = width;
  c.normalize = false;  // per token, by the engine
  c.max_seq_length = std::max(mv.query_length, mv.document_length);
  return Status::Ok();
}

}  // namespace petal::internal
