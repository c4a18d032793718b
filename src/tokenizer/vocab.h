// Token vocabulary: id <-> string, with an open-addressing hash table for string lookups that
// takes std::string_view keys (no temporary strings on the encode path).
//
// Thread-safety: built once at load, then read-only; lookups may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace petal::tok {

// Maps byte strings to int32 ids. Keys live in one arena; the table holds hashes and offsets.
class StringIdMap {
 public:
  // Inserts or overwrites `key`.
  void Insert(std::string_view key, int32_t id);
  // Id of `key`, or -1.
  int32_t Find(std::string_view key) const {
    if (slots_.empty()) return -1;
    uint64_t h = Hash(key);
    uint32_t tag = static_cast<uint32_t>(h >> 32) | 1;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.tag == 0) return -1;
      if (s.tag == tag && s.len == key.size() &&
          std::string_view(arena_.data() + s.off, s.len) == key) {
        return s.id;
      }
    }
  }
  size_t size() const { return count_; }

  static uint64_t Hash(std::string_view key);

 private:
  struct Slot {
    uint32_t tag = 0;  // 0 = empty.
    int32_t id = -1;
    uint32_t off = 0;
    uint32_t len = 0;
  };
  void Grow();
  std::vector<Slot> slots_;
  std::string arena_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// A model's vocabulary: dense ids 0..size-1 (gaps allowed, empty strings).
class Vocab {
 public:
  // Adds `token` with `id`; a later Add with the same token string wins the string->id lookup.
  void Add(std::string_view token, int32_t id);
  int32_t Find(std::string_view token) const { return map_.Find(token); }
  std::string_view Token(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < tokens_.size() ? std::string_view(tokens_[id])
                                                               : std::string_view();
  }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }

 private:
  std::vector<std::string> tokens_;
  StringIdMap map_;
};

}  // namespace petal::tok
