// A small synchronous HTTP client over libcurl for the hub: GET of a JSON document, HEAD
// without following redirects, and a resumable download into a file. Only what the hub needs;
// TLS, proxies ($https_proxy etc.) and redirects are libcurl's.
// Thread-safety: the functions are safe to call from several threads at once (each call uses
// its own curl handle; libcurl's global init runs once, under std::call_once).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace petal::hub {

struct HttpResponse {
  long status = 0;
  // Headers of the last response received, names lower-cased (the last value wins).
  std::map<std::string, std::string> headers;
  std::string body;
  std::string url;  // the URL that answered (after redirects, when they are followed)

  // The header's value, or "" when absent. `name` in lower case.
  std::string Header(const std::string& name) const;
};

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  bool follow_redirects = true;
  long connect_timeout_s = 10;
  // A transfer slower than 1 byte/s for this long is abandoned (a stalled connection).
  long stall_timeout_s = 60;
};

// A transport failure (no HTTP status: DNS, refused connection, TLS, cut-off transfer) is
// Unavailable with curl's message; an HTTP error status is returned as a response.
StatusOr<HttpResponse> HttpGet(const HttpRequest& req, size_t max_body_bytes = 64 << 20);
StatusOr<HttpResponse> HttpHead(const HttpRequest& req);

// Called as bytes arrive: (bytes of the file on disk so far, total or -1 when unknown).
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

// Appends the body of GET `req.url` to `path`, which holds `offset` bytes already (sent as
// `Range: bytes=offset-` when offset > 0). A 206 answer is appended; a 200 answer replaces the
// file (the server ignored the range). Returns the HTTP response (body empty) on any status;
// the file is written only for 200/206. A transfer cut off half-way is Unavailable, with the
// bytes received so far kept in the file for the next attempt.
StatusOr<HttpResponse> HttpDownload(const HttpRequest& req, const std::string& path, int64_t offset,
                                    const ProgressFn& progress);

// Percent-encodes everything but unreserved characters (and '/' when keep_slash).
std::string UrlEncode(const std::string& s, bool keep_slash);

}  // namespace petal::hub
