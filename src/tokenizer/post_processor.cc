// Post-processor templates (see post_processor.h).
#include "tokenizer/post_processor.h"

#include <cstddef>

namespace petal::tok {

int PostProcessor::NumAdded(bool pair) const {
  const auto& t = pair ? pair_ : single_;
  int n = 0;
  for (const Item& it : t) {
    if (it.sequence < 0) n += static_cast<int>(it.ids.size());
  }
  return n;
}

void PostProcessor::Apply(const std::vector<int32_t>& a, const std::vector<int32_t>* b, bool pair,
                          std::vector<int32_t>* out, std::vector<int32_t>* type_ids) const {
  out->clear();
  if (type_ids) type_ids->clear();
  auto put = [&](const std::vector<int32_t>& ids, int type) {
    out->insert(out->end(), ids.begin(), ids.end());
    if (type_ids) type_ids->insert(type_ids->end(), ids.size(), type);
  };
  const auto& t = pair ? pair_ : single_;
  // One allocation at most: growing by each template item reallocated two or three times.
  const std::size_t total =
      a.size() + (pair && b ? b->size() : 0) + static_cast<std::size_t>(NumAdded(pair));
  out->reserve(total);
  if (type_ids) type_ids->reserve(total);
  if (t.empty()) {
    put(a, 0);
    if (pair && b) put(*b, 1);
    return;
  }
  for (const Item& it : t) {
    if (it.sequence < 0) {
      put(it.ids, it.type_id);
    } else if (it.sequence == 0) {
      put(a, it.type_id);
    } else if (b) {
      put(*b, it.type_id);
    }
  }
}

}  // namespace petal::tok
