// Small helpers shared by the gateway's route files (embed_routes.cc, rerank_routes.cc): error
// answers in the OpenAI error shape, a server Status as an HTTP answer, and elapsed seconds.
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>

#include "gateway/gateway.h"
#include "gateway/json_writer.h"

namespace petal::gateway {

// retry_after_s: the Retry-After of a 429 or 503 (overload and no replica are transient).
inline HttpResponse ErrorResponse(const RequestError& e, int retry_after_s = 1) {
  const char* type = e.http_status >= 500 ? "server_error" : "invalid_request_error";
  if (e.http_status == 429) type = "rate_limit_error";
  HttpResponse res = MakeResponse(e.http_status, ErrorJson(e.message, type, e.param));
  if (e.http_status == 429 || e.http_status == 503) {
    res.set(boost::beast::http::field::retry_after, std::to_string(std::max(1, retry_after_s)));
  }
  return res;
}

// A failed call as an HTTP answer. The gateway's own refusals (ReplicaSet: its bound, its queue's
// deadlines, no replica) say "gateway: ..."; anything else came from an inference server.
inline HttpResponse ServerError(const Status& s, int retry_after_s = 1) {
  const unsigned code = HttpStatusFor(s);
  const bool ours = s.message().starts_with("gateway: ");
  return ErrorResponse({code, ours ? s.message() : "inference server: " + s.message(), ""},
                       retry_after_s);
}

inline double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace petal::gateway
