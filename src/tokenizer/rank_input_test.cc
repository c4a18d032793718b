// Pair encodings with token types and HF's pair truncation strategies, against ids computed with
// the `tokenizers` library (0.22, all-MiniLM-L6-v2's tokenizer.json, max_length 16); skipped when
// models/ is not fetched.
#include "tokenizer/rank_input.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "common/file_util.h"

namespace petal {
namespace {

std::unique_ptr<Tokenizer> MiniLm() {
  const char* src = std::getenv("PETAL_SOURCE_DIR");
  const std::string path = std::string(src ? src : ".") + "/models/all-MiniLM-L6-v2/tokenizer.json";
  if (!FileExists(path)) return nullptr;
  auto t = Tokenizer::FromFile(path);
  return t.ok() ? std::move(t).value() : nullptr;
}

constexpr const char* kA = "one two three four five six seven eight nine ten eleven";
constexpr const char* kB = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu";

TEST(RankInput, PairTruncationAsTokenizers) {
  auto tok = MiniLm();
  if (!tok) GTEST_SKIP() << "models/all-MiniLM-L6-v2 not fetched";
  EncodeOptions eo;
  eo.max_length = 16;
  auto lf = tok->EncodePairTyped(kA, kB, eo, PairTruncation::kLongestFirst);
  ASSERT_TRUE(lf.ok()) << lf.status().ToString();
  EXPECT_EQ(lf->ids, (std::vector<int32_t>{101, 2028, 2048, 2093, 2176, 2274, 2416, 102, 6541, 8247,
                                           13091, 7160, 28038, 23870, 27859, 102}));
  EXPECT_EQ(lf->type_ids, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_TRUE(lf->truncated);
  auto os = tok->EncodePairTyped(kA, kB, eo, PairTruncation::kOnlySecond);
  ASSERT_TRUE(os.ok()) << os.status().ToString();
  EXPECT_EQ(os->ids, (std::vector<int32_t>{101, 2028, 2048, 2093, 2176, 2274, 2416, 2698, 2809,
                                           3157, 2702, 5408, 102, 6541, 8247, 102}));
  EXPECT_EQ(os->type_ids, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}));
  // only_second cannot fit when the first text alone fills max_length (tokenizers errors too).
  eo.max_length = 9;
  EXPECT_FALSE(tok->EncodePairTyped(kA, kB, eo, PairTruncation::kOnlySecond).ok());
  // The old interface is the same ids.
  eo.max_length = 16;
  auto ids = tok->EncodePair(kA, kB, eo);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, lf->ids);
}

TEST(RankInput, RefusesOrCutsLongPairs) {
  auto tok = MiniLm();
  if (!tok) GTEST_SKIP() << "models/all-MiniLM-L6-v2 not fetched";
  RankInputOptions ro;
  ro.max_length = 16;
  ro.truncate = false;
  auto refused = EncodeRankPair(*tok, kA, kB, ro);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(refused.status().message(), "the pair has 28 tokens, more than the model's 16");
  ro.truncate = true;
  auto cut = EncodeRankPair(*tok, kA, kB, ro);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->ids.size(), 16u);
  ro.max_length = 64;
  ro.truncate = false;
  auto whole = EncodeRankPair(*tok, kA, kB, ro);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->ids.size(), 28u);  // tokenizers: 28 without truncation
  EXPECT_FALSE(whole->truncated);
}

}  // namespace
}  // namespace petal
