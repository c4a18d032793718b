// `--model` values: local paths or hub ids (see model_arg.h).
#include "cli/model_arg.h"

#include <cstdio>
#include <filesystem>

#include "hub/hub_id.h"
#include "hub/resolve.h"

namespace petal::cli {
namespace fs = std::filesystem;

namespace {

bool IsLocal(const std::string& arg) {
  std::error_code ec;
  if (arg.empty() || fs::exists(arg, ec)) return true;
  const char c = arg.front();
  if (c == '/' || c == '.' || c == '~') return true;
  const std::string first = arg.substr(0, arg.find('/'));
  return !hub::LooksLikeHubId(arg) || fs::is_directory(first, ec);
}

}  // namespace

StatusOr<std::string> ResolveModelArg(const std::string& arg) {
  if (IsLocal(arg)) return arg;
  PETAL_ASSIGN_OR_RETURN(hub::HubId id, hub::ParseHubId(arg));
  const hub::HubSettings settings = hub::HubSettings::FromEnv();
  PETAL_ASSIGN_OR_RETURN(hub::ResolvedModel m, hub::ResolveHubModel(id, settings));
  std::fprintf(stderr, "hub: %s@%s is commit %s%s: %s\n", id.repo.c_str(), id.revision.c_str(),
               m.commit.c_str(),
               m.offline ? " (from the cache, offline)"
               : m.files_downloaded > 0
                   ? (", " + std::to_string(m.files_downloaded) + " files downloaded").c_str()
                   : " (cached)",
               m.dir.c_str());
  return m.dir;
}

bool ResolveModelFlag(const char* command, std::string* model, std::string* name) {
  const std::string arg = *model;
  auto r = ResolveModelArg(arg);
  if (!r.ok()) {
    std::fprintf(stderr, "%s: --model %s: %s\n", command, arg.c_str(),
                 r.status().ToString().c_str());
    return false;
  }
  if (name && name->empty() && *r != arg) *name = arg.substr(0, arg.find('@'));
  *model = std::move(r).value();
  return true;
}

}  // namespace petal::cli
