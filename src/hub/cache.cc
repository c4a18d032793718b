// The huggingface_hub cache layout (see cache.h).
#include "hub/cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <simdjson.h>

#include "common/file_util.h"
#include "hub/hub_id.h"

namespace petal::hub {
namespace fs = std::filesystem;

namespace {
// ".tmp<pid>-<n>": unique across the threads and processes writing into one cache.
std::string TmpSuffix() {
  static std::atomic<uint64_t> counter{0};
  return ".tmp" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1));
}
}  // namespace

std::string HubCache::RepoDir(const std::string& repo) const {
  return JoinPath(root_, RepoFolderName(repo));
}
std::string HubCache::SnapshotDir(const std::string& repo, const std::string& commit) const {
  return RepoDir(repo) + "/snapshots/" + commit;
}
std::string HubCache::BlobPath(const std::string& repo, const std::string& etag) const {
  return RepoDir(repo) + "/blobs/" + etag;
}
std::string HubCache::LockPath(const std::string& repo, const std::string& etag) const {
  return JoinPath(root_, ".locks/" + RepoFolderName(repo) + "/" + etag + ".lock");
}

StatusOr<std::string> HubCache::ResolveRevision(const std::string& repo,
                                                const std::string& revision) const {
  if (IsCommitHash(revision)) return revision;
  const std::string ref = RepoDir(repo) + "/refs/" + revision;
  auto text = ReadFile(ref);
  if (!text.ok()) return NotFound("no cached ref " + ref);
  std::string commit = *text;
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r')) commit.pop_back();
  if (!IsCommitHash(commit)) return DataLoss(ref + " does not hold a commit sha");
  return commit;
}

Status HubCache::WriteRef(const std::string& repo, const std::string& revision,
                          const std::string& commit) const {
  if (revision == commit) return Status::Ok();
  const fs::path ref = fs::path(RepoDir(repo)) / "refs" / revision;
  if (auto cur = ReadFile(ref.string()); cur.ok() && *cur == commit) return Status::Ok();
  std::error_code ec;
  fs::create_directories(ref.parent_path(), ec);
  const fs::path tmp = ref.string() + TmpSuffix();
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << commit;
    if (!f.flush()) return Internal("cannot write " + tmp.string());
  }
  fs::rename(tmp, ref, ec);
  if (ec) return Internal("cannot write " + ref.string() + ": " + ec.message());
  return Status::Ok();
}

bool HubCache::HasFile(const std::string& repo, const std::string& commit,
                       const std::string& path) const {
  std::error_code ec;
  return fs::is_regular_file(fs::path(SnapshotDir(repo, commit)) / path, ec);
}

Status HubCache::Link(const std::string& repo, const std::string& commit, const std::string& path,
                      const std::string& etag) const {
  const fs::path link = fs::path(SnapshotDir(repo, commit)) / path;
  const fs::path blob = BlobPath(repo, etag);
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) return Internal("cannot create " + link.parent_path().string() + ": " + ec.message());
  // Relative to the link's folder: "../../blobs/E", one more "../" per folder level in `path`.
  // Lexically, as os.path.relpath does (both paths are absolute and normalised).
  const fs::path target =
      blob.lexically_normal().lexically_relative(link.parent_path().lexically_normal());
  if (target.empty()) return Internal("cannot relate " + blob.string() + " to " + link.string());
  // Made under a unique name and renamed over the path: atomic, so concurrent resolvers of the
  // same snapshot (threads or processes) never see it missing or fail on each other's link.
  const fs::path tmp = link.string() + TmpSuffix();
  fs::create_symlink(target, tmp, ec);
  if (ec) return Internal("cannot link " + link.string() + ": " + ec.message());
  fs::rename(tmp, link, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Internal("cannot link " + link.string() + ": " + ec.message());
  }
  return Status::Ok();
}

void HubCache::TagCacheDir() const {
  const std::string tag = JoinPath(root_, "CACHEDIR.TAG");
  if (FileExists(tag)) return;
  std::ofstream f(tag);
  f << "Signature: 8a477f597d28d172789f06886806bc55\n"
       "# This file is a cache directory tag created by Petal (huggingface_hub layout).\n";
}

Status CheckModelFolder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(dir + " is not a folder");
  std::vector<std::string> missing;
  if (!FileExists(JoinPath(dir, "config.json"))) missing.push_back("config.json");
  const std::string index = JoinPath(dir, "model.safetensors.index.json");
  if (FileExists(index)) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.load(index).get(doc) != simdjson::SUCCESS) {
      return DataLoss(index + ": not valid JSON");
    }
    simdjson::dom::object map;
    if (doc["weight_map"].get_object().get(map) != simdjson::SUCCESS) {
      return DataLoss(index + ": no \"weight_map\" object");
    }
    std::vector<std::string> shards;
    for (auto kv : map) {
      std::string_view shard;
      if (kv.value.get_string().get(shard) != simdjson::SUCCESS) continue;
      if (std::find(shards.begin(), shards.end(), shard) == shards.end()) {
        shards.emplace_back(shard);
      }
    }
    for (const auto& s : shards) {
      if (!FileExists(JoinPath(dir, s))) missing.push_back(s);
    }
  } else {
    bool any = false;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".safetensors" && fs::is_regular_file(e.path(), ec)) any = true;
    }
    if (!any) missing.push_back("*.safetensors");
  }
  if (missing.empty()) return Status::Ok();
  std::string list;
  for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
  return NotFound(dir + " lacks " + list);
}

StatusOr<FileLock> FileLock::Acquire(const std::string& path) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("cannot open lock file " + path);
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(fd);
      return Internal("cannot lock " + path);
    }
  }
  return FileLock(fd);
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

}  // namespace petal::hub
