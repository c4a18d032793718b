// The architecture table (see registry.h). One line per architecture.
#include "model/registry.h"

#include "model/bert/bert_arch.h"
#include "model/config_fields.h"
#include "model/qwen3/qwen3_arch.h"

namespace petal {

const std::vector<ArchitectureEntry>& Architectures() {
  static const std::vector<ArchitectureEntry> table = {
      {Architecture::kBert, "bert", &DetectBert, &ParseBertExtras, &BertParameterCount},
      {Architecture::kQwen3, "qwen3", &DetectQwen3, &ParseQwen3Extras, &Qwen3ParameterCount},
  };
  return table;
}

const ArchitectureEntry& FindArchitecture(Architecture a) {
  for (const ArchitectureEntry& e : Architectures()) {
    if (e.id == a) return e;
  }
  return Architectures().front();  // unreachable: every enum value has a line above
}

StatusOr<const ArchitectureEntry*> DetectArchitecture(const ConfigFields& f) {
  for (const ArchitectureEntry& e : Architectures()) {
    if (e.detect(f)) return &e;
  }
  std::string supported;
  for (const ArchitectureEntry& e : Architectures()) {
    supported += (supported.empty() ? "" : ", ") + std::string(e.name);
  }
  if (f.Has("model_type")) {
    return f.Unsupported("model_type", "is not an architecture Petal runs (supported families: " +
                                           supported + "; docs/models.md lists the layouts)");
  }
  if (!f.FirstArchitecture().empty()) {
    return f.Unsupported("architectures",
                         "is not an architecture Petal runs (supported "
                         "families: " +
                             supported + "; docs/models.md lists the layouts)");
  }
  return InvalidArgument(f.file() + ": neither 'model_type' nor 'architectures' is set");
}

}  // namespace petal
