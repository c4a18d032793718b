// tokenizer.json loader: maps each JSON component onto Petal's implementation, or fails
// naming the field we do not support (see tokenizer_impl.h).
#include <simdjson.h>

#include <algorithm>
#include <string>

#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unigram.h"
#include "tokenizer/wordpiece.h"

namespace petal {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using tok::NormStep;
using tok::PreTokStep;

// The Qwen2 split pattern, the only Split regex we implement (by a hand-written scanner).
constexpr std::string_view kQwenPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

Status Unsupported(const std::string& field, std::string_view value) {
  return Unimplemented("tokenizer.json: unsupported " + field + " = " + std::string(value));
}

bool Has(element obj, std::string_view key) {
  element v;
  return !obj[key].get(v) && !v.is_null();
}

StatusOr<std::string> Str(element obj, std::string_view key, const std::string& path) {
  std::string_view s;
  if (obj[key].get_string().get(s))
    return InvalidArgument("tokenizer.json: " + path + "." + std::string(key) +
                           " must be a string");
  return std::string(s);
}

bool Bool(element obj, std::string_view key, bool def) {
  bool b;
  return obj[key].get_bool().get(b) ? def : b;
}

StatusOr<int64_t> Int(element obj, std::string_view key, const std::string& path) {
  int64_t v;
  if (obj[key].get_int64().get(v))
    return InvalidArgument("tokenizer.json: " + path + "." + std::string(key) +
                           " must be an integer");
  return v;
}

double Num(element v) {
  double d;
  if (!v.get_double().get(d)) return d;
  int64_t i;
  if (!v.get_int64().get(i)) return static_cast<double>(i);
  return 0;
}

Status ParseNormalizer(element n, const std::string& path, std::vector<NormStep>* steps) {
  PETAL_ASSIGN_OR_RETURN(std::string type, Str(n, "type", path));
  NormStep st;
  if (type == "Sequence") {
    simdjson::dom::array arr;
    if (n["normalizers"].get_array().get(arr))
      return InvalidArgument("tokenizer.json: " + path + ".normalizers must be an array");
    int k = 0;
    for (element c : arr) {
      PETAL_RETURN_IF_ERROR(
          ParseNormalizer(c, path + ".normalizers[" + std::to_string(k++) + "]", steps));
    }
    return Status::Ok();
  } else if (type == "BertNormalizer") {
    st.kind = NormStep::Kind::kBert;
    st.clean_text = Bool(n, "clean_text", true);
    st.handle_chinese_chars = Bool(n, "handle_chinese_chars", true);
    st.lowercase = Bool(n, "lowercase", true);
    // strip_accents: null means "follow lowercase".
    st.strip_accents = Has(n, "strip_accents") ? Bool(n, "strip_accents", false) : st.lowercase;
  } else if (type == "NFC") {
    st.kind = NormStep::Kind::kNfc;
  } else if (type == "NFD") {
    st.kind = NormStep::Kind::kNfd;
  } else if (type == "NFKC") {
    st.kind = NormStep::Kind::kNfkc;
  } else if (type == "NFKD") {
    st.kind = NormStep::Kind::kNfkd;
  } else if (type == "Lowercase") {
    st.kind = NormStep::Kind::kLowercase;
  } else if (type == "Strip") {
    st.kind = NormStep::Kind::kStrip;
    st.strip_left = Bool(n, "strip_left", true);
    st.strip_right = Bool(n, "strip_right", true);
  } else if (type == "Prepend") {
    st.kind = NormStep::Kind::kPrepend;
    PETAL_ASSIGN_OR_RETURN(st.content, Str(n, "prepend", path));
  } else if (type == "Replace") {
    element pat;
    if (n["pattern"].get(pat))
      return InvalidArgument("tokenizer.json: " + path + ".pattern missing");
    PETAL_ASSIGN_OR_RETURN(st.content, Str(n, "content", path));
    std::string_view s;
    if (!pat["String"].get_string().get(s)) {
      st.kind = NormStep::Kind::kReplace;
      st.pattern = std::string(s);
    } else if (!pat["Regex"].get_string().get(s)) {
      // Only "<c>{N,}" (a run of one ASCII character), as SentencePiece converters emit.
      size_t brace = s.find('{');
      if (s.size() >= 5 && brace == 1 && s.back() == '}' && s[s.size() - 2] == ',' &&
          static_cast<unsigned char>(s[0]) < 0x80 &&
          std::isdigit(static_cast<unsigned char>(s[2]))) {
        st.kind = NormStep::Kind::kCollapse;
        st.ch = s[0];
        st.min_run = std::stoi(std::string(s.substr(2, s.size() - 4)));
      } else {
        return Unsupported(path + ".pattern.Regex", s);
      }
    } else {
      return InvalidArgument("tokenizer.json: " + path + ".pattern needs String or Regex");
    }
  } else if (type == "Precompiled") {
    std::string_view b64;
    if (n["precompiled_charsmap"].get_string().get(b64)) return Status::Ok();  // null: no-op.
    std::string blob;
    if (!tok::Base64Decode(b64, &blob))
      return DataLoss("tokenizer.json: " + path + ".precompiled_charsmap is not base64");
    auto cm = tok::PrecompiledCharsmap::Parse(std::move(blob));
    if (!cm.ok()) return cm.status().WithContext(path);
    st.kind = NormStep::Kind::kPrecompiled;
    st.charsmap = *cm;
  } else {
    return Unsupported(path + ".type", type);
  }
  steps->push_back(std::move(st));
  return Status::Ok();
}

Status ParsePreTokenizer(element p, const std::string& path, std::vector<PreTokStep>* steps) {
  PETAL_ASSIGN_OR_RETURN(std::string type, Str(p, "type", path));
  PreTokStep st;
  if (type == "Sequence") {
    simdjson::dom::array arr;
    if (p["pretokenizers"].get_array().get(arr))
      return InvalidArgument("tokenizer.json: " + path + ".pretokenizers must be an array");
    int k = 0;
    for (element c : arr) {
      PETAL_RETURN_IF_ERROR(
          ParsePreTokenizer(c, path + ".pretokenizers[" + std::to_string(k++) + "]", steps));
    }
    return Status::Ok();
  } else if (type == "BertPreTokenizer") {
    st.kind = PreTokStep::Kind::kBert;
  } else if (type == "WhitespaceSplit") {
    st.kind = PreTokStep::Kind::kWhitespaceSplit;
  } else if (type == "Split") {
    std::string_view re;
    if (p["pattern"]["Regex"].get_string().get(re) || re != kQwenPattern) {
      return Unsupported(path + ".pattern", re.empty() ? "(not the Qwen2 regex)" : re);
    }
    PETAL_ASSIGN_OR_RETURN(std::string behavior, Str(p, "behavior", path));
    if (behavior != "Isolated") return Unsupported(path + ".behavior", behavior);
    if (Bool(p, "invert", false)) return Unsupported(path + ".invert", "true");
    st.kind = PreTokStep::Kind::kQwenSplit;
  } else if (type == "ByteLevel") {
    st.kind = PreTokStep::Kind::kByteLevel;
    st.use_regex = Bool(p, "use_regex", true);
    st.add_prefix_space = Bool(p, "add_prefix_space", false);
  } else if (type == "Metaspace") {
    st.kind = PreTokStep::Kind::kMetaspace;
    PETAL_ASSIGN_OR_RETURN(st.replacement, Str(p, "replacement", path));
    st.split = Bool(p, "split", true);
    std::string_view scheme;
    if (!p["prepend_scheme"].get_string().get(scheme)) {
      if (scheme == "always")
        st.prepend = PreTokStep::Prepend::kAlways;
      else if (scheme == "first")
        st.prepend = PreTokStep::Prepend::kFirst;
      else if (scheme == "never")
        st.prepend = PreTokStep::Prepend::kNever;
      else
        return Unsupported(path + ".prepend_scheme", scheme);
    } else {
      // Older files: add_prefix_space (default true) instead of prepend_scheme.
      st.prepend = Bool(p, "add_prefix_space", true) ? PreTokStep::Prepend::kAlways
                                                     : PreTokStep::Prepend::kNever;
    }
  } else {
    return Unsupported(path + ".type", type);
  }
  steps->push_back(std::move(st));
  return Status::Ok();
}

// Special token given as ["<s>", 0] (BertProcessing / RobertaProcessing).
StatusOr<int32_t> PairId(element p, std::string_view key, const std::string& path) {
  simdjson::dom::array arr;
  int64_t id;
  if (p[key].get_array().get(arr) || arr.size() != 2 || arr.at(1).get_int64().get(id)) {
    return InvalidArgument("tokenizer.json: " + path + "." + std::string(key) +
                           " must be [token, id]");
  }
  return static_cast<int32_t>(id);
}

StatusOr<std::vector<tok::PostProcessor::Item>> ParseTemplate(element p, std::string_view key,
                                                              const std::string& path) {
  std::vector<tok::PostProcessor::Item> items;
  simdjson::dom::array arr;
  if (p[key].get_array().get(arr))
    return InvalidArgument("tokenizer.json: " + path + "." + std::string(key) +
                           " must be an array");
  for (element it : arr) {
    tok::PostProcessor::Item item;
    element seq, sp;
    if (!it["Sequence"].get(seq)) {
      PETAL_ASSIGN_OR_RETURN(std::string id, Str(seq, "id", path + "." + std::string(key)));
      item.sequence = id == "A" ? 0 : 1;
      int64_t type = 0;
      if (!seq["type_id"].get_int64().get(type)) item.type_id = static_cast<int>(type);
    } else if (!it["SpecialToken"].get(sp)) {
      int64_t type = 0;
      if (!sp["type_id"].get_int64().get(type)) item.type_id = static_cast<int>(type);
      PETAL_ASSIGN_OR_RETURN(std::string name, Str(sp, "id", path + "." + std::string(key)));
      simdjson::dom::array ids;
      if (p["special_tokens"][name]["ids"].get_array().get(ids)) {
        return InvalidArgument("tokenizer.json: " + path + ".special_tokens lacks '" + name + "'");
      }
      for (element v : ids) item.ids.push_back(static_cast<int32_t>(Num(v)));
    } else {
      return InvalidArgument("tokenizer.json: " + path + "." + std::string(key) +
                             " has an unknown item");
    }
    items.push_back(std::move(item));
  }
  return items;
}

Status ParsePostProcessor(element p, const std::string& path, tok::PostProcessor* out) {
  PETAL_ASSIGN_OR_RETURN(std::string type, Str(p, "type", path));
  using Item = tok::PostProcessor::Item;
  if (type == "ByteLevel") return Status::Ok();
  if (type == "Sequence") {
    simdjson::dom::array arr;
    if (p["processors"].get_array().get(arr))
      return InvalidArgument("tokenizer.json: " + path + ".processors must be an array");
    int k = 0, real = 0;
    for (element c : arr) {
      tok::PostProcessor one;
      PETAL_RETURN_IF_ERROR(
          ParsePostProcessor(c, path + ".processors[" + std::to_string(k++) + "]", &one));
      if (!one.identity()) {
        if (++real > 1) return Unsupported(path + ".processors", "more than one template");
        *out = std::move(one);
      }
    }
    return Status::Ok();
  }
  if (type == "TemplateProcessing") {
    PETAL_ASSIGN_OR_RETURN(auto single, ParseTemplate(p, "single", path));
    PETAL_ASSIGN_OR_RETURN(auto pair, ParseTemplate(p, "pair", path));
    *out = tok::PostProcessor(std::move(single), std::move(pair));
    return Status::Ok();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    PETAL_ASSIGN_OR_RETURN(int32_t cls, PairId(p, "cls", path));
    PETAL_ASSIGN_OR_RETURN(int32_t sep, PairId(p, "sep", path));
    // Token types: BERT's second segment is type 1; RoBERTa has no token types (all 0).
    const int second = type == "RobertaProcessing" ? 0 : 1;
    std::vector<Item> single = {Item{-1, {cls}}, Item{0, {}}, Item{-1, {sep}}};
    std::vector<Item> pair = single;
    if (type == "RobertaProcessing") pair.push_back(Item{-1, {sep}});
    pair.push_back(Item{1, {}, second});
    pair.push_back(Item{-1, {sep}, second});
    *out = tok::PostProcessor(std::move(single), std::move(pair));
    return Status::Ok();
  }
  return Unsupported(path + ".type", type);
}

}  // namespace

StatusOr<std::unique_ptr<tok::Model>> ParseModel(element m, const std::vector<PreTokStep>& pre,
                                                 TokenizerModel* type_out);

StatusOr<std::unique_ptr<TokenizerImpl>> LoadTokenizerJson(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  element root;
  if (auto err = parser.parse(padded).get(root)) {
    return InvalidArgument(std::string("tokenizer.json: not valid JSON: ") +
                           simdjson::error_message(err));
  }
  auto impl = std::make_unique<TokenizerImpl>();
  std::vector<NormStep> norm_steps;
  element n;
  if (!root["normalizer"].get(n) && !n.is_null()) {
    PETAL_RETURN_IF_ERROR(ParseNormalizer(n, "normalizer", &norm_steps));
  }
  impl->normalizer = tok::Normalizer(std::move(norm_steps));
  std::vector<PreTokStep> pre_steps;
  if (!root["pre_tokenizer"].get(n) && !n.is_null()) {
    PETAL_RETURN_IF_ERROR(ParsePreTokenizer(n, "pre_tokenizer", &pre_steps));
  }
  element model;
  if (root["model"].get(model) || model.type() != element_type::OBJECT) {
    return InvalidArgument("tokenizer.json: model is missing");
  }
  PETAL_ASSIGN_OR_RETURN(impl->model, ParseModel(model, pre_steps, &impl->type));
  impl->pre_tokenizer = tok::PreTokenizer(std::move(pre_steps));
  if (!root["post_processor"].get(n) && !n.is_null()) {
    PETAL_RETURN_IF_ERROR(ParsePostProcessor(n, "post_processor", &impl->post));
  }
  // Added tokens.
  impl->vocab_size = impl->model->vocab().size();
  simdjson::dom::array added;
  if (!root["added_tokens"].get_array().get(added)) {
    std::vector<tok::AddedToken> raw, norm;
    std::vector<std::string> raw_pat, norm_pat;
    int k = 0;
    for (element a : added) {
      std::string path = "added_tokens[" + std::to_string(k++) + "]";
      tok::AddedToken t;
      PETAL_ASSIGN_OR_RETURN(t.content, Str(a, "content", path));
      PETAL_ASSIGN_OR_RETURN(int64_t id, Int(a, "id", path));
      t.id = static_cast<int32_t>(id);
      t.special = Bool(a, "special", false);
      t.normalized = Bool(a, "normalized", !t.special);
      t.lstrip = Bool(a, "lstrip", false);
      t.rstrip = Bool(a, "rstrip", false);
      t.single_word = Bool(a, "single_word", false);
      if (t.content.empty()) continue;
      impl->added_ids.Insert(t.content, t.id);
      impl->vocab_size = std::max(impl->vocab_size, t.id + 1);
      impl->added.push_back(t);
      if (t.normalized) {
        std::string normalized;
        tok::NormScratch ns;
        impl->normalizer.Normalize(t.content, &normalized, &ns);
        norm_pat.push_back(normalized);
        norm.push_back(std::move(t));
      } else {
        raw_pat.push_back(t.content);
        raw.push_back(std::move(t));
      }
    }
    impl->raw_matcher = tok::AddedTokenMatcher(std::move(raw), std::move(raw_pat));
    impl->norm_matcher = tok::AddedTokenMatcher(std::move(norm), std::move(norm_pat));
  }
  return impl;
}

}  // namespace petal
