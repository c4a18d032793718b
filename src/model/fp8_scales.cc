// Static fp8 activation scales: model fingerprint, the calibrator and fp8_scales.json
// (fp8_scales.h).
#include "model/fp8_scales.h"

#include <simdjson.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/file_util.h"
#include "common/json_literal.h"

namespace petal {
namespace {

// The e4m3 constants of the CUDA kernels (kernels/cuda/fp8_ops.h: kFp8Max, kFp8MinAmax), repeated
// here because this library is built without CUDA.
constexpr float kE4m3Max = 448.f;
constexpr float kMinAmax = 1e-12f;
constexpr size_t kWeightSampleBytes = 4096;

class Fnv1a {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ULL;
  }
  void Add(const std::string& s) { Add(s.data(), s.size() + 1); }  // with the NUL: unambiguous
  std::string Hex() const {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016" PRIx64, h_);
    return buf;
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

}  // namespace

ModelFingerprint FingerprintModel(const ModelConfig& c, const WeightStore& store) {
  ModelFingerprint f;
  f.architecture = ArchitectureName(c.architecture);
  f.num_layers = c.num_layers;
  f.hidden_size = c.hidden_size;
  f.intermediate_size = c.intermediate_size;
  f.num_heads = c.num_heads;
  f.num_kv_heads = c.num_kv_heads;
  f.head_dim = c.head_dim;
  f.vocab_size = c.vocab_size;
  Fnv1a config;
  for (const std::string& s :
       {f.architecture, std::to_string(c.num_layers), std::to_string(c.hidden_size),
        std::to_string(c.intermediate_size), std::to_string(c.num_heads),
        std::to_string(c.num_kv_heads), std::to_string(c.head_dim), std::to_string(c.vocab_size),
        Num(c.norm_eps), Num(c.rope_theta), std::string(AttentionMaskName(c.mask)),
        std::to_string(c.attention_bias), std::to_string(c.qk_norm)}) {
    config.Add(s);
  }
  f.config_hash = config.Hex();
  std::vector<std::string> names = store.Names();
  std::sort(names.begin(), names.end());
  Fnv1a tensors, weights;
  for (const std::string& name : names) {
    const TensorView* t = store.Find(name);
    if (t == nullptr) continue;
    tensors.Add(name);
    tensors.Add(std::string(DTypeName(t->dtype)) + t->ShapeString());
    weights.Add(t->data, std::min(t->nbytes, kWeightSampleBytes));
  }
  f.tensors_hash = tensors.Hex();
  f.weights_hash = weights.Hex();
  return f;
}

std::string DescribeMismatch(const ModelFingerprint& a, const ModelFingerprint& b) {
  auto diff = [](const char* what, const std::string& x, const std::string& y) {
    return std::string(what) + " " + x + " (file) vs " + y + " (model)";
  };
  if (a.architecture != b.architecture) return diff("architecture", a.architecture, b.architecture);
  const std::pair<const char*, std::pair<int, int>> ints[] = {
      {"num_layers", {a.num_layers, b.num_layers}},
      {"hidden_size", {a.hidden_size, b.hidden_size}},
      {"intermediate_size", {a.intermediate_size, b.intermediate_size}},
      {"num_heads", {a.num_heads, b.num_heads}},
      {"num_kv_heads", {a.num_kv_heads, b.num_kv_heads}},
      {"head_dim", {a.head_dim, b.head_dim}},
      {"vocab_size", {a.vocab_size, b.vocab_size}}};
  for (const auto& [name, v] : ints)
    if (v.first != v.second) return diff(name, std::to_string(v.first), std::to_string(v.second));
  if (a.config_hash != b.config_hash)
    return diff("config hash (norm eps, rope theta, mask, biases)", a.config_hash, b.config_hash);
  if (a.tensors_hash != b.tensors_hash)
    return diff("tensor names/dtypes/shapes hash", a.tensors_hash, b.tensors_hash);
  if (a.weights_hash != b.weights_hash)
    return diff("weights hash (same shapes, different weights)", a.weights_hash, b.weights_hash);
  return "";
}

std::vector<float> Fp8Scales::DequantScales() const {
  std::vector<float> s(amax.size());
  for (size_t i = 0; i < amax.size(); ++i) s[i] = std::max(amax[i], kMinAmax) / kE4m3Max;
  return s;
}

Fp8Calibrator::Fp8Calibrator(int num_layers, double percentile)
    : num_layers_(num_layers),
      percentile_(percentile),
      max_(static_cast<size_t>(num_layers) * kFp8Inputs, 0.f),
      count_(max_.size(), 0),
      non_finite_(max_.size(), 0) {
  if (percentile_ < 100.0) values_.resize(max_.size());
}

void Fp8Calibrator::ObserveRowAmax(int layer, Fp8Input which, const float* row_amax, int rows) {
  if (layer < 0 || layer >= num_layers_ || rows <= 0) return;
  const size_t i = Index(layer, which);
  for (int r = 0; r < rows; ++r) {
    const float v = row_amax[r];
    if (!std::isfinite(v)) {
      ++non_finite_[i];
      continue;
    }
    max_[i] = std::max(max_[i], v);
    if (!values_.empty()) values_[i].push_back(v);
  }
  count_[i] += rows;
}

StatusOr<std::vector<float>> Fp8Calibrator::Amax() const {
  std::vector<float> out(max_.size());
  for (int l = 0; l < num_layers_; ++l) {
    for (int w = 0; w < kFp8Inputs; ++w) {
      const size_t i = Index(l, static_cast<Fp8Input>(w));
      const std::string where =
          "layer " + std::to_string(l) + " " + Fp8InputName(static_cast<Fp8Input>(w));
      if (count_[i] == 0) return FailedPrecondition(where + " was never observed");
      if (non_finite_[i] > 0)
        return DataLoss(where + ": " + std::to_string(non_finite_[i]) +
                        " tokens had a non-finite maximum (the forward pass overflowed)");
      if (values_.empty()) {
        out[i] = max_[i];
        continue;
      }
      std::vector<float> v = values_[i];
      const double n = static_cast<double>(v.size());
      const int64_t rank = std::clamp<int64_t>(
          static_cast<int64_t>(std::ceil(percentile_ / 100.0 * n)), 1, static_cast<int64_t>(n));
      std::nth_element(v.begin(), v.begin() + (rank - 1), v.end());
      out[i] = v[rank - 1];
    }
  }
  return out;
}

Status WriteFp8Scales(const std::string& dir, const Fp8Scales& s) {
  const ModelFingerprint& m = s.model;
  if (s.amax.size() != static_cast<size_t>(m.num_layers) * kFp8Inputs)
    return InvalidArgument("fp8 scales: " + std::to_string(s.amax.size()) + " values for " +
                           std::to_string(m.num_layers) + " layers");
  std::string j = "{\n  \"format\": \"petal-fp8-scales\",\n  \"version\": " +
                  std::to_string(kFp8ScalesVersion) + ",\n";
  j += "  \"model\": {\"architecture\": " + JsonLiteral(m.architecture) +
       ", \"num_layers\": " + std::to_string(m.num_layers) +
       ", \"hidden_size\": " + std::to_string(m.hidden_size) +
       ", \"intermediate_size\": " + std::to_string(m.intermediate_size) +
       ", \"num_heads\": " + std::to_string(m.num_heads) +
       ", \"num_kv_heads\": " + std::to_string(m.num_kv_heads) +
       ", \"head_dim\": " + std::to_string(m.head_dim) +
       ", \"vocab_size\": " + std::to_string(m.vocab_size) +
       ",\n            \"config_hash\": " + JsonLiteral(m.config_hash) +
       ", \"tensors_hash\": " + JsonLiteral(m.tensors_hash) +
       ", \"weights_hash\": " + JsonLiteral(m.weights_hash) + "},\n";
  j += "  \"calibration\": {\"statistic\": " + JsonLiteral(s.statistic) +
       ", \"percentile\": " + Num(s.percentile) + ", \"backend\": " + JsonLiteral(s.backend) +
       ", \"texts\": " + std::to_string(s.texts) + ", \"tokens\": " + std::to_string(s.tokens) +
       ", \"max_length\": " + std::to_string(s.max_length) + "},\n";
  j += "  \"inputs\": [";
  for (int w = 0; w < kFp8Inputs; ++w)
    j += std::string(w ? ", " : "") + JsonLiteral(Fp8InputName(static_cast<Fp8Input>(w)));
  j += "],\n  \"layers\": [\n";
  const std::vector<float> scale = s.DequantScales();
  for (int l = 0; l < m.num_layers; ++l) {
    std::string amax, sc;
    for (int w = 0; w < kFp8Inputs; ++w) {
      const size_t i = static_cast<size_t>(l) * kFp8Inputs + w;
      const std::string key = JsonLiteral(Fp8InputName(static_cast<Fp8Input>(w))) + ": ";
      amax += (w ? ", " : "") + key + Num(s.amax[i]);
      sc += (w ? ", " : "") + key + Num(scale[i]);
    }
    j += "    {\"layer\": " + std::to_string(l) + ", \"amax\": {" + amax + "}, \"scale\": {" + sc +
         "}}" + (l + 1 < m.num_layers ? ",\n" : "\n");
  }
  j += "  ]\n}\n";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgument("cannot create " + dir + ": " + ec.message());
  const std::string path = JoinPath(dir, kFp8ScalesFile);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j;
    if (!out.good()) return Internal("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::Ok();
}

StatusOr<Fp8Scales> ParseFp8Scales(const std::string& json, const std::string& label) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS)
    return InvalidArgument(label + " is not JSON");
  auto bad = [&](const std::string& what) { return InvalidArgument(label + ": " + what); };
  std::string_view format;
  if (doc["format"].get_string().get(format) != simdjson::SUCCESS || format != "petal-fp8-scales")
    return bad("not a petal fp8 scales file (\"format\" is not \"petal-fp8-scales\")");
  int64_t version = 0;
  if (doc["version"].get_int64().get(version) != simdjson::SUCCESS)
    return bad("missing \"version\"");
  if (version != kFp8ScalesVersion)
    return bad("version " + std::to_string(version) + " is not supported (this build reads " +
               std::to_string(kFp8ScalesVersion) + "); re-run petal calibrate");
  Fp8Scales s;
  simdjson::dom::element m;
  if (doc["model"].get(m) != simdjson::SUCCESS) return bad("missing \"model\"");
  auto get_str = [&](simdjson::dom::element e, const char* k, std::string* out) -> Status {
    std::string_view v;
    if (e[k].get_string().get(v) != simdjson::SUCCESS) return bad(std::string("missing ") + k);
    *out = std::string(v);
    return Status::Ok();
  };
  auto get_int = [&](simdjson::dom::element e, const char* k, auto* out) -> Status {
    int64_t v = 0;
    if (e[k].get_int64().get(v) != simdjson::SUCCESS) return bad(std::string("missing ") + k);
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(v);
    return Status::Ok();
  };
  ModelFingerprint& f = s.model;
  PETAL_RETURN_IF_ERROR(get_str(m, "architecture", &f.architecture));
  PETAL_RETURN_IF_ERROR(get_int(m, "num_layers", &f.num_layers));
  PETAL_RETURN_IF_ERROR(get_int(m, "hidden_size", &f.hidden_size));
  PETAL_RETURN_IF_ERROR(get_int(m, "intermediate_size", &f.intermediate_size));
  PETAL_RETURN_IF_ERROR(get_int(m, "num_heads", &f.num_heads));
  PETAL_RETURN_IF_ERROR(get_int(m, "num_kv_heads", &f.num_kv_heads));
  PETAL_RETURN_IF_ERROR(get_int(m, "head_dim", &f.head_dim));
  PETAL_RETURN_IF_ERROR(get_int(m, "vocab_size", &f.vocab_size));
  PETAL_RETURN_IF_ERROR(get_str(m, "config_hash", &f.config_hash));
  PETAL_RETURN_IF_ERROR(get_str(m, "tensors_hash", &f.tensors_hash));
  PETAL_RETURN_IF_ERROR(get_str(m, "weights_hash", &f.weights_hash));
  simdjson::dom::element cal;
  if (doc["calibration"].get(cal) == simdjson::SUCCESS) {  // informational
    std::string_view v;
    if (cal["statistic"].get_string().get(v) == simdjson::SUCCESS) s.statistic = std::string(v);
    if (cal["backend"].get_string().get(v) == simdjson::SUCCESS) s.backend = std::string(v);
    double p = 0;
    if (cal["percentile"].get_double().get(p) == simdjson::SUCCESS) s.percentile = p;
    int64_t n = 0;
    if (cal["texts"].get_int64().get(n) == simdjson::SUCCESS) s.texts = n;
    if (cal["tokens"].get_int64().get(n) == simdjson::SUCCESS) s.tokens = n;
    int64_t ml = 0;
    if (cal["max_length"].get_int64().get(ml) == simdjson::SUCCESS) s.max_length = int(ml);
  }
  simdjson::dom::array layers;
  if (doc["layers"].get_array().get(layers) != simdjson::SUCCESS) return bad("missing \"layers\"");
  if (static_cast<int64_t>(layers.size()) != f.num_layers)
    return bad(std::to_string(layers.size()) + " layers listed, model.num_layers is " +
               std::to_string(f.num_layers));
  s.amax.assign(static_cast<size_t>(f.num_layers) * kFp8Inputs, 0.f);
  int l = 0;
  for (simdjson::dom::element layer : layers) {
    for (int w = 0; w < kFp8Inputs; ++w) {
      const char* name = Fp8InputName(static_cast<Fp8Input>(w));
      double v = 0;
      if (layer["amax"][name].get_double().get(v) != simdjson::SUCCESS)
        return bad("layer " + std::to_string(l) + " has no amax." + name);
      if (!std::isfinite(v) || v < 0)
        return bad("layer " + std::to_string(l) + " amax." + name + " = " + Num(v) +
                   " is not a finite non-negative number");
      s.amax[static_cast<size_t>(l) * kFp8Inputs + w] = static_cast<float>(v);
    }
    ++l;
  }
  return s;
}

StatusOr<Fp8Scales> LoadFp8ScalesFor(const std::string& dir, const ModelConfig& config,
                                     const WeightStore& store) {
  const std::string path = JoinPath(dir, kFp8ScalesFile);
  auto text = ReadFile(path);
  if (!text.ok())
    return NotFound("--fp8-scales: " + path + " not found (write it with petal calibrate)");
  PETAL_ASSIGN_OR_RETURN(Fp8Scales s, ParseFp8Scales(*text, path));
  const std::string diff = DescribeMismatch(s.model, FingerprintModel(config, store));
  if (!diff.empty())
    return FailedPrecondition("--fp8-scales: " + path + " was calibrated on another model (" +
                              diff + "); re-run petal calibrate for " + config.model_dir);
  return s;
}

}  // namespace petal
