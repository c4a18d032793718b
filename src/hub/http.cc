// libcurl-backed HTTP helpers for the hub client (see http.h).
#include "hub/http.h"

#include <curl/curl.h>

#include <cctype>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>

namespace petal::hub {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

struct Transfer {
  HttpResponse* resp = nullptr;
  std::string* body = nullptr;  // for GET into memory
  size_t max_body = 0;
  std::FILE* file = nullptr;  // for downloads
  bool file_ready = false;    // file positioned for this response's status
  std::string path;
  int64_t offset = 0;  // bytes already on disk when the transfer started
  int64_t written = 0;
  const ProgressFn* progress = nullptr;
  bool too_big = false;
  bool io_error = false;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    t->resp->headers.clear();  // a new response (after a redirect or a 100 Continue)
    return size * n;
  }
  const auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string value = line.substr(colon + 1);
  const auto b = value.find_first_not_of(" \t");
  value = b == std::string::npos ? "" : value.substr(b);
  t->resp->headers[Lower(line.substr(0, colon))] = value;
  return size * n;
}

// The status of the response whose body is arriving.
long CurrentStatus(CURL* c) {
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  return code;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  if (t->body) {
    if (t->body->size() + len > t->max_body) {
      t->too_big = true;
      return 0;
    }
    t->body->append(data, len);
    return len;
  }
  return len;
}

struct DownloadCtx {
  Transfer* t;
  CURL* curl;
};

size_t OnFileBody(char* data, size_t size, size_t n, void* user) {
  auto* d = static_cast<DownloadCtx*>(user);
  Transfer* t = d->t;
  const size_t len = size * n;
  const long status = CurrentStatus(d->curl);
  if (status != 200 && status != 206) return len;  // an error page: not written
  if (!t->file_ready) {
    // 206: append after the bytes we have; 200: the whole file again, from the start.
    t->file = std::fopen(t->path.c_str(), status == 206 ? "ab" : "wb");
    if (!t->file) {
      t->io_error = true;
      return 0;
    }
    if (status == 200) t->offset = 0;
    t->file_ready = true;
  }
  if (std::fwrite(data, 1, len, t->file) != len) {
    t->io_error = true;
    return 0;
  }
  t->written += static_cast<int64_t>(len);
  return len;
}

int OnProgress(void* user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t, curl_off_t) {
  auto* d = static_cast<DownloadCtx*>(user);
  Transfer* t = d->t;
  if (t->progress && *t->progress && t->file_ready) {
    (*t->progress)(t->offset + t->written, dltotal > 0 ? t->offset + dltotal : -1);
  }
  (void)dlnow;
  return 0;
}

std::unique_ptr<CURL, CurlDeleter> NewHandle(const HttpRequest& req, curl_slist** headers) {
  GlobalInit();
  std::unique_ptr<CURL, CurlDeleter> c(curl_easy_init());
  if (!c) return c;
  curl_easy_setopt(c.get(), CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_FOLLOWLOCATION, req.follow_redirects ? 1L : 0L);
  curl_easy_setopt(c.get(), CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c.get(), CURLOPT_CONNECTTIMEOUT, req.connect_timeout_s);
  curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_TIME, req.stall_timeout_s);
  curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.get(), CURLOPT_USERAGENT, "petal-hub/0.1 (libcurl)");
  // Redirects to another host (the hub's CDN) must not carry our Authorization header; this is
  // libcurl's default for custom headers, stated here so that it stays so.
  curl_easy_setopt(c.get(), CURLOPT_UNRESTRICTED_AUTH, 0L);
  curl_slist* list = nullptr;
  for (const auto& h : req.headers) list = curl_slist_append(list, h.c_str());
  // We want the stored bytes, never a compressed transfer of them.
  list = curl_slist_append(list, "Accept-Encoding: identity");
  curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, list);
  *headers = list;
  return c;
}

StatusOr<HttpResponse> Finish(CURL* c, CURLcode rc, HttpResponse resp, const Transfer& t,
                              const std::string& url) {
  if (t.too_big) return ResourceExhausted("GET " + url + ": response body too large");
  if (t.io_error) return Internal("GET " + url + ": cannot write " + t.path);
  if (rc != CURLE_OK) {
    return Unavailable(std::string(curl_easy_strerror(rc)) + " (" + url + ")");
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
  char* eff = nullptr;
  curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff);
  if (eff) resp.url = eff;
  return resp;
}

// One transfer of `req`: a handle with the common options (NewHandle), the response headers
// collected into the response through `t`, `setup` adding what this kind of transfer needs (a
// body sink, HEAD, progress), then `done` (after the transfer, before its result is read).
StatusOr<HttpResponse> Perform(const HttpRequest& req, Transfer* t,
                               const std::function<void(CURL*)>& setup,
                               const std::function<void(CURL*, CURLcode)>& done = nullptr) {
  curl_slist* raw = nullptr;
  auto c = NewHandle(req, &raw);
  std::unique_ptr<curl_slist, SlistDeleter> list(raw);
  if (!c) return Internal("curl_easy_init failed");
  HttpResponse resp;
  t->resp = &resp;
  t->body = &resp.body;  // read only by OnBody, the in-memory sink
  curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, t);
  setup(c.get());
  const CURLcode rc = curl_easy_perform(c.get());
  if (done) done(c.get(), rc);
  return Finish(c.get(), rc, std::move(resp), *t, req.url);
}

}  // namespace

std::string HttpResponse::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

StatusOr<HttpResponse> HttpGet(const HttpRequest& req, size_t max_body_bytes) {
  Transfer t;
  t.max_body = max_body_bytes;
  return Perform(req, &t, [&](CURL* c) {
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  });
}

StatusOr<HttpResponse> HttpHead(const HttpRequest& req) {
  Transfer t;
  return Perform(req, &t, [](CURL* c) { curl_easy_setopt(c, CURLOPT_NOBODY, 1L); });
}

StatusOr<HttpResponse> HttpDownload(const HttpRequest& req, const std::string& path, int64_t offset,
                                    const ProgressFn& progress) {
  HttpRequest r = req;
  if (offset > 0) r.headers.push_back("Range: bytes=" + std::to_string(offset) + "-");
  Transfer t;
  t.path = path;
  t.offset = offset;
  t.progress = &progress;
  DownloadCtx ctx{&t, nullptr};
  auto setup = [&](CURL* c) {
    ctx.curl = c;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnFileBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &ctx);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &ctx);
  };
  auto done = [&](CURL* c, CURLcode rc) {
    if (rc == CURLE_OK && !t.file_ready && CurrentStatus(c) == 200) {
      t.file = std::fopen(path.c_str(), "wb");  // an empty file: no body callback ran
      if (!t.file) t.io_error = true;
    }
    if (t.file && std::fclose(t.file) != 0) t.io_error = true;
    t.file = nullptr;
  };
  return Perform(r, &t, setup, done);
}

std::string UrlEncode(const std::string& s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace petal::hub
