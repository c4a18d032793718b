// Hub model ids (`ORG/NAME[@REVISION]`) and the settings that say where and how to resolve them
// (HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE / HF_HOME, HF_HUB_OFFLINE), read the way huggingface_hub
// reads them. Thread-safety: plain values and pure functions; HubSettings::FromEnv reads the
// environment (call it during start-up, not while another thread runs setenv).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace petal::hub {

struct HubId {
  std::string repo;               // "ORG/NAME"
  std::string revision = "main";  // branch, tag or 40-hex commit
};

// Parses "ORG/NAME" or "ORG/NAME@REVISION". Both parts of the repo are 1-96 characters of
// [A-Za-z0-9._-], not starting or ending with '.' or '-', without "..". The revision is any
// non-empty text without "..", spaces or a leading '/'.
StatusOr<HubId> ParseHubId(std::string_view text);
// True when `text` is shaped like a hub id (one '/', optional '@'); says nothing about whether
// it exists. Callers try a local path first.
bool LooksLikeHubId(std::string_view text);
// True for a full 40-hex-digit (lowercase) commit sha.
bool IsCommitHash(std::string_view revision);
// The cache folder name of a model repo: "models--ORG--NAME".
std::string RepoFolderName(std::string_view repo);

struct HubSettings {
  std::string endpoint = "https://huggingface.co";  // no trailing '/'
  std::string token;      // sent as `Authorization: Bearer` to the endpoint only
  std::string cache_dir;  // the hub cache root (holds models--ORG--NAME folders)
  bool offline = false;   // cache only, no network
  // Progress on stderr: a redrawn bar when stderr is a terminal, otherwise a few log lines.
  bool progress = true;

  // $HF_ENDPOINT; $HF_TOKEN (else the token file $HF_TOKEN_PATH or $HF_HOME/token);
  // $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub ($XDG_CACHE_HOME honoured
  // as huggingface_hub does); $HF_HUB_OFFLINE in {1, ON, YES, TRUE} (any case);
  // $HF_HUB_DISABLE_PROGRESS_BARS likewise turns progress off.
  static HubSettings FromEnv();
};

}  // namespace petal::hub
