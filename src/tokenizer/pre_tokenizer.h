// Pre-tokenizers of a Hugging Face tokenizer.json: BertPreTokenizer, the Qwen2/Qwen3 split
// pattern and GPT-2's ByteLevel pattern (hand-written scanners, no regex engine), ByteLevel,
// Metaspace, WhitespaceSplit, and a Sequence of them. They cut normalised text into words the model
// then encodes one at a time.
//
// Thread-safety: a PreTokenizer is immutable after load; Run() is const and may run concurrently
// with caller-owned Words buffers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace petal::tok {

// A list of words stored back to back in one buffer (no per-word allocation).
struct Words {
  std::string buf;
  std::vector<uint32_t> ends;
  // True if the first word starts at offset 0 of the original piece (Metaspace "first").
  bool first_at_origin = true;

  void clear() {
    buf.clear();
    ends.clear();
    first_at_origin = true;
  }
  size_t size() const { return ends.size(); }
  std::string_view operator[](size_t i) const {
    uint32_t b = i == 0 ? 0 : ends[i - 1];
    return std::string_view(buf).substr(b, ends[i] - b);
  }
  void Add(std::string_view w) {
    if (w.empty()) return;  // tokenizers drops empty splits.
    buf.append(w);
    ends.push_back(static_cast<uint32_t>(buf.size()));
  }
};

struct PreTokStep {
  enum class Kind { kBert, kQwenSplit, kByteLevel, kMetaspace, kWhitespaceSplit };
  Kind kind = Kind::kBert;
  // kByteLevel: prepend a space to each piece that does not start with one; with use_regex,
  // split with the GPT-2 pattern.
  bool add_prefix_space = false;
  bool use_regex = false;
  // kMetaspace.
  std::string replacement = "\xE2\x96\x81";  // U+2581
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<PreTokStep> steps) : steps_(std::move(steps)) {}

  // Splits `text` into *out. `first_piece` says whether `text` starts at offset 0 of the input.
  // `tmp` is scratch.
  void Run(std::string_view text, bool first_piece, Words* out, Words* tmp) const;

 private:
  std::vector<PreTokStep> steps_;
};

// Appends the Qwen2 split pattern's matches over `s` to *out (exposed for tests).
void SplitQwen(std::string_view s, Words* out);
// Appends the GPT-2 ByteLevel pattern's matches over `s` to *out (exposed for tests).
void SplitGpt2(std::string_view s, Words* out);

}  // namespace petal::tok
