#include "model/registry.h"

#include "model/factory.h"

#include <gtest/gtest.h>

#include <set>

namespace petal {
namespace {

TEST(RegistryTest, EveryArchitectureHasOneCompleteEntry) {
  std::set<std::string> names;
  for (Architecture a : {Architecture::kBert, Architecture::kQwen3}) {
    const ArchitectureEntry& e = FindArchitecture(a);
    EXPECT_EQ(e.id, a);
    EXPECT_STREQ(e.name, ArchitectureName(a));
    EXPECT_NE(e.detect, nullptr);
    EXPECT_NE(e.parse_extras, nullptr);
    EXPECT_NE(e.parameter_count, nullptr);
    const ArchitectureFactory& f = FindFactory(a);
    EXPECT_EQ(f.id, a);
    EXPECT_NE(f.checkpoint_tensors, nullptr);
    EXPECT_NE(f.create_cpu, nullptr);
#if PETAL_WITH_CUDA
    EXPECT_NE(f.create_cuda, nullptr);
#else
    EXPECT_EQ(f.create_cuda, nullptr);  // CreateCudaModel reports it
#endif
    names.insert(e.name);
  }
  EXPECT_EQ(names.size(), Architectures().size());
}

TEST(RegistryTest, TensorTablesMatchTheParameterCount) {
  auto bert = ParseModelConfig(R"({"model_type":"bert","hidden_size":64,"num_hidden_layers":2,
    "num_attention_heads":2,"intermediate_size":96,"vocab_size":100,"max_position_embeddings":16})");
  auto qwen = ParseModelConfig(R"({"model_type":"qwen3","hidden_size":64,"num_hidden_layers":2,
    "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"intermediate_size":96,
    "vocab_size":100,"max_position_embeddings":16,"attention_bias":true})");
  ASSERT_TRUE(bert.ok() && qwen.ok());
  for (const ModelConfig* c : {&*bert, &*qwen}) {
    const ArchitectureEntry& e = FindArchitecture(c->architecture);
    int64_t n = 0;
    for (const CheckpointTensor& t : FindFactory(c->architecture).checkpoint_tensors(*c)) {
      int64_t m = 1;
      for (int64_t d : t.shape) m *= d;
      n += m;
    }
    EXPECT_EQ(n, c->ParameterCount()) << e.name;
  }
}

}  // namespace
}  // namespace petal
