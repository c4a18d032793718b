// WordPiece model (see wordpiece.h).
#include "tokenizer/wordpiece.h"

#include "tokenizer/unicode.h"

namespace petal::tok {

StatusOr<std::unique_ptr<WordPieceModel>> WordPieceModel::Create(
    const std::vector<std::pair<std::string, int32_t>>& vocab, const std::string& unk_token,
    const std::string& prefix, int max_input_chars_per_word) {
  auto m = std::unique_ptr<WordPieceModel>(new WordPieceModel());
  for (const auto& [tok, id] : vocab) {
    m->vocab_.Add(tok, id);
    // Continuation lookups strip the prefix once here instead of prepending it per lookup.
    if (!prefix.empty() && tok.size() >= prefix.size() &&
        tok.compare(0, prefix.size(), prefix) == 0) {
      m->continuation_.Insert(std::string_view(tok).substr(prefix.size()), id);
    }
  }
  if (prefix.empty()) {
    for (const auto& [tok, id] : vocab) m->continuation_.Insert(tok, id);
  }
  m->unk_id_ = m->vocab_.Find(unk_token);
  if (m->unk_id_ < 0) {
    return InvalidArgument("model.unk_token '" + unk_token + "' is not in model.vocab");
  }
  m->max_chars_ = max_input_chars_per_word;
  return m;
}

void WordPieceModel::Tokenize(std::string_view word, ModelScratch*,
                              std::vector<int32_t>* out) const {
  // Count code points (continuation bytes do not start one) up to the limit.
  size_t chars = 0;
  for (unsigned char b : word) chars += (b & 0xC0) != 0x80;
  if (chars > static_cast<size_t>(max_chars_)) {
    out->push_back(unk_id_);
    return;
  }
  const size_t mark = out->size();
  size_t start = 0;
  while (start < word.size()) {
    size_t end = word.size();
    int32_t id = -1;
    while (end > start) {
      std::string_view sub = word.substr(start, end - start);
      id = start == 0 ? vocab_.Find(sub) : continuation_.Find(sub);
      if (id >= 0) break;
      // Step back one code point.
      --end;
      while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
    }
    if (id < 0) {  // Some part has no piece: the whole word is unknown.
      out->resize(mark);
      out->push_back(unk_id_);
      return;
    }
    out->push_back(id);
    start = end;
  }
}

}  // namespace petal::tok
