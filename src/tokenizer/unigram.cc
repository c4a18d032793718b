// Unigram model (see unigram.h).
#include "tokenizer/unigram.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace petal::tok {

void UnigramModel::AddEdge(int32_t node, unsigned char b, int32_t child) {
  uint64_t key = (static_cast<uint64_t>(node) << 8) | b;
  uint64_t h = key * 0x9E3779B97F4A7C15ULL;
  size_t i = (h >> 24) & edge_mask_;
  while (edges_[i].key != ~0ULL) i = (i + 1) & edge_mask_;
  edges_[i] = Edge{key, child};
}

StatusOr<std::unique_ptr<UnigramModel>> UnigramModel::Create(
    const std::vector<std::pair<std::string, double>>& pieces, int32_t unk_id) {
  if (pieces.empty()) return InvalidArgument("model.vocab is empty");
  if (unk_id < 0 || static_cast<size_t>(unk_id) >= pieces.size()) {
    return InvalidArgument("model.unk_id " + std::to_string(unk_id) + " is outside model.vocab");
  }
  auto m = std::unique_ptr<UnigramModel>(new UnigramModel());
  size_t total_bytes = 0;
  for (const auto& p : pieces) total_bytes += p.first.size();
  size_t cap = 1024;
  while (cap < (total_bytes + 1) * 2) cap *= 2;
  m->edges_.assign(cap, Edge{});
  m->edge_mask_ = cap - 1;
  m->node_id_.push_back(-1);  // Root.
  double min_score = pieces[0].second;
  for (size_t id = 0; id < pieces.size(); ++id) {
    const auto& [tok, score] = pieces[id];
    m->vocab_.Add(tok, static_cast<int32_t>(id));
    m->scores_.push_back(score);
    min_score = std::min(min_score, score);
    if (tok.empty()) continue;
    int32_t node = 0;
    for (unsigned char b : tok) {
      int32_t c = m->Child(node, b);
      if (c < 0) {
        c = static_cast<int32_t>(m->node_id_.size());
        m->node_id_.push_back(-1);
        m->AddEdge(node, b, c);
      }
      node = c;
    }
    m->node_id_[node] = static_cast<int32_t>(id);  // A repeated piece keeps its last id.
  }
  m->unk_id_ = unk_id;
  m->unk_score_ = min_score - 10.0;
  return m;
}

void UnigramModel::Tokenize(std::string_view word, ModelScratch* s,
                            std::vector<int32_t>* out) const {
  const size_t n = word.size();
  if (n == 0) return;
  // best_*[k]: the best path covering word[0, k): its score, last token id and that token's start.
  auto& best = s->best_score;
  auto& bid = s->best_id;
  auto& bstart = s->best_start;
  best.assign(n + 1, 0.0);
  bid.assign(n + 1, -1);
  bstart.assign(n + 1, -1);
  bstart[0] = 0;
  size_t pos = 0;
  while (pos < n) {
    const size_t char_len = Utf8SeqLen(static_cast<unsigned char>(word[pos]));
    if (bstart[pos] >= 0 || pos == 0) {
      const double base = best[pos];
      bool single = false;
      int32_t node = 0;
      for (size_t k = pos; k < n; ++k) {
        node = Child(node, static_cast<unsigned char>(word[k]));
        if (node < 0) break;
        int32_t id = node_id_[node];
        if (id < 0) continue;
        size_t end = k + 1;
        double cand = base + scores_[id];
        if (bstart[end] < 0 || cand > best[end]) {
          best[end] = cand;
          bid[end] = id;
          bstart[end] = static_cast<int32_t>(pos);
        }
        if (end - pos == char_len) single = true;
      }
      if (!single) {
        size_t end = pos + char_len;
        double cand = base + unk_score_;
        if (bstart[end] < 0 || cand > best[end]) {
          best[end] = cand;
          bid[end] = unk_id_;
          bstart[end] = static_cast<int32_t>(pos);
        }
      }
    }
    pos += char_len;
  }
  // Backtrack, then emit left to right, fusing runs of unk into one.
  auto& rev = s->rev;
  rev.clear();
  for (size_t end = n; end > 0; end = static_cast<size_t>(bstart[end])) rev.push_back(bid[end]);
  bool prev_unk = false;
  for (auto it = rev.rbegin(); it != rev.rend(); ++it) {
    bool unk = *it == unk_id_;
    if (unk && prev_unk) continue;
    out->push_back(*it);
    prev_unk = unk;
  }
}

}  // namespace petal::tok
