// Text normalizers of a Hugging Face tokenizer.json: BertNormalizer, NFC/NFD/NFKC/NFKD,
// Lowercase, Replace, Strip, Prepend, Precompiled (SentencePiece charsmap), and Sequence.
//
// A Normalizer is built once at load time and then only read. Thread-safety: Normalize() is const
// and may run concurrently; each caller passes its own NormScratch.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/precompiled_charsmap.h"

namespace petal::tok {

// Caller-owned buffers reused across calls so that steady-state normalisation does not allocate.
struct NormScratch {
  std::string tmp;
  std::vector<int32_t> codepoints;
};

struct NormStep {
  enum class Kind {
    kBert,
    kNfc,
    kNfd,
    kNfkc,
    kNfkd,
    kLowercase,
    kReplace,
    kCollapse,
    kStrip,
    kPrepend,
    kPrecompiled
  };
  Kind kind = Kind::kNfc;
  // kBert.
  bool clean_text = true, handle_chinese_chars = true, strip_accents = false, lowercase = true;
  // kReplace: literal `pattern` -> `content`. kCollapse: runs of >= min_run `ch` -> `content`.
  std::string pattern, content;
  char ch = ' ';
  int min_run = 2;
  // kStrip.
  bool strip_left = false, strip_right = false;
  // kPrecompiled.
  std::shared_ptr<const PrecompiledCharsmap> charsmap;
};

class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(std::vector<NormStep> steps) : steps_(std::move(steps)) {}

  // True if there is nothing to do (Normalize copies its input).
  bool empty() const { return steps_.empty(); }
  // Writes the normalised form of `in` to *out (cleared first).
  void Normalize(std::string_view in, std::string* out, NormScratch* scratch) const;

 private:
  std::vector<NormStep> steps_;
};

// Unicode normal form `kind` (kNfc..kNfkd) of `in`, appended to *out.
void UnicodeNormalize(std::string_view in, NormStep::Kind kind, std::string* out,
                      std::vector<int32_t>* buf);

}  // namespace petal::tok
