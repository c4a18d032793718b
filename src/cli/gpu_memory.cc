// Start-up GPU memory estimate for several models on one GPU (see gpu_memory.h).
#include "cli/gpu_memory.h"

#include <cstdio>
#include <filesystem>

#include "model/router_folder.h"
#include "model/safetensors.h"

namespace petal::cli {
namespace {

std::string GiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

}  // namespace

StatusOr<uint64_t> EstimateWeightBytes(const std::string& dir) {
  const std::string model_dir = TransformerDir(dir);  // a Router folder's document transformer
  namespace fs = std::filesystem;
  std::error_code ec;
  uint64_t bytes = 0;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    if (entry.path().extension() != ".safetensors") continue;
    PETAL_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(entry.path().string()));
    for (const auto& [name, t] : f->tensors()) bytes += 2ull * static_cast<uint64_t>(t.numel());
    ++files;
  }
  if (ec) return NotFound("cannot list " + model_dir + ": " + ec.message());
  if (files == 0) return NotFound("no .safetensors file in " + model_dir);
  return bytes;
}

Status CheckEnginesFit(const std::vector<EngineFootprint>& engines, uint64_t free_bytes,
                       int device) {
  uint64_t need = 0;
  std::string parts;
  for (const auto& e : engines) {
    need += e.weight_bytes + kEngineReserveBytes;
    parts += (parts.empty() ? "" : ", ") + e.model + " " + GiB(e.weight_bytes);
  }
  if (need <= free_bytes) return Status::Ok();
  return FailedPrecondition(
      "the models do not fit on GPU " + std::to_string(device) + ": weights " + parts + ", plus " +
      GiB(kEngineReserveBytes) + " per engine for activations and workspaces, need about " +
      GiB(need) + "; " + GiB(free_bytes) +
      " is free (serve fewer models or replicas per GPU, or give each model its own GPUs)");
}

}  // namespace petal::cli
