// Small file helpers shared by the loaders. Thread-safe (no shared state).
#pragma once

#include <string>

#include "common/status.h"

namespace petal {

// Reads a whole file into a string; NotFound if it does not exist.
StatusOr<std::string> ReadFile(const std::string& path);
// True if `path` names an existing regular file.
bool FileExists(const std::string& path);
// Joins two path parts with exactly one '/'.
std::string JoinPath(const std::string& a, const std::string& b);

}  // namespace petal
