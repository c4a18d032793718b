// Tests for embed_sparse_rows.h: `petal embed`'s line for a sparse row is the same from the
// engines' sparse form and from dense rows ({"indices", "values"} in index order, values > 0 only),
// and --max-active-dims sets one k per sequence. Thread-safety: single-threaded test.
#include "cli/embed_sparse_rows.h"

#include <gtest/gtest.h>

#include <vector>

namespace petal::cli {
namespace {

TEST(EmbedSparseRows, SameLineFromEitherFormAndTopKPerSequence) {
  const std::vector<float> dense = {0.0f, 1.5f, -2.0f, 0.25f, 0.0f, 0.0f, 0.0f, 3.0f};
  Embeddings d;
  d.rows = 2;
  d.dim = 4;
  d.data = dense;
  const Embeddings s = Embeddings::SparseFromDense(dense.data(), 2, 4, nullptr);
  std::string a, b;
  FormatSparseRow(d, 0, &a);
  FormatSparseRow(s, 0, &b);
  EXPECT_EQ(a, "{\"indices\":[1,3],\"values\":[1.5,0.25]}\n");
  EXPECT_EQ(a, b);
  FormatSparseRow(s, 1, &b);
  EXPECT_EQ(b, "{\"indices\":[3],\"values\":[3]}\n");
  Batch batch = Batch::FromSequences({{1, 2}, {3}});
  SetSparseTopK(5, &batch);
  EXPECT_EQ(batch.sparse_top_k, (std::vector<int32_t>{5, 5}));
  SetSparseTopK(0, &batch);
  EXPECT_TRUE(batch.sparse_top_k.empty());
}

}  // namespace
}  // namespace petal::cli
