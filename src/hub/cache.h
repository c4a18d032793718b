// The huggingface_hub cache layout, shared with Python tools:
//   <root>/models--ORG--NAME/refs/<revision>            the commit sha (no newline)
//   <root>/models--ORG--NAME/blobs/<etag>               file contents, named by sha256 (LFS
//                                                        files) or git blob sha1 (small files)
//   <root>/models--ORG--NAME/blobs/<etag>.incomplete    a download in progress (resumable)
//   <root>/models--ORG--NAME/snapshots/<commit>/<path>  relative symlink to ../../blobs/<etag>
//   <root>/.locks/models--ORG--NAME/<etag>.lock         flock(2) while a blob is written
// Thread-safety: stateless apart from the root; concurrent processes (Petal or Python)
// writing the same blob are serialised by the lock file; refs are replaced atomically.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace petal::hub {

class HubCache {
 public:
  explicit HubCache(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  std::string RepoDir(const std::string& repo) const;
  std::string SnapshotDir(const std::string& repo, const std::string& commit) const;
  std::string BlobPath(const std::string& repo, const std::string& etag) const;
  std::string LockPath(const std::string& repo, const std::string& etag) const;

  // The commit a revision points at: the revision itself when it is a commit sha, else the
  // content of refs/<revision>; NotFound when the ref is not cached.
  StatusOr<std::string> ResolveRevision(const std::string& repo, const std::string& revision) const;
  // Writes refs/<revision> = commit (atomically; skipped when already so or when revision is
  // the commit itself).
  Status WriteRef(const std::string& repo, const std::string& revision,
                  const std::string& commit) const;
  // True when snapshots/<commit>/<path> exists and resolves to a file.
  bool HasFile(const std::string& repo, const std::string& commit, const std::string& path) const;
  // Points snapshots/<commit>/<path> at blobs/<etag> with a relative symlink (replacing one
  // that is there). The blob must exist.
  Status Link(const std::string& repo, const std::string& commit, const std::string& path,
              const std::string& etag) const;
  // Creates <root>/CACHEDIR.TAG (so backup tools skip the cache), as huggingface_hub does.
  void TagCacheDir() const;

 private:
  std::string root_;
};

// Checks that a model folder (a snapshot) holds what a model needs: config.json, and either
// model.safetensors.index.json with every shard it names or at least one *.safetensors file.
// The error lists what is missing.
Status CheckModelFolder(const std::string& dir);

// An exclusive flock(2) on a lock file, released by the destructor. Thread-safety: one owner.
class FileLock {
 public:
  static StatusOr<FileLock> Acquire(const std::string& path);
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace petal::hub
