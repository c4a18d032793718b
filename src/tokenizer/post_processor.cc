// Post-processor templates (see post_processor.h).
#include "tokenizer/post_processor.h"

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
                          std::vector<int32_t>* out) const {
  out->clear();
  const auto& t = pair ? pair_ : single_;
  if (t.empty()) {
    out->insert(out->end(), a.begin(), a.end());
    if (pair && b) out->insert(out->end(), b->begin(), b->end());
    return;
  }
  for (const Item& it : t) {
    if (it.sequence < 0) {
      out->insert(out->end(), it.ids.begin(), it.ids.end());
    } else if (it.sequence == 0) {
      out->insert(out->end(), a.begin(), a.end());
    } else if (b) {
      out->insert(out->end(), b->begin(), b->end());
    }
  }
}

}  // namespace petal::tok
