// Word cache in front of the models (see model.h).
#include "tokenizer/model.h"

#include <atomic>
#include <cstring>

namespace petal::tok {

Model::Model() {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1);
}

void Model::TokenizeCached(std::string_view word, ModelScratch* s,
                           std::vector<int32_t>* out) const {
  const size_t n = word.size();
  if (n < 2 || n > WordCache::kMaxWord) {
    Tokenize(word, s, out);
    return;
  }
  WordCache& cache = s->cache;
  if (cache.owner != id_) {
    cache.slots.assign(WordCache::kSlots, WordCache::Slot{});
    cache.owner = id_;
  }
  const uint64_t h = StringIdMap::Hash(word);
  WordCache::Slot& slot = cache.slots[h & (WordCache::kSlots - 1)];
  if (slot.hash == h && slot.word_len == n && std::memcmp(slot.word, word.data(), n) == 0) {
    out->insert(out->end(), slot.ids, slot.ids + slot.n_ids);
    return;
  }
  const size_t mark = out->size();
  Tokenize(word, s, out);
  const size_t produced = out->size() - mark;
  if (produced <= WordCache::kMaxIds) {
    slot.hash = h;
    slot.word_len = static_cast<uint8_t>(n);
    slot.n_ids = static_cast<uint8_t>(produced);
    std::memcpy(slot.word, word.data(), n);
    std::memcpy(slot.ids, out->data() + mark, produced * sizeof(int32_t));
  }
}

}  // namespace petal::tok
