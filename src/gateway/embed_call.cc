#include "gateway/embed_call.h"

#include <string_view>

#include "common/recycler.h"

namespace petal::gateway {
namespace {

// Calls kept for the next requests: at most 256, each of at most 1 MiB of buffers, 32 MiB in all.
Recycler<std::unique_ptr<EmbedCall>>& EmbedCalls() {
  using Ptr = std::unique_ptr<EmbedCall>;
  static auto* calls = new Recycler<Ptr>(
      {.max_kept = 256,
       .max_bytes = size_t{1} << 20,
       .max_total_bytes = size_t{32} << 20,
       .reset =
           [](Ptr& c) {
             // The text list keeps its capacity; the parsed body goes back to its list.
             std::vector<std::string_view> texts = std::move(c->params.inputs.texts);
             texts.clear();
             c->params = EmbedParams();
             c->params.inputs.texts = std::move(texts);
             for (auto& s : c->seqs) s.clear();
             c->timing = ServerTiming();
           },
       .bytes =
           [](const Ptr& c) {
             size_t bytes = c->seqs.capacity() * sizeof(c->seqs[0]) +
                            c->params.inputs.texts.capacity() * sizeof(std::string_view);
             for (const auto& s : c->seqs) bytes += s.capacity() * sizeof(int32_t);
             return bytes;
           }});
  return *calls;
}

}  // namespace

// The shared record's control block is recycled too.
std::shared_ptr<EmbedCall> TakeEmbedCall() {
  std::unique_ptr<EmbedCall> c = EmbedCalls().Take();
  if (!c) c = std::make_unique<EmbedCall>();
  return std::shared_ptr<EmbedCall>(
      c.release(), [](EmbedCall* p) { EmbedCalls().Give(std::unique_ptr<EmbedCall>(p)); },
      RecyclingAllocator<EmbedCall>());
}

}  // namespace petal::gateway
