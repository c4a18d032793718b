// Byte-level BPE model (see bpe.h).
#include "tokenizer/bpe.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace petal::tok {

const std::array<std::string, 256>& ByteToUnicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      AppendUtf8(cp, &t[b]);
    }
    return t;
  }();
  return table;
}

StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(
    const std::vector<std::pair<std::string, int32_t>>& vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges) {
  auto m = std::unique_ptr<BpeModel>(new BpeModel());
  for (const auto& [tok, id] : vocab) m->vocab_.Add(tok, id);
  const auto& b2u = ByteToUnicode();
  for (int b = 0; b < 256; ++b) {
    m->byte_id_[b] = m->vocab_.Find(b2u[b]);
    if (m->byte_id_[b] < 0) {
      return InvalidArgument("model.vocab lacks the byte-level symbol for byte " +
                             std::to_string(b) + " (not a byte-level BPE vocabulary)");
    }
  }
  size_t cap = 1024;
  while (cap < merges.size() * 2) cap *= 2;
  m->merges_.assign(cap, MergeSlot{});
  m->merge_mask_ = cap - 1;
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    int32_t ia = m->vocab_.Find(a), ib = m->vocab_.Find(b);
    joined = a + b;
    int32_t ij = m->vocab_.Find(joined);
    if (ia < 0 || ib < 0 || ij < 0) {
      return InvalidArgument("model.merges[" + std::to_string(r) + "] '" + a + " " + b +
                             "' uses a token missing from model.vocab");
    }
    uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(ia)) << 32) | static_cast<uint32_t>(ib);
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    size_t i = (h >> 20) & m->merge_mask_;
    while (m->merges_[i].key != ~0ULL && m->merges_[i].key != key) i = (i + 1) & m->merge_mask_;
    // A repeated pair keeps the later rank, as a map built from the list in order would.
    m->merges_[i] = MergeSlot{key, static_cast<int32_t>(r), ij};
  }
  m->ignore_merges_ = ignore_merges;
  return m;
}

void BpeModel::Tokenize(std::string_view word, ModelScratch* s, std::vector<int32_t>* out) const {
  const size_t n = word.size();
  if (n == 0) return;
  if (n == 1) {
    out->push_back(byte_id_[static_cast<unsigned char>(word[0])]);
    return;
  }
  Merge(word, s, out);
}

void BpeModel::Merge(std::string_view word, ModelScratch* s, std::vector<int32_t>* out) const {
  const size_t n = word.size();
  if (ignore_merges_) {
    std::string& mapped = s->str;
    mapped.clear();
    const auto& b2u = ByteToUnicode();
    for (unsigned char b : word) mapped += b2u[b];
    int32_t id = vocab_.Find(mapped);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  auto& id = s->sym_id;
  auto& prev = s->sym_prev;
  auto& next = s->sym_next;
  id.resize(n);
  prev.resize(n);
  next.resize(n);
  for (size_t i = 0; i < n; ++i) {
    id[i] = byte_id_[static_cast<unsigned char>(word[i])];
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  // Queue entries pack (rank, position) so that the smallest value is the lowest rank, then the
  // leftmost position; entries whose pair changed since they were queued are skipped when popped.
  auto& heap = s->heap;
  heap.clear();
  auto pack = [](int32_t rank, int32_t pos) {
    return (static_cast<uint64_t>(rank) << 32) | static_cast<uint32_t>(pos);
  };
  auto push = [&](int32_t pos) {
    int32_t nx = next[pos];
    if (nx < 0) return;
    if (const MergeSlot* m = FindMerge(id[pos], id[nx])) {
      heap.push_back(pack(m->rank, pos));
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    uint64_t top = heap.back();
    heap.pop_back();
    int32_t rank = static_cast<int32_t>(top >> 32);
    int32_t pos = static_cast<int32_t>(top & 0xFFFFFFFF);
    if (id[pos] < 0) continue;  // Merged into its left neighbour.
    int32_t nx = next[pos];
    if (nx < 0) continue;
    const MergeSlot* m = FindMerge(id[pos], id[nx]);
    if (m == nullptr || m->rank != rank) continue;  // Stale entry.
    id[pos] = m->new_id;
    id[nx] = -1;
    next[pos] = next[nx];
    if (next[nx] >= 0) prev[next[nx]] = pos;
    if (prev[pos] >= 0) push(prev[pos]);
    push(pos);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out->push_back(id[i]);
}

}  // namespace petal::tok
