// Hub id -> local snapshot folder: metadata, downloads, verification (see resolve.h).
#include "hub/resolve.h"

#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "hub/cache.h"
#include "hub/digest.h"
#include "hub/http.h"
#include "hub/progress.h"

namespace petal::hub {
namespace fs = std::filesystem;
namespace {

constexpr int kAttempts = 5;

std::string Name(const HubId& id) { return id.repo + "@" + id.revision; }

std::vector<std::string> AuthHeaders(const HubSettings& s) {
  if (s.token.empty()) return {};
  return {"Authorization: Bearer " + s.token};
}

// "scheme://host[:port]" of a URL.
std::string Origin(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const auto path = url.find('/', scheme + 3);
  return path == std::string::npos ? url : url.substr(0, path);
}

std::string NormalizeEtag(std::string e) {
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

bool IsHex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

int64_t FileSize(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? -1 : static_cast<int64_t>(n);
}

void Backoff(int attempt) {
  std::this_thread::sleep_for(std::chrono::milliseconds(250 * (attempt + 1)));
}

// The message for an HTTP error from the hub, by status and the hub's X-Error-Code.
Status HttpError(const HttpResponse& r, const HubId& id, const HubSettings& s,
                 const std::string& file) {
  const std::string code = r.Header("x-error-code");
  const std::string what = Name(id) + (file.empty() ? "" : " file " + file);
  const std::string page = s.endpoint + "/" + id.repo;
  const std::string token_note =
      s.token.empty() ? "HF_TOKEN is not set" : "the token in HF_TOKEN is not accepted for it";
  if (code == "GatedRepo" || r.status == 403) {
    return FailedPrecondition(
        what + ": access refused by " + s.endpoint + " (HTTP " + std::to_string(r.status) +
        "): the repository is gated or private. Accept its conditions at " + page +
        ", then set HF_TOKEN to a token of that account (" + token_note + ")");
  }
  if (r.status == 401) {
    if (code == "RepoNotFound") {
      return NotFound(what + ": no repository '" + id.repo + "' on " + s.endpoint +
                      " (HTTP 401; if it is private or gated, set HF_TOKEN: " + token_note + ")");
    }
    return FailedPrecondition(what + ": " + s.endpoint +
                              " requires authentication (HTTP 401): the repository is private "
                              "or gated and " +
                              token_note);
  }
  if (r.status == 404) {
    if (code == "RevisionNotFound") {
      return NotFound(what + ": no revision '" + id.revision + "' in " + id.repo + " on " +
                      s.endpoint + " (HTTP 404)");
    }
    if (code == "RepoNotFound") {
      return NotFound(what + ": no repository '" + id.repo + "' on " + s.endpoint +
                      " (HTTP 404): check the id");
    }
    if (code == "EntryNotFound") {
      return NotFound(what + ": the file is listed but not found on " + s.endpoint + " (HTTP 404)");
    }
    return NotFound(what + ": not found on " + s.endpoint + " (HTTP 404" +
                    (code.empty() ? "" : ", " + code) + "): check the repository id '" + id.repo +
                    "' and the revision '" + id.revision + "'");
  }
  return Unavailable(what + ": HTTP " + std::to_string(r.status) + " from " + r.url);
}

StatusOr<ResolvedModel> FromCache(const HubId& id, const HubCache& cache, const std::string& why) {
  auto commit = cache.ResolveRevision(id.repo, id.revision);
  if (!commit.ok()) {
    return NotFound(Name(id) + " is not in the hub cache " + cache.root() + " (" +
                    commit.status().message() + ") and " + why);
  }
  ResolvedModel m;
  m.commit = *commit;
  m.dir = cache.SnapshotDir(id.repo, *commit);
  m.offline = true;
  if (Status st = CheckModelFolder(m.dir); !st.ok()) {
    return NotFound(Name(id) + ": the cached snapshot is incomplete (" + st.message() + ") and " +
                    why);
  }
  return m;
}

struct FileMeta {
  std::string download_url;
  std::string etag;
  int64_t size = -1;
};

// HEAD on the resolve URL: redirects that stay on the hub's host (a renamed repo) are followed;
// one to another host (the CDN) is where the bytes are, and its response carries the metadata.
StatusOr<FileMeta> Head(const HubId& id, const HubSettings& s, const std::string& commit,
                        const std::string& path) {
  std::string url = s.endpoint + "/" + id.repo + "/resolve/" + commit + "/" + UrlEncode(path, true);
  Status last = Status::Ok();
  for (int attempt = 0, hops = 0; attempt < kAttempts && hops < 10;) {
    HttpRequest req{url, AuthHeaders(s), /*follow_redirects=*/false};
    auto r = HttpHead(req);
    if (!r.ok() || r->status >= 500) {
      last = r.ok() ? HttpError(*r, id, s, path) : r.status();
      Backoff(attempt++);
      continue;
    }
    FileMeta m;
    if (r->status >= 300 && r->status < 400) {
      const std::string loc = r->Header("location");
      if (loc.empty()) return Unavailable("HEAD " + url + ": redirect without Location");
      if (loc.front() == '/' || Origin(loc) == Origin(s.endpoint)) {
        url = loc.front() == '/' ? Origin(s.endpoint) + loc : loc;
        ++hops;
        continue;
      }
      m.download_url = loc;
    } else if (r->status == 200) {
      m.download_url = url;
    } else {
      return HttpError(*r, id, s, path);
    }
    std::string etag = r->Header("x-linked-etag");
    if (etag.empty()) etag = r->Header("etag");
    m.etag = NormalizeEtag(etag);
    if (m.etag.empty() || m.etag.find('/') != std::string::npos || m.etag.front() == '.') {
      return DataLoss("HEAD " + url + ": no usable ETag for " + path);
    }
    std::string size = r->Header("x-linked-size");
    if (size.empty() && r->status == 200) size = r->Header("content-length");
    if (!size.empty()) m.size = std::strtoll(size.c_str(), nullptr, 10);
    return m;
  }
  return Unavailable("HEAD " + url + " failed " + std::to_string(kAttempts) +
                     " times: " + last.message());
}

// Checks the finished .incomplete file against the size and digest the hub stated.
Status Verify(const std::string& file, const FileMeta& m, const std::string& path,
              std::string* note) {
  const int64_t got = FileSize(file);
  if (m.size >= 0 && got != m.size) {
    return DataLoss(path + ": downloaded " + std::to_string(got) + " bytes, the hub states " +
                    std::to_string(m.size));
  }
  if (IsHex(m.etag, 64)) {
    PETAL_ASSIGN_OR_RETURN(std::string sha, Sha256OfFile(file));
    if (sha != m.etag) {
      return DataLoss(path + ": sha256 of the download is " + sha + ", the hub states " + m.etag);
    }
    *note = "sha256 verified";
  } else if (IsHex(m.etag, 40)) {
    PETAL_ASSIGN_OR_RETURN(std::string sha1, GitBlobSha1OfFile(file));
    if (sha1 != m.etag) {
      return DataLoss(path + ": git blob sha1 of the download is " + sha1 + ", the hub states " +
                      m.etag);
    }
    *note = "git sha1 verified";
  } else {
    *note = "size verified (the etag is no digest)";
  }
  return Status::Ok();
}

// Makes snapshots/<commit>/<path> exist: from a cached blob, else downloaded.
Status Fetch(const HubId& id, const HubSettings& s, const HubCache& cache,
             const std::string& commit, const std::string& path, ResolvedModel* out) {
  PETAL_ASSIGN_OR_RETURN(FileMeta m, Head(id, s, commit, path));
  const std::string blob = cache.BlobPath(id.repo, m.etag);
  if (FileExists(blob)) return cache.Link(id.repo, commit, path, m.etag);
  std::error_code ec;
  fs::create_directories(fs::path(blob).parent_path(), ec);
  PETAL_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(cache.LockPath(id.repo, m.etag)));
  if (FileExists(blob)) return cache.Link(id.repo, commit, path, m.etag);  // another process
  const std::string part = blob + ".incomplete";
  HttpRequest req{m.download_url, {}, /*follow_redirects=*/true};
  if (Origin(m.download_url) == Origin(s.endpoint)) req.headers = AuthHeaders(s);
  Progress progress(id.repo + " " + path, m.size, s.progress);
  Status last = Status::Ok();
  bool complete = false;
  for (int attempt = 0; attempt < kAttempts && !complete; ++attempt) {
    int64_t offset = std::max<int64_t>(FileSize(part), 0);
    if (m.size >= 0 && offset > m.size) {
      fs::remove(part, ec);
      offset = 0;
    }
    if (m.size >= 0 && offset == m.size && FileExists(part)) break;
    if (offset > 0 && attempt == 0) {
      std::fprintf(stderr, "hub: resuming %s at %s\n", path.c_str(),
                   Progress::Bytes(offset).c_str());
    }
    auto r = HttpDownload(req, part, offset, [&](int64_t done, int64_t) { progress.Update(done); });
    if (!r.ok()) {
      last = r.status();
      if (r.status().code() != StatusCode::kUnavailable) return r.status();
      std::fprintf(stderr, "hub: transfer of %s interrupted (%s); resuming\n", path.c_str(),
                   r.status().message().c_str());
      Backoff(attempt);
      continue;
    }
    if (r->status == 416) {  // our range starts past the end: start over
      fs::remove(part, ec);
      last = Unavailable("HTTP 416 for a resumed range");
      continue;
    }
    if (r->status >= 500 || r->status == 429) {
      last = HttpError(*r, id, s, path);
      Backoff(attempt);
      continue;
    }
    if (r->status != 200 && r->status != 206) return HttpError(*r, id, s, path);
    const int64_t got = FileSize(part);
    if (m.size >= 0 && got < m.size) {  // the server ended the body early
      last = Unavailable("transfer ended at " + std::to_string(got) + " of " +
                         std::to_string(m.size) + " bytes");
      continue;
    }
    complete = true;
  }
  if (!complete && !(m.size >= 0 && FileSize(part) == m.size)) {
    return Unavailable(Name(id) + " file " + path + ": download failed after " +
                       std::to_string(kAttempts) + " attempts (" + last.message() +
                       "); run again to resume from " + part);
  }
  std::string note;
  if (Status st = Verify(part, m, path, &note); !st.ok()) {
    fs::remove(part, ec);  // never resume from corrupt bytes
    return DataLoss(Name(id) + " file " + st.message() + "; the download was discarded");
  }
  fs::rename(part, blob, ec);
  if (ec) return Internal("cannot rename " + part + ": " + ec.message());
  progress.Finish(note);
  out->files_downloaded += 1;
  out->bytes_downloaded += FileSize(blob);
  return cache.Link(id.repo, commit, path, m.etag);
}

}  // namespace

bool IsModelFile(const std::string& path) {
  static const std::set<std::string> kTopLevel = {
      "config.json",
      "tokenizer.json",
      "tokenizer_config.json",
      "special_tokens_map.json",
      "added_tokens.json",
      "vocab.txt",
      "vocab.json",
      "merges.txt",
      "modules.json",
      "config_sentence_transformers.json",
      "sentence_bert_config.json",
      "model.safetensors.index.json",
  };
  const auto slash = path.find('/');
  const bool safetensors = path.size() > 12 && path.ends_with(".safetensors");
  if (slash == std::string::npos) return kTopLevel.count(path) > 0 || safetensors;
  // A sentence-transformers module folder such as 1_Pooling/ or 2_Dense/ (one level).
  static const std::regex kModule("[0-9]+_[A-Za-z0-9]+/[^/]+");
  if (!std::regex_match(path, kModule)) return false;
  return path.ends_with("/config.json") || safetensors;
}

StatusOr<ResolvedModel> ResolveHubModel(const HubId& id, const HubSettings& s) {
  const HubCache cache(fs::absolute(s.cache_dir).lexically_normal().string());
  if (s.offline) {
    return FromCache(id, cache, "HF_HUB_OFFLINE is set (unset it to download)");
  }
  const std::string url =
      s.endpoint + "/api/models/" + id.repo + "/revision/" + UrlEncode(id.revision, false);
  auto r = HttpGet(HttpRequest{url, AuthHeaders(s)});
  if (!r.ok() || r->status >= 500) {
    const std::string why = r.ok() ? "HTTP " + std::to_string(r->status) : r.status().message();
    std::fprintf(stderr, "hub: cannot reach %s (%s); looking in the cache\n", s.endpoint.c_str(),
                 why.c_str());
    return FromCache(id, cache, "the hub could not be reached (" + why + ")");
  }
  if (r->status != 200) return HttpError(*r, id, s, "");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view sha;
  simdjson::dom::array siblings;
  if (parser.parse(r->body).get(doc) != simdjson::SUCCESS ||
      doc["sha"].get_string().get(sha) != simdjson::SUCCESS ||
      doc["siblings"].get_array().get(siblings) != simdjson::SUCCESS || !IsCommitHash(sha)) {
    return DataLoss(url + ": not a model-info answer (want \"sha\" and \"siblings\")");
  }
  ResolvedModel out;
  out.commit = std::string(sha);
  std::vector<std::string> files;
  bool has_config = false, has_weights = false;
  std::string others;
  for (auto sib : siblings) {
    std::string_view name;
    if (sib["rfilename"].get_string().get(name) != simdjson::SUCCESS) continue;
    std::string f(name);
    if (f.find("..") != std::string::npos || f.front() == '/') continue;
    if (!IsModelFile(f)) {
      if (f.ends_with(".bin") || f.ends_with(".pt") || f.ends_with(".onnx")) others += " " + f;
      continue;
    }
    has_config |= f == "config.json";
    has_weights |= f.ends_with(".safetensors") && f.find('/') == std::string::npos;
    files.push_back(std::move(f));
  }
  if (!has_config) {
    return FailedPrecondition(Name(id) + " has no config.json: not a transformers model");
  }
  if (!has_weights) {
    return FailedPrecondition(Name(id) + " has no *.safetensors weights" +
                              (others.empty() ? "" : " (it has" + others + ")") +
                              "; Petal loads safetensors checkpoints only");
  }
  cache.TagCacheDir();
  PETAL_RETURN_IF_ERROR(cache.WriteRef(id.repo, id.revision, out.commit));
  for (const auto& f : files) {
    if (cache.HasFile(id.repo, out.commit, f)) continue;
    PETAL_RETURN_IF_ERROR(Fetch(id, s, cache, out.commit, f, &out));
  }
  out.dir = cache.SnapshotDir(id.repo, out.commit);
  if (Status st = CheckModelFolder(out.dir); !st.ok()) {
    return DataLoss(Name(id) + ": " + st.message() +
                    " after download (the repo's index names "
                    "files it does not list)");
  }
  return out;
}

}  // namespace petal::hub
