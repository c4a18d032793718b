// ConfigFields accessors (see config_fields.h).
#include "model/config_fields.h"

namespace petal {

using simdjson::dom::element;

bool ConfigFields::Has(const char* key) const {
  element e;
  return obj_[key].get(e) == simdjson::SUCCESS && !e.is_null();
}

StatusOr<int> ConfigFields::Int(const char* key) const {
  int64_t v;
  if (obj_[key].get_int64().get(v) != simdjson::SUCCESS) {
    return InvalidArgument(file_ + ": field '" + key + "' is missing or not an integer");
  }
  if (v < 0 || v > (int64_t{1} << 30)) {
    return InvalidArgument(file_ + ": field '" + key + "' = " + std::to_string(v) +
                           " is out of range");
  }
  return static_cast<int>(v);
}

StatusOr<int> ConfigFields::IntOr(const char* key, int dflt) const {
  if (!Has(key)) return dflt;
  return Int(key);
}

StatusOr<double> ConfigFields::Double(const char* key) const {
  double v;
  if (obj_[key].get_double().get(v) == simdjson::SUCCESS) return v;
  int64_t i;
  if (obj_[key].get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  return InvalidArgument(file_ + ": field '" + key + "' is missing or not a number");
}

StatusOr<double> ConfigFields::DoubleOr(const char* key, double dflt) const {
  if (!Has(key)) return dflt;
  return Double(key);
}

std::string ConfigFields::StrOr(const char* key, std::string dflt) const {
  std::string_view s;
  return obj_[key].get_string().get(s) == simdjson::SUCCESS ? std::string(s) : dflt;
}

bool ConfigFields::BoolOr(const char* key, bool dflt) const {
  bool b;
  return obj_[key].get_bool().get(b) == simdjson::SUCCESS ? b : dflt;
}

StatusOr<bool> ConfigFields::StrictBoolOr(const char* key, bool dflt) const {
  if (!Has(key)) return dflt;
  bool b;
  if (obj_[key].get_bool().get(b) != simdjson::SUCCESS) {
    return InvalidArgument(file_ + ": key '" + key + "' = " + Json(key) + " is not a boolean");
  }
  return b;
}

std::string ConfigFields::FirstArchitecture() const {
  simdjson::dom::array archs;
  std::string_view a;
  if (obj_["architectures"].get_array().get(archs) == simdjson::SUCCESS && archs.size() > 0 &&
      archs.at(0).get_string().get(a) == simdjson::SUCCESS) {
    return std::string(a);
  }
  return "";
}

std::string ConfigFields::Json(const char* key) const {
  element e;
  if (obj_[key].get(e) != simdjson::SUCCESS) return "null";
  std::string_view str;
  if (e.get_string().get(str) == simdjson::SUCCESS) return "'" + std::string(str) + "'";
  std::string s = simdjson::minify(e);
  if (s.size() > 200) s = s.substr(0, 200) + "...";
  return s;
}

Status ConfigFields::Unsupported(const char* key, const std::string& why) const {
  // architectures is a list: name its first entry, which is what decides.
  const std::string value =
      std::string(key) == "architectures" ? "'" + FirstArchitecture() + "'" : Json(key);
  return Unimplemented(file_ + ": key '" + key + "' = " + value + " " + why);
}

StatusOr<float> ReadNormEps(const ConfigFields& f, const char* key, double dflt) {
  PETAL_ASSIGN_OR_RETURN(double eps, f.DoubleOr(key, dflt));
  // NaN or infinity would turn every embedding into NaN (and converting a double beyond float's
  // range is undefined behaviour).
  if (!(eps > 0) || eps > 1.0) {
    return InvalidArgument(f.file() + ": norm epsilon " + std::to_string(eps) +
                           " is not in (0, 1]");
  }
  return static_cast<float>(eps);
}

StatusOr<Activation> ReadActivation(const ConfigFields& f, const char* dflt) {
  const std::string act = f.StrOr("hidden_act", dflt);
  if (act == "gelu") return Activation::kGelu;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh") return Activation::kGeluTanh;
  if (act == "silu" || act == "swish") return Activation::kSilu;
  return Unimplemented(f.file() + ": unsupported hidden_act '" + act + "'");
}

}  // namespace petal
