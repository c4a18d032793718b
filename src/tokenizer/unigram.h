// Unigram model (SentencePiece, XLM-R / multilingual-e5): the segmentation of a word that
// maximises the sum of piece log-probabilities (Viterbi over a byte trie of the pieces); a
// character no piece covers becomes unk (score = min score - 10) and adjacent unks fuse into one.
//
// Thread-safety: immutable after construction; Tokenize() may run concurrently.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tokenizer/model.h"

namespace petal::tok {

class UnigramModel : public Model {
 public:
  // `pieces[i]` is (token, score) for id i. Fails if unk_id is out of range.
  static StatusOr<std::unique_ptr<UnigramModel>> Create(
      const std::vector<std::pair<std::string, double>>& pieces, int32_t unk_id);

  void Tokenize(std::string_view word, ModelScratch* scratch,
                std::vector<int32_t>* out) const override;

 private:
  // Trie edges: (node << 8 | byte) -> child node; a node's token id (or -1) in node_id_.
  struct Edge {
    uint64_t key = ~0ULL;
    int32_t child = -1;
  };
  int32_t Child(int32_t node, unsigned char b) const {
    uint64_t key = (static_cast<uint64_t>(node) << 8) | b;
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    for (size_t i = (h >> 24) & edge_mask_;; i = (i + 1) & edge_mask_) {
      const Edge& e = edges_[i];
      if (e.key == key) return e.child;
      if (e.key == ~0ULL) return -1;
    }
  }
  void AddEdge(int32_t node, unsigned char b, int32_t child);

  std::vector<Edge> edges_;
  size_t edge_mask_ = 0;
  std::vector<int32_t> node_id_;
  std::vector<double> scores_;
  int32_t unk_id_ = 0;
  double unk_score_ = 0;
};

}  // namespace petal::tok
