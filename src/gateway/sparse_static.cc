// Inference-free (static) SPLADE query encoding (see sparse_static.h).
#include "gateway/sparse_static.h"

#include <algorithm>
#include <numeric>

#include "common/file_util.h"
#include "model/router_folder.h"
#include "model/safetensors.h"

namespace petal::gateway {

StatusOr<std::shared_ptr<const SparseStaticQuery>> SparseStaticQuery::Load(const std::string& dir,
                                                                           int64_t vocab_size) {
  PETAL_ASSIGN_OR_RETURN(RouterFolder r, ReadRouterFolder(dir));
  if (!r.present || r.query_static.empty()) return std::shared_ptr<const SparseStaticQuery>();
  const std::string path = JoinPath(JoinPath(dir, r.query_static), "model.safetensors");
  PETAL_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
  const TensorView* t = file->Find("weight");
  if (t == nullptr || t->shape.size() != 1) {
    return InvalidArgument(path + ": a SparseStaticEmbedding needs a 1-d tensor 'weight'");
  }
  if (t->shape[0] != vocab_size) {
    return InvalidArgument(path + ": 'weight' has " + std::to_string(t->shape[0]) +
                           " values but the vocabulary has " + std::to_string(vocab_size));
  }
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  files.push_back(std::move(file));
  auto store = WeightStore::FromFiles(std::move(files));
  auto q = std::make_shared<SparseStaticQuery>();
  PETAL_ASSIGN_OR_RETURN(q->weight_, store->ReadF32("weight", {vocab_size}));
  q->path_ = path;
  return std::shared_ptr<const SparseStaticQuery>(std::move(q));
}

wire::SparseRow SparseStaticQuery::Encode(const std::vector<int32_t>& ids,
                                          int64_t max_active_dims) const {
  std::vector<int32_t> present;
  present.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && static_cast<size_t>(id) < weight_.size() && weight_[id] != 0.0f) {
      present.push_back(id);
    }
  }
  std::sort(present.begin(), present.end());
  present.erase(std::unique(present.begin(), present.end()), present.end());
  if (max_active_dims > 0 && present.size() > static_cast<size_t>(max_active_dims)) {
    // The k largest values (ties: the lower index), then back to index order.
    std::stable_sort(present.begin(), present.end(),
                     [&](int32_t a, int32_t b) { return weight_[a] > weight_[b]; });
    present.resize(static_cast<size_t>(max_active_dims));
    std::sort(present.begin(), present.end());
  }
  wire::SparseRow row;
  row.indices = std::move(present);
  row.values.reserve(row.indices.size());
  for (int32_t id : row.indices) row.values.push_back(weight_[id]);
  return row;
}

}  // namespace petal::gateway
