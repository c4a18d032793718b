// ParseShard and SizeEngineBatches (embed_dataset.h): the options `petal embed --input` derives
// from its flags before the run.
#include <gtest/gtest.h>

#include "bulk/embed_dataset.h"

namespace petal::bulk {
namespace {

TEST(ParseShardTest, TakesIOverNWithIBelowN) {
  DatasetOptions o;
  EXPECT_TRUE(ParseShard("2/4", &o));
  EXPECT_EQ(o.shard_index, 2);
  EXPECT_EQ(o.shard_count, 4);
  EXPECT_TRUE(ParseShard("0/1", &o));
  EXPECT_EQ(o.shard_count, 1);
  for (const char* bad : {"4/4", "-1/4", "1/0", "1", "1/4x", "a/b", ""}) {
    DatasetOptions d;
    EXPECT_FALSE(ParseShard(bad, &d)) << bad;
    EXPECT_EQ(d.shard_count, 1) << bad;  // left as it was
  }
}

TEST(SizeEngineBatchesTest, CpuDefaultsAndGivenFlags) {
  DatasetOptions o;
  o.engine.backend = "cpu";
  o.batch_rows = 1024;
  SizeEngineBatches(&o, 0, 0);
  EXPECT_EQ(o.max_batch_tokens, 16384);
  EXPECT_EQ(o.engine.cuda.max_tokens, 16384);
  EXPECT_EQ(o.engine.cuda.max_seqs, 1024);
  o.batch_rows = 100000;
  SizeEngineBatches(&o, 0, 0);
  EXPECT_EQ(o.engine.cuda.max_seqs, 4096);
  SizeEngineBatches(&o, 100, 10);  // given: raised to the floors
  EXPECT_EQ(o.max_batch_tokens, 16384);
  EXPECT_EQ(o.engine.cuda.max_seqs, 512);
  SizeEngineBatches(&o, 65536, 2048);
  EXPECT_EQ(o.max_batch_tokens, 65536);
  EXPECT_EQ(o.engine.cuda.max_seqs, 2048);
}

TEST(SizeEngineBatchesTest, CudaDefaultsToLargeBatchesUnlessFake) {
  DatasetOptions o;
  o.engine.backend = "cuda";
  SizeEngineBatches(&o, 0, 0);
  EXPECT_EQ(o.max_batch_tokens, 131072);
  o.fake_engine = true;
  SizeEngineBatches(&o, 0, 0);
  EXPECT_EQ(o.max_batch_tokens, 16384);
}

}  // namespace
}  // namespace petal::bulk
