// Tests for sparse_rows.h: packing dense rows keeps exactly the values > 0 (not 0, -0, negatives
// or NaN), decoding the sparse and the dense form gives the same entries, and malformed answers
// are refused. Thread-safety: single-threaded test.
#include "wire/sparse_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace petal::wire {
namespace {

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

const std::vector<float> kRows = {
    0.0f,  1.5f, -0.0f, 2.0f,  -1.0f, std::numeric_limits<float>::quiet_NaN(),  // row 0
    0.0f,  0.0f, 0.0f,  0.0f,  0.0f,  0.0f,                                     // row 1: none
    3e-8f, 0.f,  0.f,   0.25f, 0.f,   7.0f};                                    // row 2

TEST(SparseRows, PackKeepsExactlyThePositiveValuesAndDecodesBothForms) {
  v1::EmbedResponse sparse;
  PackSparseRows(Bytes(kRows), 3, 6, &sparse);
  EXPECT_TRUE(sparse.data().empty());
  ASSERT_EQ(sparse.sparse_counts_size(), 3);
  EXPECT_EQ(sparse.sparse_counts(0), 2u);
  EXPECT_EQ(sparse.sparse_counts(1), 0u);
  EXPECT_EQ(sparse.sparse_counts(2), 3u);
  EXPECT_EQ(sparse.dimensions(), 6u);

  v1::EmbedResponse dense;  // a server from before EmbedOptions.sparse
  dense.set_dtype(v1::DTYPE_FLOAT32);
  dense.add_shape(3);
  dense.add_shape(6);
  dense.set_dimensions(6);
  dense.set_data(Bytes(kRows));
  for (const v1::EmbedResponse* resp : {&sparse, &dense}) {
    auto rows = DecodeSparseRows(*resp, 3);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_EQ(rows->size(), 3u);
    EXPECT_EQ((*rows)[0].indices, (std::vector<int32_t>{1, 3}));
    EXPECT_EQ((*rows)[0].values, (std::vector<float>{1.5f, 2.0f}));
    EXPECT_TRUE((*rows)[1].indices.empty());
    EXPECT_EQ((*rows)[2].indices, (std::vector<int32_t>{0, 3, 5}));
    EXPECT_EQ((*rows)[2].values, (std::vector<float>{3e-8f, 0.25f, 7.0f}));
  }
}

// Rows long enough for the 8-at-a-time zero skip, with every kind of value in and out of blocks.
TEST(SparseRows, LongRowsKeepExactlyThePositiveValues) {
  const int dim = 37;
  std::vector<float> row(dim, 0.0f);
  row[0] = 1.0f;
  row[9] = -0.0f;
  row[10] = std::numeric_limits<float>::quiet_NaN();
  row[11] = -3.0f;
  row[15] = 1e-30f;
  row[16] = std::numeric_limits<float>::infinity();
  row[36] = 2.5f;
  const SparseRow r = SparseFromDense(Bytes(row).data(), dim);
  EXPECT_EQ(r.indices, (std::vector<int32_t>{0, 15, 16, 36}));
  EXPECT_EQ(r.values,
            (std::vector<float>{1.0f, 1e-30f, std::numeric_limits<float>::infinity(), 2.5f}));
  v1::EmbedResponse resp;
  PackSparseRows(Bytes(row), 1, dim, &resp);
  auto back = DecodeSparseRows(resp, 1);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)[0].indices, r.indices);
}

TEST(SparseRows, MalformedAnswersAreRefused) {
  v1::EmbedResponse good;
  PackSparseRows(Bytes(kRows), 3, 6, &good);
  EXPECT_FALSE(DecodeSparseRows(good, 2).ok());  // row count
  auto bad = good;
  bad.set_sparse_counts(1, 1);  // counts no longer sum to the entries
  EXPECT_FALSE(DecodeSparseRows(bad, 3).ok());
  bad = good;
  bad.mutable_sparse_values()->pop_back();
  EXPECT_FALSE(DecodeSparseRows(bad, 3).ok());
  bad = good;
  const int32_t out_of_range = 6;
  bad.mutable_sparse_indices()->replace(0, 4, reinterpret_cast<const char*>(&out_of_range), 4);
  EXPECT_FALSE(DecodeSparseRows(bad, 3).ok());
  bad = good;
  const int32_t backwards = 3;  // row 0 becomes {3, 3}: not ascending
  bad.mutable_sparse_indices()->replace(0, 4, reinterpret_cast<const char*>(&backwards), 4);
  EXPECT_FALSE(DecodeSparseRows(bad, 3).ok());
  bad = good;
  const float zero = 0.0f;
  bad.mutable_sparse_values()->replace(0, 4, reinterpret_cast<const char*>(&zero), 4);
  EXPECT_FALSE(DecodeSparseRows(bad, 3).ok());
}

}  // namespace
}  // namespace petal::wire
