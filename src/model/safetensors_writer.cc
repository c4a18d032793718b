#include "model/safetensors_writer.h"

#include <cstdio>
#include <memory>
#include <set>

namespace petal {

std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      header += JsonQuote(k);
      header += ':';
      header += JsonQuote(v);
      first = false;
    }
    header += "}";
  }
  std::set<std::string> seen;
  std::vector<uint64_t> sizes;
  uint64_t offset = 0, max_size = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      return InvalidArgument("safetensors writer: bad tensor name '" + t.name + "'");
    }
    if (!seen.insert(t.name).second) {
      return InvalidArgument("safetensors writer: tensor '" + t.name + "' appears twice");
    }
    if ((t.data == nullptr) == !t.fill) {
      return InvalidArgument("safetensors writer: tensor '" + t.name +
                             "' needs exactly one of data and fill");
    }
    uint64_t numel = 1;
    std::string shape;
    for (int64_t dim : t.shape) {
      if (dim < 0)
        return InvalidArgument("safetensors writer: tensor '" + t.name +
                               "' has a negative dimension");
      numel *= static_cast<uint64_t>(dim);
      if (!shape.empty()) shape += ',';
      shape += std::to_string(dim);
    }
    const uint64_t nbytes = numel * DTypeSize(t.dtype);
    sizes.push_back(nbytes);
    max_size = std::max(max_size, nbytes);
    if (header.size() > 1) header += ",";
    header += JsonQuote(t.name) + ":{\"dtype\":\"" + DTypeName(t.dtype) + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
  }
  header += "}";
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  while (header.size() % 8 != 0) header += ' ';

  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return NotFound("cannot create " + path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xff);
  bool ok = std::fwrite(len, 1, 8, f.get()) == 8 &&
            std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
  std::vector<uint8_t> buffer;
  for (size_t i = 0; ok && i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    const void* src = t.data;
    if (t.fill) {
      // One buffer sized for the largest tensor, reused: memory stays at one tensor.
      if (buffer.size() < max_size) buffer.resize(max_size);
      t.fill(buffer.data());
      src = buffer.data();
    }
    ok = sizes[i] == 0 || std::fwrite(src, 1, sizes[i], f.get()) == sizes[i];
  }
  if (!ok) return DataLoss("short write to " + path);
  if (std::fclose(f.release()) != 0) return DataLoss("cannot close " + path);
  return Status::Ok();
}

}  // namespace petal
