// Tests of the per-model limit flags of `petal serve` / `petal gateway` (model_limits.h): parsed
// by the real flag table (AddGatewayFlags), then spread over the models. None: the defaults; once:
// the gateway's, for every model; once per --model: each model's own, in order; any other count:
// an error naming the flag and both counts.
#include "cli/model_limits.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace petal::cli {
namespace {

// Parses `args` as `petal serve`'s gateway flags would be and applies the limits to one
// ModelOptions per --model (what ResolveModels does, without resolving the folders).
Status Parse(std::vector<std::string> args, gateway::GatewayOptions* o) {
  CLI::App app;
  ModelFlags flags;
  AddGatewayFlags(&app, o, &flags);
  args.insert(args.begin(), "petal");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(std::string("parse: ") + e.what());
  }
  o->models.assign(flags.models.size(), {});
  return ApplyModelLimits(flags, o);
}

TEST(ModelLimits, NoneKeepsTheDefaults) {
  gateway::GatewayOptions o;
  ASSERT_TRUE(Parse({"--model", "a", "--model", "b"}, &o).ok());
  const gateway::GatewayOptions defaults;
  EXPECT_EQ(o.max_inputs, defaults.max_inputs);
  EXPECT_EQ(o.chunk.max_seqs, defaults.chunk.max_seqs);
  EXPECT_EQ(o.chunk.max_tokens, defaults.chunk.max_tokens);
  EXPECT_EQ(o.flow.max_held_tokens, defaults.flow.max_held_tokens);
  ASSERT_EQ(o.models.size(), 2u);
  for (const auto& m : o.models) {
    EXPECT_FALSE(m.max_inputs.has_value());
    EXPECT_FALSE(m.chunk_max_seqs.has_value());
    EXPECT_FALSE(m.chunk_max_tokens.has_value());
    EXPECT_FALSE(m.max_held_tokens.has_value());
  }
}

TEST(ModelLimits, OnceIsEveryModels) {
  gateway::GatewayOptions o;
  ASSERT_TRUE(Parse({"--model", "a", "--model", "b", "--max-inputs", "7", "--chunk-max-sequences",
                     "3", "--chunk-max-tokens", "500", "--max-queued-tokens", "9000"},
                    &o)
                  .ok());
  EXPECT_EQ(o.max_inputs, 7u);
  EXPECT_EQ(o.chunk.max_seqs, 3);
  EXPECT_EQ(o.chunk.max_tokens, 500);
  EXPECT_EQ(o.flow.max_held_tokens, 9000);
  for (const auto& m : o.models) {
    EXPECT_FALSE(m.max_inputs.has_value());
    EXPECT_FALSE(m.chunk_max_seqs.has_value());
  }
  // One model, one value: the single-model path, as before.
  gateway::GatewayOptions one;
  ASSERT_TRUE(Parse({"--model", "a", "--max-inputs", "5"}, &one).ok());
  EXPECT_EQ(one.max_inputs, 5u);
  EXPECT_FALSE(one.models[0].max_inputs.has_value());
}

TEST(ModelLimits, OncePerModelIsEachModelsOwnInOrder) {
  gateway::GatewayOptions o;
  ASSERT_TRUE(Parse({"--model",
                     "a",
                     "--max-inputs",
                     "2",
                     "--model",
                     "b",
                     "--max-inputs",
                     "4",
                     "--model",
                     "c",
                     "--max-inputs",
                     "6",
                     "--chunk-max-tokens",
                     "100",
                     "--chunk-max-tokens",
                     "200",
                     "--chunk-max-tokens",
                     "300",
                     "--chunk-max-sequences",
                     "8",
                     "--max-queued-tokens",
                     "0",
                     "--max-queued-tokens",
                     "10",
                     "--max-queued-tokens",
                     "20"},
                    &o)
                  .ok());
  ASSERT_EQ(o.models.size(), 3u);
  const gateway::GatewayOptions defaults;
  EXPECT_EQ(o.max_inputs, defaults.max_inputs);  // untouched: every model has its own
  EXPECT_EQ(o.chunk.max_seqs, 8);                // given once: every model's
  const std::vector<size_t> inputs = {2, 4, 6};
  const std::vector<int64_t> tokens = {100, 200, 300}, held = {0, 10, 20};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(o.models[i].max_inputs, inputs[i]) << i;
    EXPECT_EQ(o.models[i].chunk_max_tokens, tokens[i]) << i;
    EXPECT_EQ(o.models[i].max_held_tokens, held[i]) << i;
    EXPECT_FALSE(o.models[i].chunk_max_seqs.has_value()) << i;
  }
}

TEST(ModelLimits, OtherCountsAreAnErrorNamingTheFlagAndCounts) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--model", "a", "--model", "b", "--model", "c", "--max-inputs", "1", "--max-inputs", "2"},
       "--max-inputs is given 2 times for 3 --model"},
      {{"--model", "a", "--chunk-max-sequences", "1", "--chunk-max-sequences", "2"},
       "--chunk-max-sequences is given 2 times for 1 --model"},
      {{"--model", "a", "--model", "b", "--chunk-max-tokens", "1", "--chunk-max-tokens", "2",
        "--chunk-max-tokens", "3"},
       "--chunk-max-tokens is given 3 times for 2 --model"},
      {{"--model", "a", "--model", "b", "--model", "c", "--max-queued-tokens", "1",
        "--max-queued-tokens", "2"},
       "--max-queued-tokens is given 2 times for 3 --model"},
  };
  for (const Case& c : cases) {
    gateway::GatewayOptions o;
    const Status st = Parse(c.args, &o);
    ASSERT_FALSE(st.ok()) << c.message;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("once per --model"), std::string::npos) << st.message();
  }
  // Each value is still checked by the flag itself.
  gateway::GatewayOptions o;
  const Status zero =
      Parse({"--model", "a", "--model", "b", "--max-inputs", "3", "--max-inputs", "0"}, &o);
  EXPECT_FALSE(zero.ok());
}

}  // namespace
}  // namespace petal::cli
