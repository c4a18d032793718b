// tokenizer.json "model" section: WordPiece, BPE (byte-level) and Unigram (see tokenizer_impl.h).
#include <simdjson.h>

#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unigram.h"
#include "tokenizer/wordpiece.h"

namespace petal {

using simdjson::dom::element;

namespace {

Status Unsupported(const std::string& field, std::string_view value) {
  return Unimplemented("tokenizer.json: unsupported " + field + " = " + std::string(value));
}

StatusOr<std::vector<std::pair<std::string, int32_t>>> VocabMap(element m) {
  simdjson::dom::object obj;
  if (m["vocab"].get_object().get(obj))
    return InvalidArgument("tokenizer.json: model.vocab must be an object");
  std::vector<std::pair<std::string, int32_t>> v;
  v.reserve(obj.size());
  for (auto [key, value] : obj) {
    int64_t id;
    if (value.get_int64().get(id))
      return InvalidArgument("tokenizer.json: model.vocab['" + std::string(key) +
                             "'] is not an integer");
    v.emplace_back(std::string(key), static_cast<int32_t>(id));
  }
  return v;
}

bool IsNullOr(element obj, std::string_view key, std::string_view empty_ok) {
  element v;
  if (obj[key].get(v) || v.is_null()) return true;
  std::string_view s;
  if (!v.get_string().get(s)) return s == empty_ok;
  bool b;
  if (!v.get_bool().get(b)) return !b;
  return false;
}

// The value of `r`, or `def` if it is missing or of another type.
template <typename T>
T Or(simdjson::simdjson_result<T> r, T def) {
  T v;
  return std::move(r).get(v) ? def : v;
}

}  // namespace

StatusOr<std::unique_ptr<tok::Model>> ParseModel(element m, const std::vector<tok::PreTokStep>& pre,
                                                 TokenizerModel* type_out) {
  std::string_view type;
  if (m["type"].get_string().get(type))
    return InvalidArgument("tokenizer.json: model.type missing");
  if (type == "WordPiece") {
    *type_out = TokenizerModel::kWordPiece;
    PETAL_ASSIGN_OR_RETURN(auto vocab, VocabMap(m));
    auto unk = Or<std::string_view>(m["unk_token"].get_string(), "[UNK]");
    auto prefix = Or<std::string_view>(m["continuing_subword_prefix"].get_string(), "##");
    int64_t max_chars = Or<int64_t>(m["max_input_chars_per_word"].get_int64(), 100);
    PETAL_ASSIGN_OR_RETURN(auto wp,
                           tok::WordPieceModel::Create(vocab, std::string(unk), std::string(prefix),
                                                       static_cast<int>(max_chars)));
    return std::unique_ptr<tok::Model>(std::move(wp));
  }
  if (type == "BPE") {
    *type_out = TokenizerModel::kBpe;
    bool byte_level = false;
    for (const auto& st : pre) byte_level |= st.kind == tok::PreTokStep::Kind::kByteLevel;
    if (!byte_level) return Unsupported("model.type", "BPE without a ByteLevel pre_tokenizer");
    if (!IsNullOr(m, "dropout", "")) return Unsupported("model.dropout", "(set)");
    if (!IsNullOr(m, "continuing_subword_prefix", ""))
      return Unsupported("model.continuing_subword_prefix", "(non-empty)");
    if (!IsNullOr(m, "end_of_word_suffix", ""))
      return Unsupported("model.end_of_word_suffix", "(non-empty)");
    if (!IsNullOr(m, "byte_fallback", "")) return Unsupported("model.byte_fallback", "true");
    bool ignore_merges = Or<bool>(m["ignore_merges"].get_bool(), false);
    PETAL_ASSIGN_OR_RETURN(auto vocab, VocabMap(m));
    simdjson::dom::array arr;
    if (m["merges"].get_array().get(arr))
      return InvalidArgument("tokenizer.json: model.merges must be an array");
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(arr.size());
    size_t k = 0;
    for (element e : arr) {
      std::string_view s;
      simdjson::dom::array pair;
      if (!e.get_string().get(s)) {  // Older "a b" form.
        size_t sp = s.find(' ', 1);
        if (sp == std::string_view::npos)
          return InvalidArgument("tokenizer.json: model.merges[" + std::to_string(k) +
                                 "] has no space");
        merges.emplace_back(std::string(s.substr(0, sp)), std::string(s.substr(sp + 1)));
      } else if (!e.get_array().get(pair) && pair.size() == 2) {
        std::string_view a, b;
        if (pair.at(0).get_string().get(a) || pair.at(1).get_string().get(b)) {
          return InvalidArgument("tokenizer.json: model.merges[" + std::to_string(k) +
                                 "] must hold two strings");
        }
        merges.emplace_back(std::string(a), std::string(b));
      } else {
        return InvalidArgument("tokenizer.json: model.merges[" + std::to_string(k) +
                               "] is malformed");
      }
      ++k;
    }
    PETAL_ASSIGN_OR_RETURN(auto bpe, tok::BpeModel::Create(vocab, merges, ignore_merges));
    return std::unique_ptr<tok::Model>(std::move(bpe));
  }
  if (type == "Unigram") {
    *type_out = TokenizerModel::kUnigram;
    if (!IsNullOr(m, "byte_fallback", "")) return Unsupported("model.byte_fallback", "true");
    int64_t unk_id = -1;
    if (m["unk_id"].get_int64().get(unk_id)) return Unsupported("model.unk_id", "null");
    simdjson::dom::array arr;
    if (m["vocab"].get_array().get(arr))
      return InvalidArgument("tokenizer.json: model.vocab must be an array");
    std::vector<std::pair<std::string, double>> pieces;
    pieces.reserve(arr.size());
    for (element e : arr) {
      simdjson::dom::array pr;
      std::string_view s;
      if (e.get_array().get(pr) || pr.size() != 2 || pr.at(0).get_string().get(s)) {
        return InvalidArgument("tokenizer.json: model.vocab[" + std::to_string(pieces.size()) +
                               "] must be [piece, score]");
      }
      element sc = pr.at(1);
      double score =
          Or<double>(sc.get_double(), static_cast<double>(Or<int64_t>(sc.get_int64(), 0)));
      pieces.emplace_back(std::string(s), score);
    }
    PETAL_ASSIGN_OR_RETURN(auto uni,
                           tok::UnigramModel::Create(pieces, static_cast<int32_t>(unk_id)));
    return std::unique_ptr<tok::Model>(std::move(uni));
  }
  return Unsupported("model.type", type);
}

}  // namespace petal
