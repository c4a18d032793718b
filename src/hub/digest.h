// File digests the hub states for its files: sha256 (the etag of LFS files) and the git blob
// sha1 (the etag of small files kept in git), both as lowercase hex. OpenSSL's libcrypto does
// the hashing. Thread-safety: no shared state.
#pragma once

#include <string>

#include "common/status.h"

namespace petal::hub {

// sha256 of the file's bytes.
StatusOr<std::string> Sha256OfFile(const std::string& path);
// sha1 of "blob <size>\0" followed by the file's bytes (what `git hash-object` prints).
StatusOr<std::string> GitBlobSha1OfFile(const std::string& path);
// The same two digests of an in-memory string (for tests and fixtures).
std::string Sha256Hex(const std::string& data);
std::string GitBlobSha1Hex(const std::string& data);

}  // namespace petal::hub
