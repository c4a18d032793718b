// Hub id parsing and settings from the environment (see hub_id.h).
#include "hub/hub_id.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace petal::hub {
namespace {

bool ValidRepoPart(std::string_view s) {
  if (s.empty() || s.size() > 96) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  if (s.front() == '.' || s.front() == '-' || s.back() == '.' || s.back() == '-') return false;
  return s.find("..") == std::string_view::npos;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool EnvTrue(const char* name) {
  std::string v = Env(name);
  for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

std::string Trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

StatusOr<HubId> ParseHubId(std::string_view text) {
  const std::string shown(text);
  const auto at = text.find('@');
  std::string_view repo = text.substr(0, at);
  HubId id;
  if (at != std::string_view::npos) {
    std::string_view rev = text.substr(at + 1);
    if (rev.empty() || rev.front() == '/' || rev.find("..") != std::string_view::npos ||
        rev.find_first_of(" \t\r\n") != std::string_view::npos) {
      return InvalidArgument("hub id '" + shown + "': bad revision after '@'");
    }
    id.revision = std::string(rev);
  }
  const auto slash = repo.find('/');
  if (slash == std::string_view::npos || repo.find('/', slash + 1) != std::string_view::npos ||
      !ValidRepoPart(repo.substr(0, slash)) || !ValidRepoPart(repo.substr(slash + 1))) {
    return InvalidArgument("'" + shown +
                           "' is neither a model folder nor a hub id of the form "
                           "ORG/NAME[@REVISION] (letters, digits, '.', '_', '-')");
  }
  id.repo = std::string(repo);
  return id;
}

bool LooksLikeHubId(std::string_view text) {
  const std::string_view repo = text.substr(0, text.find('@'));
  const auto slash = repo.find('/');
  return slash != std::string_view::npos && slash > 0 && slash + 1 < repo.size() &&
         repo.find('/', slash + 1) == std::string_view::npos && repo.front() != '.';
}

bool IsCommitHash(std::string_view revision) {
  if (revision.size() != 40) return false;
  for (char c : revision) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string RepoFolderName(std::string_view repo) {
  std::string out = "models--";
  for (char c : repo) {
    if (c == '/') {
      out += "--";
    } else {
      out += c;
    }
  }
  return out;
}

HubSettings HubSettings::FromEnv() {
  HubSettings s;
  if (std::string e = Env("HF_ENDPOINT"); !e.empty()) {
    while (!e.empty() && e.back() == '/') e.pop_back();
    s.endpoint = e;
  }
  std::string home = Env("HF_HOME");
  if (home.empty()) {
    std::string xdg = Env("XDG_CACHE_HOME");
    if (xdg.empty()) xdg = Env("HOME") + "/.cache";
    home = xdg + "/huggingface";
  }
  s.cache_dir = Env("HF_HUB_CACHE");
  if (s.cache_dir.empty()) s.cache_dir = Env("HUGGINGFACE_HUB_CACHE");
  if (s.cache_dir.empty()) s.cache_dir = home + "/hub";
  s.token = Trim(Env("HF_TOKEN"));
  if (s.token.empty()) {
    std::string path = Env("HF_TOKEN_PATH");
    if (path.empty()) path = home + "/token";
    std::ifstream f(path);
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      s.token = Trim(ss.str());
    }
  }
  s.offline = EnvTrue("HF_HUB_OFFLINE");
  s.progress = !EnvTrue("HF_HUB_DISABLE_PROGRESS_BARS");
  return s;
}

}  // namespace petal::hub
