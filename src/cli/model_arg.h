// `--model` values: a local model folder (or file) as before, or a hub id ORG/NAME[@REVISION]
// resolved through the Hugging Face cache (src/hub). Thread-safety: call during start-up.
#pragma once

#include <string>

#include "common/status.h"

namespace petal::cli {

// An existing local path is returned unchanged, as is anything that cannot be a hub id (a path
// starting with '/', '.' or '~', or whose first component is a local folder, such as
// models/NAME). Otherwise ORG/NAME[@REV] resolves to its snapshot folder in the hub cache,
// downloading the model's files when needed (settings from HF_* variables: see hub/hub_id.h).
StatusOr<std::string> ResolveModelArg(const std::string& arg);

// ResolveModelArg in place, for a command's --model flag: on failure prints
// "<command>: --model <arg>: <message>" on stderr and returns false. When `name` is non-null and
// empty and the value was a hub id, sets *name to ORG/NAME (the name the gateway reports).
bool ResolveModelFlag(const char* command, std::string* model, std::string* name = nullptr);

}  // namespace petal::cli
