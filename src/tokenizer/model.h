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

struct ModelScratch {
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
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized word to *out.
  virtual void Tokenize(std::string_view word, ModelScratch* scratch,
                        std::vector<int32_t>* out) const = 0;
  const Vocab& vocab() const { return vocab_; }

 protected:
  Vocab vocab_;
};

}  // namespace petal::tok
