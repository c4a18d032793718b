// LocalBackend with several engines (FakeEngine, hashed rows): many threads embedding at once get
// exactly their own rows, in order, across sub-batches and the engines' pipelined steps; also
// run under ThreadSanitizer (label tsan).
#include "bulk/dataset_backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "model/config.h"
#include "server/fake_engine.h"

namespace petal::bulk {
namespace {

const char* kModel = "tests/fixtures/layouts/bge";  // a config only: the FakeEngine reads it

TEST(DatasetBackend, ManyEnginesAndThreadsKeepEveryRowInPlace) {
  auto config = LoadModelConfig(kModel);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  DatasetOptions o;
  o.model_dir = kModel;
  o.fake_engine = true;
  o.devices = {0, 1, 2};     // three engine threads (the FakeEngine ignores the device)
  o.max_batch_tokens = 300;  // several sub-batches per call
  o.engine.cuda.max_seqs = 7;
  wire::OutputFormat f;
  f.dims = config->hidden_size;
  f.normalize = config->normalize;
  auto backend = StartBackend(o, f);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  ASSERT_TRUE((*backend)->Ready().ok());

  server::FakeEngineOptions fo;
  fo.hidden_size = config->hidden_size;
  fo.normalize = config->normalize;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int call = 0; call < 20 && failures[t].empty(); ++call) {
        Seqs seqs(1 + rng() % 40);
        for (auto& s : seqs) {
          s.resize(1 + rng() % 60);
          for (auto& id : s) id = static_cast<int32_t>(rng() % config->vocab_size);
        }
        auto e = (*backend)->Embed(seqs);
        if (!e.ok()) {
          failures[t] = e.status().ToString();
          break;
        }
        const size_t row_bytes = wire::BytesPerRow(f);
        if (e->data.size() != seqs.size() * row_bytes) {
          failures[t] = "wrong size";
          break;
        }
        for (size_t i = 0; i < seqs.size(); ++i) {
          auto want = server::FakeEngine::HashedReference(seqs[i].data(), seqs[i].size(), fo);
          if (std::memcmp(want.data(), e->data.data() + i * row_bytes, row_bytes) != 0) {
            failures[t] = "call " + std::to_string(call) + " row " + std::to_string(i);
            break;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

TEST(DatasetBackend, EmptyCallAndBadTokensAreAnswered) {
  DatasetOptions o;
  o.model_dir = kModel;
  o.fake_engine = true;
  wire::OutputFormat f;
  f.dims = 8;
  auto backend = StartBackend(o, f);
  ASSERT_TRUE(backend.ok() && (*backend)->Ready().ok());
  auto empty = (*backend)->Embed({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->data.empty());
  auto bad = (*backend)->Embed({{1, 2}, {-5}});  // a negative id: the engine's check fails
  EXPECT_FALSE(bad.ok());
  auto good = (*backend)->Embed({{1, 2}});  // and the backend goes on
  EXPECT_TRUE(good.ok()) << good.status().ToString();
}

}  // namespace
}  // namespace petal::bulk
