// Ranking-model inputs (see rank_input.h).
#include "tokenizer/rank_input.h"

namespace petal {

const char* const kQwen3RerankerDefaultInstruction =
    "Given a web search query, retrieve relevant passages that answer the query";
const char* const kQwen3RerankerPrefix =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
    "the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n";
const char* const kQwen3RerankerSuffix =
    "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";

namespace {

Status TooLong(size_t n, int max_length) {
  return Status(StatusCode::kOutOfRange, "the pair has " + std::to_string(n) +
                                             " tokens, more than the model's " +
                                             std::to_string(max_length));
}

}  // namespace

StatusOr<PairEncoding> EncodeRankPair(const Tokenizer& tok, std::string_view query,
                                      std::string_view document, const RankInputOptions& opts,
                                      EncodeScratch* scratch) {
  if (opts.templ == RankTemplate::kPair) {
    EncodeOptions eo;
    eo.add_special_tokens = true;
    if (!opts.truncate) {
      PETAL_ASSIGN_OR_RETURN(PairEncoding e,
                             tok.EncodePairTyped(query, document, eo, opts.strategy, scratch));
      if (opts.max_length > 0 && e.ids.size() > static_cast<size_t>(opts.max_length)) {
        return TooLong(e.ids.size(), opts.max_length);
      }
      return e;
    }
    eo.max_length = opts.max_length;
    return tok.EncodePairTyped(query, document, eo, opts.strategy, scratch);
  }
  // Qwen3-Reranker: prefix + middle + suffix, each tokenized alone (no special tokens added:
  // the prompt spells its own).
  EncodeOptions plain;
  plain.add_special_tokens = false;
  PETAL_ASSIGN_OR_RETURN(std::vector<int32_t> prefix, tok.Encode(kQwen3RerankerPrefix, plain));
  PETAL_ASSIGN_OR_RETURN(std::vector<int32_t> suffix, tok.Encode(kQwen3RerankerSuffix, plain));
  std::string middle = "<Instruct>: ";
  middle += opts.instruction.empty() ? kQwen3RerankerDefaultInstruction : opts.instruction;
  middle += "\n<Query>: ";
  middle += query;
  middle += "\n<Document>: ";
  middle += document;
  std::vector<int32_t> ids;
  if (scratch) {
    PETAL_RETURN_IF_ERROR(tok.EncodeInto(middle, plain, scratch, &ids));
  } else {
    PETAL_ASSIGN_OR_RETURN(ids, tok.Encode(middle, plain));
  }
  PairEncoding out;
  const size_t fixed = prefix.size() + suffix.size();
  if (opts.max_length > 0 && ids.size() + fixed > static_cast<size_t>(opts.max_length)) {
    if (!opts.truncate) return TooLong(ids.size() + fixed, opts.max_length);
    if (fixed >= static_cast<size_t>(opts.max_length)) {
      return InvalidArgument("max_length " + std::to_string(opts.max_length) +
                             " leaves no room inside the reranker prompt");
    }
    ids.resize(opts.max_length - fixed);
    out.truncated = true;
  }
  out.ids = std::move(prefix);
  out.ids.insert(out.ids.end(), ids.begin(), ids.end());
  out.ids.insert(out.ids.end(), suffix.begin(), suffix.end());
  out.type_ids.assign(out.ids.size(), 0);
  return out;
}

}  // namespace petal
