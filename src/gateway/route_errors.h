// Small helpers shared by the gateway's route files (embed_routes.cc, rerank_routes.cc): error
// answers in the OpenAI error shape, a server Status as an HTTP answer, and elapsed seconds.
// Thread-safety: pure functions.
#pragma once

#include <chrono>

#include "gateway/gateway.h"
#include "gateway/json_writer.h"

namespace petal::gateway {

inline HttpResponse ErrorResponse(const RequestError& e) {
  const char* type = e.http_status >= 500 ? "server_error" : "invalid_request_error";
  if (e.http_status == 429) type = "rate_limit_error";
  HttpResponse res = MakeResponse(e.http_status, ErrorJson(e.message, type, e.param));
  // Overload and no-replica are transient: tell clients when to come back.
  if (e.http_status == 429 || e.http_status == 503) {
    res.set(boost::beast::http::field::retry_after, "1");
  }
  return res;
}

inline HttpResponse ServerError(const Status& s) {
  const unsigned code = HttpStatusFor(s);
  return ErrorResponse({code, "inference server: " + s.message(), ""});
}

inline double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace petal::gateway
