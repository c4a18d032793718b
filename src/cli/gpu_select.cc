#include "cli/gpu_select.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

namespace petal::cli {
namespace {

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

bool IsIndex(const std::string& s) {
  return !s.empty() && s.size() < 6 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

StatusOr<std::vector<std::string>> ResolveGpus(const std::string& spec, int visible,
                                               const std::string& parent_visible) {
  std::vector<int> indices;
  if (spec == "all") {
    for (int i = 0; i < visible; ++i) indices.push_back(i);
  } else if (IsIndex(spec)) {
    const int n = std::stoi(spec);
    if (n == 0) return std::vector<std::string>{};
    if (n > visible && visible > 0) {
      return InvalidArgument("--gpus " + spec + ": only " + std::to_string(visible) +
                             " CUDA device(s) visible");
    }
    for (int i = 0; i < n; ++i) indices.push_back(i);
  } else {
    const std::vector<std::string> items = Split(spec);
    if (items.empty()) return InvalidArgument("--gpus: empty");
    for (const std::string& item : items) {
      if (!IsIndex(item)) {
        return InvalidArgument("--gpus '" + spec +
                               "': expected all, a count, or a list of device indices like 0,2");
      }
      const int d = std::stoi(item);
      if (std::find(indices.begin(), indices.end(), d) != indices.end()) {
        return InvalidArgument("--gpus '" + spec + "': device " + item + " is listed twice");
      }
      if (d >= visible && visible > 0) {
        return InvalidArgument("--gpus '" + spec + "': device " + item + " does not exist (" +
                               std::to_string(visible) + " visible)");
      }
      indices.push_back(d);
    }
  }
  if (visible == 0) {
    return FailedPrecondition(
        "--gpus " + spec +
        ": no CUDA device is visible (this petal binary was built without CUDA, or there is no "
        "GPU or driver). Leave --gpus out (or use --gpus 0) to serve on the CPU.");
  }
  const std::vector<std::string> parent = Split(parent_visible);
  std::vector<std::string> out;
  for (int d : indices) {
    out.push_back(static_cast<size_t>(d) < parent.size() ? parent[d] : std::to_string(d));
  }
  return out;
}

StatusOr<int> DeviceIndexOf(const std::string& entry, const std::string& parent_visible) {
  if (parent_visible.empty()) {
    char* end = nullptr;
    const long v = std::strtol(entry.c_str(), &end, 10);
    if (entry.empty() || *end != '\0' || v < 0 || v > 1 << 16)
      return InvalidArgument("--gpus: '" + entry + "' is not a device index");
    return static_cast<int>(v);
  }
  int index = 0;
  size_t start = 0;
  while (start <= parent_visible.size()) {
    size_t comma = parent_visible.find(',', start);
    if (comma == std::string::npos) comma = parent_visible.size();
    if (parent_visible.compare(start, comma - start, entry) == 0) return index;
    ++index;
    start = comma + 1;
  }
  return InvalidArgument("--gpus: '" + entry +
                         "' is not in CUDA_VISIBLE_DEVICES=" + parent_visible);
}

}  // namespace petal::cli
