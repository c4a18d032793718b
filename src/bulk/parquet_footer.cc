// Thrift compact protocol, as far as skipping needs it: a field header is one byte (the id's
// delta from the previous field in the high nibble, the type in the low; a zero delta means the
// id follows as a zigzag varint), integers are zigzag varints, binaries a varint length and bytes,
// lists and sets a size/type byte (size 15: a varint follows), maps a varint size and a key/value
// type byte, structs fields up to a zero byte.
#include "bulk/parquet_footer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace petal::bulk {
namespace {

enum Type : uint8_t {
  kStop = 0,
  kTrue = 1,
  kFalse = 2,
  kByte = 3,
  kI16 = 4,
  kI32 = 5,
  kI64 = 6,
  kDouble = 7,
  kBinary = 8,
  kList = 9,
  kSet = 10,
  kMap = 11,
  kStruct = 12,
  kUuid = 13,
};

constexpr int kMaxDepth = 64;  // far deeper than any schema; bounds the recursion on bad input

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  Status Byte(uint8_t* b) {
    if (at_ >= s_.size()) return Bad("ends early");
    *b = static_cast<uint8_t>(s_[at_++]);
    return Status::Ok();
  }
  Status Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = 0;
      PETAL_RETURN_IF_ERROR(Byte(&b));
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return Status::Ok();
    }
    return Bad("has a varint longer than 64 bits");
  }
  Status Zigzag(int64_t* v) {
    uint64_t u = 0;
    PETAL_RETURN_IF_ERROR(Varint(&u));
    *v = static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
    return Status::Ok();
  }
  Status Skip(size_t n) {
    if (n > s_.size() - at_) return Bad("ends early");
    at_ += n;
    return Status::Ok();
  }
  // Skips one value of `type` (as it appears inside a container: a bool is one byte there).
  Status SkipValue(uint8_t type, int depth) {
    if (depth > kMaxDepth) return Bad("nests too deeply");
    int64_t unused = 0;
    switch (type) {
      case kTrue:
      case kFalse:
      case kByte:
        return Skip(1);
      case kI16:
      case kI32:
      case kI64:
        return Zigzag(&unused);
      case kDouble:
        return Skip(8);
      case kUuid:
        return Skip(16);
      case kBinary: {
        uint64_t n = 0;
        PETAL_RETURN_IF_ERROR(Varint(&n));
        return Skip(n);
      }
      case kList:
      case kSet: {
        uint8_t h = 0;
        PETAL_RETURN_IF_ERROR(Byte(&h));
        uint64_t n = h >> 4;
        if (n == 15) PETAL_RETURN_IF_ERROR(Varint(&n));
        return SkipElements(n, h & 0x0f, depth);
      }
      case kMap: {
        uint64_t n = 0;
        PETAL_RETURN_IF_ERROR(Varint(&n));
        if (n == 0) return Status::Ok();
        uint8_t kv = 0;
        PETAL_RETURN_IF_ERROR(Byte(&kv));
        for (uint64_t i = 0; i < n; ++i) {
          PETAL_RETURN_IF_ERROR(SkipValue(kv >> 4, depth + 1));
          PETAL_RETURN_IF_ERROR(SkipValue(kv & 0x0f, depth + 1));
        }
        return Status::Ok();
      }
      case kStruct: {
        for (;;) {
          uint8_t h = 0;
          PETAL_RETURN_IF_ERROR(FieldHeader(&h));
          if (h == kStop) return Status::Ok();
          // A bool field's value is its type: nothing follows.
          if (h != kTrue && h != kFalse) PETAL_RETURN_IF_ERROR(SkipValue(h, depth + 1));
        }
      }
      default:
        return Bad("has an unknown type " + std::to_string(type));
    }
  }
  // Reads a field header; returns its type (kStop at a struct's end) and the id in *id if asked.
  Status FieldHeader(uint8_t* type, int16_t* last_id = nullptr) {
    uint8_t h = 0;
    PETAL_RETURN_IF_ERROR(Byte(&h));
    *type = h & 0x0f;
    if (h == 0) return Status::Ok();
    if ((h >> 4) == 0) {
      int64_t id = 0;
      PETAL_RETURN_IF_ERROR(Zigzag(&id));
      if (last_id) *last_id = static_cast<int16_t>(id);
    } else if (last_id) {
      *last_id = static_cast<int16_t>(*last_id + (h >> 4));
    }
    return Status::Ok();
  }

 private:
  Status SkipElements(uint64_t n, uint8_t type, int depth) {
    if (n > s_.size() - at_) return Bad("has a list longer than itself");  // >= 1 byte each
    for (uint64_t i = 0; i < n; ++i) PETAL_RETURN_IF_ERROR(SkipValue(type, depth + 1));
    return Status::Ok();
  }
  static Status Bad(const std::string& what) {
    return InvalidArgument("the Parquet footer " + what);
  }
  std::string_view s_;
  size_t at_ = 0;
};

}  // namespace

StatusOr<int64_t> FooterRowCount(std::string_view footer) {
  Reader r(footer);
  int16_t id = 0;
  for (;;) {
    uint8_t type = 0;
    PETAL_RETURN_IF_ERROR(r.FieldHeader(&type, &id));
    if (type == kStop) return InvalidArgument("the Parquet footer has no num_rows");
    if (id == 3 && type == kI64) {
      int64_t rows = 0;
      PETAL_RETURN_IF_ERROR(r.Zigzag(&rows));
      if (rows < 0) return InvalidArgument("the Parquet footer has num_rows < 0");
      return rows;
    }
    if (type != kTrue && type != kFalse) PETAL_RETURN_IF_ERROR(r.SkipValue(type, 0));
  }
}

StatusOr<int64_t> ParquetRowCount(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return NotFound(path + ": " + std::strerror(errno));
  struct Closer {
    std::FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  char head[4], tail[8];
  if (std::fread(head, 1, 4, f) != 4 || std::fseek(f, -8, SEEK_END) != 0 ||
      std::fread(tail, 1, 8, f) != 8) {
    return InvalidArgument(path + ": not a Parquet file (too short)");
  }
  if (std::memcmp(tail + 4, "PARE", 4) == 0) {
    return InvalidArgument(path + ": the Parquet footer is encrypted (not supported)");
  }
  if (std::memcmp(head, "PAR1", 4) != 0 || std::memcmp(tail + 4, "PAR1", 4) != 0) {
    return InvalidArgument(path + ": not a Parquet file (no PAR1 magic)");
  }
  uint32_t len;
  std::memcpy(&len, tail, 4);  // little-endian, as on every machine Petal builds for
  const long end = std::ftell(f);
  if (len == 0 || static_cast<long>(len) > end - 12) {
    return InvalidArgument(path + ": the Parquet footer length is out of range");
  }
  std::vector<char> footer(len);
  if (std::fseek(f, -8 - static_cast<long>(len), SEEK_END) != 0 ||
      std::fread(footer.data(), 1, len, f) != len) {
    return InvalidArgument(path + ": cannot read the Parquet footer");
  }
  auto rows = FooterRowCount(std::string_view(footer.data(), footer.size()));
  if (!rows.ok()) return InvalidArgument(path + ": " + rows.status().message());
  return rows;
}

}  // namespace petal::bulk
