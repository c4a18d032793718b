// Resolves a hub model id to a local model folder, the way huggingface_hub's snapshot_download
// does, but fetching only the files a Petal model needs (IsModelFile). Online: the revision is
// resolved to a commit through `GET {endpoint}/api/models/{repo}/revision/{rev}`; each missing
// file's etag and size come from `HEAD {endpoint}/{repo}/resolve/{commit}/{path}` (a redirect
// to the CDN for LFS files); the bytes land in blobs/<etag>.incomplete, resumed with HTTP Range
// after a cut-off, verified against the stated size and sha256 (or git blob sha1), then renamed
// and linked from snapshots/<commit>/. Offline ($HF_HUB_OFFLINE) or when the hub cannot be
// reached: the cached snapshot of refs/<rev>, if complete. See docs/hub.md.
// Thread-safety: safe to call from several threads or processes at once (blob writes are
// serialised by lock files); it blocks for the whole download.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "hub/hub_id.h"

namespace petal::hub {

struct ResolvedModel {
  std::string dir;     // absolute snapshot folder: a model folder as Petal loads it
  std::string commit;  // the commit the revision pointed at
  int files_downloaded = 0;
  int64_t bytes_downloaded = 0;
  bool offline = false;  // answered from the cache without asking the hub
};

// True for the repo files a model needs: config.json, the tokenizer files, the
// sentence-transformers files (modules.json, config_sentence_transformers.json,
// sentence_bert_config.json, <N>_<Module>/config.json), top-level *.safetensors and
// model.safetensors.index.json, and the *.safetensors of <N>_<Module>/ folders.
bool IsModelFile(const std::string& path);

StatusOr<ResolvedModel> ResolveHubModel(const HubId& id, const HubSettings& settings);

}  // namespace petal::hub
