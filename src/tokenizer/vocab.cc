// StringIdMap and Vocab (see vocab.h).
#include "tokenizer/vocab.h"

#include <cstring>

namespace petal::tok {

uint64_t StringIdMap::Hash(std::string_view key) {
  // 64-bit multiply-mix over 8-byte words: fast for the short keys vocabularies hold.
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ (key.size() * 0xC2B2AE3D27D4EB4FULL);
  size_t i = 0;
  for (; i + 8 <= key.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, key.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
    h ^= h >> 32;
  }
  uint64_t w = 0;
  std::memcpy(&w, key.data() + i, key.size() - i);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 29;
  h *= 0x9E3779B97F4A7C15ULL;
  h ^= h >> 32;
  return h;
}

void StringIdMap::Grow() {
  std::vector<Slot> old = std::move(slots_);
  size_t cap = old.empty() ? 1024 : old.size() * 2;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  for (const Slot& s : old) {
    if (s.tag == 0) continue;
    uint64_t h = Hash(std::string_view(arena_.data() + s.off, s.len));
    size_t i = h & mask_;
    while (slots_[i].tag != 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

void StringIdMap::Insert(std::string_view key, int32_t id) {
  if ((count_ + 1) * 2 > slots_.size()) Grow();
  uint64_t h = Hash(key);
  uint32_t tag = static_cast<uint32_t>(h >> 32) | 1;
  size_t i = h & mask_;
  while (slots_[i].tag != 0) {
    Slot& s = slots_[i];
    if (s.tag == tag && s.len == key.size() &&
        std::string_view(arena_.data() + s.off, s.len) == key) {
      s.id = id;
      return;
    }
    i = (i + 1) & mask_;
  }
  Slot& s = slots_[i];
  s.tag = tag;
  s.id = id;
  s.off = static_cast<uint32_t>(arena_.size());
  s.len = static_cast<uint32_t>(key.size());
  arena_.append(key);
  ++count_;
}

void Vocab::Add(std::string_view token, int32_t id) {
  if (id < 0) return;
  if (static_cast<size_t>(id) >= tokens_.size()) tokens_.resize(id + 1);
  tokens_[id] = std::string(token);
  map_.Insert(token, id);
}

}  // namespace petal::tok
