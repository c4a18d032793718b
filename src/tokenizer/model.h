// The tokenization model interface (WordPiece, byte-level BPE, Unigram) and the per-thread
// scratch the models reuse so that steady-state encoding does not allocate.
//
// Thread-safety: models are immutable after load; Tokenize() is const and may run concurrently,
// each caller passing its own ModelScratch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace petal::tok {

// A direct-mapped cache of short words' ids, owned by one scratch (so no locking) and tagged
// with the model that filled it (a scratch may serve several tokenizers).
struct WordCache {
  static constexpr size_t kSlots = 4096;
  static constexpr size_t kMaxWord = 22;
  static constexpr size_t kMaxIds = 8;
  struct Slot {
    uint64_t hash = 0;
    uint8_t word_len = 0xFF;  // 0xFF = empty.
    uint8_t n_ids = 0;
    char word[kMaxWord];
    int32_t ids[kMaxIds];
  };
  uint64_t owner = 0;
  std::vector<Slot> slots;
};

struct ModelScratch {
  WordCache cache;
  // BPE: symbol list and merge queue.
  std::vector<int32_t> sym_id, sym_prev, sym_next;
  std::vector<uint64_t> heap;
  // Unigram: Viterbi lattice.
  std::vector<double> best_score;
  std::vector<int32_t> best_id, best_start;
  std::vector<int32_t> rev;
  std::string str;
};

class Model {
 public:
  Model();
  virtual ~Model() = default;
  // As Tokenize, through the scratch's cache for short words: natural text repeats words
  // constantly, and the model's search is the expensive part of encoding.
  void TokenizeCached(std::string_view word, ModelScratch* scratch,
                      std::vector<int32_t>* out) const;
  // Appends the ids of one pre-tokenized word to *out.
  virtual void Tokenize(std::string_view word, ModelScratch* scratch,
                        std::vector<int32_t>* out) const = 0;
  const Vocab& vocab() const { return vocab_; }

 protected:
  Vocab vocab_;

 private:
  uint64_t id_;  // Tags this model's entries in a scratch's WordCache.
};

}  // namespace petal::tok
