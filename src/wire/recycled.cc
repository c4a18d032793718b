#include "wire/recycled.h"

#include "common/recycler.h"

namespace petal::wire {
namespace {

// The lists are never destroyed: objects may come back from threads still running at exit.
constexpr size_t kMaxKept = 256;
constexpr size_t kMaxBytes = size_t{4} << 20;
constexpr size_t kMaxTotalBytes = size_t{64} << 20;
const size_t kInline = std::string().capacity();  // a string's in-object buffer

void ResetRequest(std::unique_ptr<v1::EmbedRequest>& p) {
  // Not Clear(): protobuf 3.21's Clear() deletes the options submessage; every field the
  // gateway sets is emptied here instead, keeping each one's buffer.
  v1::EmbedRequest& r = *p;
  r.set_protocol_version(0);
  r.clear_request_id();  // a string field's clear keeps its buffer
  r.clear_token_ids();
  r.clear_token_type_ids();
  r.clear_lengths();
  r.clear_span_counts();
  r.clear_spans();
  r.set_span_pooling(v1::SpanPooling{});
  if (r.has_options()) r.mutable_options()->Clear();
  // Unknown fields are never set here: the gateway builds these messages, nobody parses them.
}
size_t RequestBytes(const std::unique_ptr<v1::EmbedRequest>& p) {
  return p->token_ids().capacity() + p->token_type_ids().capacity() +
         4 * (static_cast<size_t>(p->lengths().Capacity()) + p->span_counts().Capacity() +
              p->spans().Capacity());
}

Recycler<std::unique_ptr<v1::EmbedRequest>>& Requests() {
  static auto* r =
      new Recycler<std::unique_ptr<v1::EmbedRequest>>({.max_kept = kMaxKept,
                                                       .max_bytes = kMaxBytes,
                                                       .max_total_bytes = kMaxTotalBytes,
                                                       .reset = &ResetRequest,
                                                       .bytes = &RequestBytes});
  return *r;
}

Recycler<v1::EmbedResponse>& Responses() {
  static auto* r = new Recycler<v1::EmbedResponse>(
      {.max_kept = kMaxKept,
       .max_bytes = kMaxBytes,
       .max_total_bytes = kMaxTotalBytes,
       .reset = [](v1::EmbedResponse& m) { m.Clear(); },
       .bytes =
           [](const v1::EmbedResponse& m) {
             return m.data().capacity() + m.sparse_indices().capacity() +
                    m.sparse_values().capacity() + 4 * static_cast<size_t>(m.scales().Capacity());
           }});
  return *r;
}

Recycler<std::string>& Bytes() {
  // Only buffers on the heap are worth keeping (a moved-from string holds none).
  static auto* r = new Recycler<std::string>(
      {.max_kept = kMaxKept,
       .max_bytes = kMaxBytes,
       .max_total_bytes = kMaxTotalBytes,
       .reset = [](std::string& s) { s.clear(); },
       .bytes = [](const std::string& s) { return s.capacity(); },
       .reusable = [](const std::string& s) { return s.capacity() > kInline; }});
  return *r;
}

Recycler<std::vector<int32_t>>& Ints() {
  static auto* r = new Recycler<std::vector<int32_t>>(
      {.max_kept = kMaxKept,
       .max_bytes = kMaxBytes,
       .max_total_bytes = kMaxTotalBytes,
       .reset = [](std::vector<int32_t>& v) { v.clear(); },
       .bytes = [](const std::vector<int32_t>& v) { return 4 * v.capacity(); },
       .reusable = [](const std::vector<int32_t>& v) { return v.capacity() > 0; }});
  return *r;
}

}  // namespace

std::shared_ptr<v1::EmbedRequest> TakeEmbedRequest() {
  std::unique_ptr<v1::EmbedRequest> m = Requests().Take();
  if (!m) m = std::make_unique<v1::EmbedRequest>();
  // The last holder's release gives the message back (or frees it when the list is full or it
  // is too big); the control block comes from a recycled block too.
  return std::shared_ptr<v1::EmbedRequest>(
      m.release(),
      [](v1::EmbedRequest* p) { Requests().Give(std::unique_ptr<v1::EmbedRequest>(p)); },
      RecyclingAllocator<v1::EmbedRequest>());
}

v1::EmbedResponse TakeEmbedResponse() { return Responses().Take(); }
void RecycleEmbedResponse(v1::EmbedResponse&& response) { Responses().Give(std::move(response)); }

std::string TakeByteBuffer() { return Bytes().Take(); }
void RecycleByteBuffer(std::string&& buffer) { Bytes().Give(std::move(buffer)); }
std::vector<int32_t> TakeIntBuffer() { return Ints().Take(); }
void RecycleIntBuffer(std::vector<int32_t>&& buffer) { Ints().Give(std::move(buffer)); }

}  // namespace petal::wire
