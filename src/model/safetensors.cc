// safetensors files mapped read-only and parsed (header checked against the file), and the
// WeightStore over a model folder's files (see safetensors.h).
#include "model/safetensors.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/file_util.h"

namespace petal {

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return NotFound("cannot open safetensors file " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return DataLoss("cannot stat " + path);
  }
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_size_ = static_cast<size_t>(st.st_size);
  if (f->map_size_ > 0) {
    void* m = ::mmap(nullptr, f->map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return DataLoss("cannot mmap " + path);
    }
    f->map_ = m;
  }
  ::close(fd);
  Status s = f->Parse(static_cast<const uint8_t*>(f->map_), f->map_size_);
  if (!s.ok()) return s.WithContext(path);
  return f;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBytes(std::string bytes,
                                                                      const std::string& label) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = label;
  f->owned_ = std::move(bytes);
  Status s = f->Parse(reinterpret_cast<const uint8_t*>(f->owned_.data()), f->owned_.size());
  if (!s.ok()) return s.WithContext(label);
  return f;
}

Status SafetensorsFile::Parse(const uint8_t* base, size_t size) {
  if (size < 8)
    return DataLoss("file is " + std::to_string(size) + " bytes, too short for a header");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
  if (header_len > size - 8) {
    return DataLoss("header length " + std::to_string(header_len) + " exceeds file size " +
                    std::to_string(size));
  }
  if (header_len > (100u << 20)) return DataLoss("header larger than 100 MB");
  const size_t data_start = 8 + header_len;
  const size_t data_size = size - data_start;

  simdjson::dom::parser parser;
  simdjson::padded_string json(reinterpret_cast<const char*>(base + 8), header_len);
  simdjson::dom::element root;
  if (parser.parse(json).get(root) != simdjson::SUCCESS)
    return DataLoss("header is not valid JSON");
  simdjson::dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS)
    return DataLoss("header is not a JSON object");

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto field : obj) {
    std::string name(field.key);
    if (name == "__metadata__") {
      simdjson::dom::object meta;
      if (field.value.get_object().get(meta) != simdjson::SUCCESS) {
        return DataLoss("__metadata__ is not an object");
      }
      for (auto m : meta) {
        std::string_view v;
        if (m.value.get_string().get(v) != simdjson::SUCCESS) {
          return DataLoss("__metadata__." + std::string(m.key) + " is not a string");
        }
        metadata_[std::string(m.key)] = std::string(v);
      }
      continue;
    }
    auto bad = [&](const std::string& what) { return DataLoss("tensor '" + name + "': " + what); };
    simdjson::dom::object t;
    if (field.value.get_object().get(t) != simdjson::SUCCESS) return bad("entry is not an object");
    std::string_view dtype_s;
    if (t["dtype"].get_string().get(dtype_s) != simdjson::SUCCESS) return bad("missing dtype");
    TensorView v;
    v.name = name;
    // Integer and boolean tensors hold no weights (BERT checkpoints carry an int64
    // embeddings.position_ids buffer): they are validated like the others but not exposed.
    size_t int_size = 0;
    if (dtype_s == "F32")
      v.dtype = DType::kF32;
    else if (dtype_s == "F16")
      v.dtype = DType::kF16;
    else if (dtype_s == "BF16")
      v.dtype = DType::kBF16;
    else if (dtype_s == "I64" || dtype_s == "U64")
      int_size = 8;
    else if (dtype_s == "I32" || dtype_s == "U32")
      int_size = 4;
    else if (dtype_s == "I16" || dtype_s == "U16")
      int_size = 2;
    else if (dtype_s == "I8" || dtype_s == "U8" || dtype_s == "BOOL")
      int_size = 1;
    else
      return bad("unsupported dtype " + std::string(dtype_s) + " (supported: F32, F16, BF16)");
    const size_t elem_size = int_size ? int_size : DTypeSize(v.dtype);
    simdjson::dom::array shape, offsets;
    if (t["shape"].get_array().get(shape) != simdjson::SUCCESS) return bad("missing shape");
    if (t["data_offsets"].get_array().get(offsets) != simdjson::SUCCESS) {
      return bad("missing data_offsets");
    }
    uint64_t numel = 1;
    for (auto d : shape) {
      int64_t dim;
      if (d.get_int64().get(dim) != simdjson::SUCCESS || dim < 0)
        return bad("shape has a bad dimension");
      if (dim > 0 && numel > (uint64_t{1} << 48) / static_cast<uint64_t>(dim))
        return bad("shape too large");
      numel *= static_cast<uint64_t>(dim);
      v.shape.push_back(dim);
    }
    if (offsets.size() != 2) return bad("data_offsets must have two entries");
    uint64_t begin, end;
    if (offsets.at(0).get_uint64().get(begin) != simdjson::SUCCESS ||
        offsets.at(1).get_uint64().get(end) != simdjson::SUCCESS) {
      return bad("data_offsets are not unsigned integers");
    }
    if (begin > end || end > data_size) {
      return bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 ") are out of bounds of the " + std::to_string(data_size) + "-byte data section");
    }
    if (end - begin != numel * elem_size) {
      return bad("shape " + v.ShapeString() + " of " + std::string(dtype_s) + " needs " +
                 std::to_string(numel * elem_size) + " bytes but data_offsets span " +
                 std::to_string(end - begin));
    }
    v.data = base + data_start + begin;
    v.nbytes = end - begin;
    if (end > begin) ranges.emplace_back(begin, end);
    if (int_size) continue;
    if (!tensors_.emplace(name, std::move(v)).second) return bad("appears twice");
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return DataLoss("two tensors overlap at byte " + std::to_string(ranges[i].first) +
                      " of the data section");
    }
  }
  return Status::Ok();
}

const TensorView* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

StatusOr<std::unique_ptr<WeightStore>> WeightStore::Open(const std::string& dir) {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  const std::string single = JoinPath(dir, "model.safetensors");
  const std::string index = JoinPath(dir, "model.safetensors.index.json");
  if (FileExists(single)) {
    PETAL_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(single));
    files.push_back(std::move(f));
  } else if (FileExists(index)) {
    PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(index));
    simdjson::dom::parser parser;
    simdjson::dom::object weight_map;
    if (parser.parse(text)["weight_map"].get_object().get(weight_map) != simdjson::SUCCESS) {
      return DataLoss(index + ": missing object 'weight_map'");
    }
    std::vector<std::string> shards;
    for (auto kv : weight_map) {
      std::string_view shard;
      if (kv.value.get_string().get(shard) != simdjson::SUCCESS) {
        return DataLoss(index + ": weight_map." + std::string(kv.key) + " is not a string");
      }
      if (std::find(shards.begin(), shards.end(), shard) == shards.end())
        shards.emplace_back(shard);
    }
    for (const auto& s : shards) {
      if (s.find('/') != std::string::npos)
        return DataLoss(index + ": shard name '" + s + "' has a '/'");
      PETAL_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(JoinPath(dir, s)));
      files.push_back(std::move(f));
    }
  } else {
    return NotFound("no model.safetensors or model.safetensors.index.json in " + dir);
  }
  return FromFiles(std::move(files));
}

std::unique_ptr<WeightStore> WeightStore::FromFiles(
    std::vector<std::unique_ptr<SafetensorsFile>> f) {
  auto store = std::unique_ptr<WeightStore>(new WeightStore());
  store->files_ = std::move(f);
  return store;
}

const TensorView* WeightStore::Find(const std::string& name) const {
  for (const auto& f : files_) {
    if (const TensorView* v = f->Find(name)) return v;
  }
  return nullptr;
}

std::vector<std::string> WeightStore::Names() const {
  std::vector<std::string> names;
  for (const auto& f : files_) {
    for (const auto& [n, v] : f->tensors()) names.push_back(n);
  }
  return names;
}

namespace {

StatusOr<const TensorView*> FindShaped(const WeightStore& store, const std::string& name,
                                       const std::vector<int64_t>& expected_shape) {
  const TensorView* v = store.Find(name);
  if (!v) return NotFound("tensor '" + name + "' is missing from the checkpoint");
  if (v->shape != expected_shape) {
    TensorView want;
    want.shape = expected_shape;
    return InvalidArgument("tensor '" + name + "' has shape " + v->ShapeString() + ", expected " +
                           want.ShapeString());
  }
  return v;
}

}  // namespace

Status WeightStore::ReadBf16(const std::string& name, const std::vector<int64_t>& expected_shape,
                             uint16_t* dst, size_t begin, size_t count) const {
  PETAL_ASSIGN_OR_RETURN(const TensorView* v, FindShaped(*this, name, expected_shape));
  const size_t numel = static_cast<size_t>(v->numel());
  if (begin >= numel) return Status::Ok();
  const size_t n = std::min(count, numel - begin);
  const uint8_t* p = v->data + begin * DTypeSize(v->dtype);
  switch (v->dtype) {
    case DType::kBF16:
      std::memcpy(dst, p, 2 * n);
      break;
    case DType::kF32:
      for (size_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        dst[i] = FloatToBFloat16(f);
      }
      break;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = FloatToBFloat16(HalfToFloat(h));
      }
      break;
  }
  return Status::Ok();
}

StatusOr<std::vector<float>> WeightStore::ReadF32(
    const std::string& name, const std::vector<int64_t>& expected_shape) const {
  PETAL_ASSIGN_OR_RETURN(const TensorView* v, FindShaped(*this, name, expected_shape));
  std::vector<float> out(static_cast<size_t>(v->numel()));
  const uint8_t* p = v->data;
  switch (v->dtype) {
    case DType::kF32:
      // An empty tensor has no storage: memcpy with a null pointer is undefined even for 0 bytes
      // (UBSan in the asan preset).
      if (v->nbytes > 0) std::memcpy(out.data(), p, v->nbytes);
      break;
    case DType::kF16:
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = HalfToFloat(h);
      }
      break;
    case DType::kBF16:
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = BFloat16ToFloat(h);
      }
      break;
  }
  return out;
}

StatusOr<std::vector<float>> WeightStore::ReadRowsF32(const std::string& name,
                                                      const std::vector<int64_t>& expected_shape,
                                                      const std::vector<int64_t>& rows) const {
  const TensorView* v = Find(name);
  if (!v) return NotFound("tensor '" + name + "' is missing from the checkpoint");
  if (v->shape != expected_shape || v->shape.size() != 2) {
    TensorView want;
    want.shape = expected_shape;
    return InvalidArgument("tensor '" + name + "' has shape " + v->ShapeString() + ", expected " +
                           want.ShapeString());
  }
  const int64_t cols = v->shape[1];
  const size_t esize = DTypeSize(v->dtype);
  std::vector<float> out(rows.size() * static_cast<size_t>(cols));
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r] < 0 || rows[r] >= v->shape[0]) {
      return InvalidArgument("tensor '" + name + "': row " + std::to_string(rows[r]) +
                             " is outside [0, " + std::to_string(v->shape[0]) + ")");
    }
    const uint8_t* p = v->data + static_cast<size_t>(rows[r]) * cols * esize;
    float* dst = out.data() + r * cols;
    for (int64_t i = 0; i < cols; ++i) {
      uint16_t h = 0;
      switch (v->dtype) {
        case DType::kF32:
          std::memcpy(dst + i, p + 4 * i, 4);
          break;
        case DType::kF16:
          std::memcpy(&h, p + 2 * i, 2);
          dst[i] = HalfToFloat(h);
          break;
        case DType::kBF16:
          std::memcpy(&h, p + 2 * i, 2);
          dst[i] = BFloat16ToFloat(h);
          break;
      }
    }
  }
  return out;
}

}  // namespace petal
