// ConfigFields: typed, error-naming accessors over one parsed JSON object of a model folder
// (config.json, 1_Pooling/config.json, ...). Every error names the file, the key and, where one
// was given, the value. Used by config.cc and by each architecture's config extras
// (src/model/<arch>/*_config.cc). Thread-safety: a view over a simdjson document; use it on one
// thread while the parser that owns the document is alive.
#pragma once

#include <simdjson.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "model/config.h"

namespace petal {

class ConfigFields {
 public:
  ConfigFields(simdjson::dom::object obj, std::string file) : obj_(obj), file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  simdjson::dom::object object() const { return obj_; }

  // Present and not null.
  bool Has(const char* key) const;
  // Integer in [0, 2^30].
  StatusOr<int> Int(const char* key) const;
  StatusOr<int> IntOr(const char* key, int dflt) const;
  StatusOr<double> Double(const char* key) const;
  StatusOr<double> DoubleOr(const char* key, double dflt) const;
  std::string StrOr(const char* key, std::string dflt) const;
  bool BoolOr(const char* key, bool dflt) const;
  // A boolean when present and not null; a value of another type fails with the key named.
  StatusOr<bool> StrictBoolOr(const char* key, bool dflt) const;
  // architectures[0], or "" when absent.
  std::string FirstArchitecture() const;
  // The value of `key` as compact JSON text (for error messages); "null" when absent.
  std::string Json(const char* key) const;

  // "<file>: key '<key>' = <value> <why>", as an Unimplemented status: the message every
  // unsupported value of a config file gets.
  Status Unsupported(const char* key, const std::string& why) const;

 private:
  simdjson::dom::object obj_;
  std::string file_;
};

// A norm epsilon `key` (default `dflt`) that is positive, at most 1 and fits a float.
StatusOr<float> ReadNormEps(const ConfigFields& f, const char* key, double dflt);
// hidden_act (default `dflt`): gelu, gelu_new / gelu_pytorch_tanh, silu / swish.
StatusOr<Activation> ReadActivation(const ConfigFields& f, const char* dflt);

}  // namespace petal
