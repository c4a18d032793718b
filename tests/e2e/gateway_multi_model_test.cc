// End-to-end test of several models behind one gateway: one `petal serve` (CPU engine, replicas
// in its process) with the MiniLM embedder, the tiny cross-encoder fixture (bert-ce) and the
// SPLADE fixture (bert-splade), against one single-model `petal serve` per model. Each model
// answers its own routes, picked by the request's `model` (its --model-name or its folder's
// name), exactly as its single-model server does; a request naming no model goes to the first
// model serving the route; an unknown name is a 404 naming the served models; a route the named
// model cannot serve is a 400; /v1/models lists all three with their tasks; /info?model= and
// the metrics' `model` label. A second test runs `petal gateway` with `--server MODEL=ADDRESS`
// per model, and a third gives two models limits of their own (--max-inputs once per --model).
// The first two need models/all-MiniLM-L6-v2 (skipped if absent).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "../layouts/classify_fixture.h"
#include "../layouts/rerank_fixture.h"
#include "common/file_util.h"
#include "gateway_test_util.h"

namespace petal::gateway {
namespace {

using namespace std::chrono_literals;
using testing::HttpClient;

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A running `petal serve`: its pid, HTTP port and log (stderr).
struct Serve {
  pid_t pid = -1;
  int port = 0;
  std::string log;
  ~Serve() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int status;
    for (int i = 0; i < 400; ++i) {
      if (waitpid(pid, &status, WNOHANG) == pid) return;
      std::this_thread::sleep_for(50ms);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
};

// Runs the petal binary with `args` (stderr to `log`) until its gateway listens (port in the
// result) or it exits (pid -1).
std::unique_ptr<Serve> StartPetal(std::vector<std::string> args, const std::string& log) {
  auto s = std::make_unique<Serve>();
  s->log = log;
  ::unlink(s->log.c_str());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  s->pid = fork();
  if (s->pid == 0) {
    const int fd = ::open(s->log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    execv(PETAL_BIN, argv.data());
    _exit(127);
  }
  const std::regex re("gateway listening.* port=([0-9]+)");
  for (int i = 0; i < 1200 && s->port == 0; ++i) {
    std::smatch m;
    const std::string text = ReadText(s->log);
    if (std::regex_search(text, m, re)) s->port = std::stoi(m[1]);
    int status;
    if (s->port == 0 && waitpid(s->pid, &status, WNOHANG) == s->pid) {
      s->pid = -1;
      break;
    }
    if (s->port == 0) std::this_thread::sleep_for(50ms);
  }
  return s;
}

// Starts `petal serve` on the CPU engine (fp32, one in-process replica per model) with `models`
// as (folder, name) pairs and `extra` flags, and waits for its gateway.
std::unique_ptr<Serve> StartServe(const std::vector<std::pair<std::string, std::string>>& models,
                                  const std::string& tag,
                                  const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"petal",
                                   "serve",
                                   "--backend",
                                   "cpu",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--replica-transport",
                                   "local",
                                   "--server-arg=--cpu-precision=fp32"};
  for (const auto& [dir, name] : models) args.insert(args.end(), {"--model", dir});
  for (const auto& [dir, name] : models) args.insert(args.end(), {"--model-name", name});
  args.insert(args.end(), extra.begin(), extra.end());
  return StartPetal(args, ::testing::TempDir() + "/gateway_multi_model_" + tag + ".log");
}

// Two answers agree: the same JSON apart from numbers, and the numbers within 1e-6 (relative
// above 1): the same engine on the same batches.
void ExpectSameAnswer(const std::string& a, const std::string& b, const std::string& what) {
  const std::regex num(R"(-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)");
  EXPECT_EQ(std::regex_replace(a, num, "N"), std::regex_replace(b, num, "N")) << what;
  std::vector<double> x, y;
  for (std::sregex_iterator it(a.begin(), a.end(), num), end; it != end; ++it)
    x.push_back(std::stod(it->str()));
  for (std::sregex_iterator it(b.begin(), b.end(), num), end; it != end; ++it)
    y.push_back(std::stod(it->str()));
  ASSERT_EQ(x.size(), y.size()) << what;
  ASSERT_GT(x.size(), 0u) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::abs(x[i] - y[i]), 1e-6 * std::max(1.0, std::abs(x[i]))) << what << " #" << i;
  }
}

// The fixtures' folders (built once): the cross-encoder and the SPLADE model.
bool BuildFixtures(std::string* ce, std::string* splade) {
  auto rm = petal::testing::LoadRerankManifest();
  auto cm = petal::testing::LoadClassifyManifest();
  if (!rm.ok() || !cm.ok()) return false;
  for (const auto& f : rm->fixtures) {
    if (f.spec.name != "bert-ce") continue;
    auto g = petal::testing::LoadRerankGolden(f.spec.name);
    if (!g.ok()) return false;
    auto dir = petal::testing::BuildRerankFolder(*rm, f, *g);
    if (!dir.ok()) return false;
    *ce = *dir;
  }
  for (const auto& f : cm->fixtures) {
    if (f.spec.name != "bert-splade") continue;
    auto g = petal::testing::LoadClassifyGolden(f.spec.name);
    if (!g.ok()) return false;
    auto dir = petal::testing::BuildClassifyFolder(*cm, f, *g);
    if (!dir.ok()) return false;
    *splade = *dir;
  }
  return !ce->empty() && !splade->empty() && FileExists(*ce + "/tokenizer.json") &&
         FileExists(*splade + "/tokenizer.json");
}

TEST(GatewayMultiModel, EachModelAnswersItsRoutesAsItsOwnServer) {
  const std::string minilm = testing::SourceDir() + "/models/all-MiniLM-L6-v2";
  if (!FileExists(minilm + "/model.safetensors")) GTEST_SKIP() << minilm << " is missing";
  std::string ce, splade;
  ASSERT_TRUE(BuildFixtures(&ce, &splade));

  auto multi = StartServe({{minilm, "minilm"}, {ce, "ce"}, {splade, "splade"}}, "all");
  ASSERT_NE(multi->port, 0) << ReadText(multi->log);
  // The start-up hint: a curl per model, on its own route, naming it.
  const std::string log = ReadText(multi->log);
  EXPECT_NE(log.find("Petal is serving 3 models"), std::string::npos) << log;
  EXPECT_NE(log.find("/v1/embeddings -H 'Content-Type: application/json' -d '{\"model\": "
                     "\"minilm\", "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("/rerank -H 'Content-Type: application/json' -d '{\"model\": \"ce\", "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("/embed_sparse -H 'Content-Type: application/json' -d '{\"model\": "
                     "\"splade\", "),
            std::string::npos)
      << log;
  HttpClient m(static_cast<uint16_t>(multi->port));
  EXPECT_EQ(m.Get("/ready").status, 200u);

  // Each model's answers on its routes, compared with its own single-model server's.
  const std::string embed = R"("input": ["Paris is the capital of France.", "A petal."])";
  const std::string rerank =
      R"("query": "what is the capital of France?", "texts": ["Paris is the capital.", "A fox."])";
  const std::string score =
      R"("query": "what is the capital of France?", "documents": ["Paris.", "A fox."])";
  const std::string sparse = R"("inputs": ["what is petal?", "sparse vectors"])";
  struct Case {
    std::string path, body;
  };
  const std::vector<std::tuple<std::string, std::string, std::vector<Case>>> per_model = {
      {minilm,
       "minilm",
       {{"/v1/embeddings", embed},
        {"/embed", R"("inputs": "a TEI request")"},
        {"/v1/score", score},
        {"/tokenize", R"("inputs": "tokenize me")"}}},
      {ce, "ce", {{"/rerank", rerank}, {"/v1/score", score}, {"/tokenize", R"("inputs": "x y")"}}},
      {splade, "splade", {{"/embed_sparse", sparse}}},
  };
  for (const auto& [dir, name, cases] : per_model) {
    auto single = StartServe({{dir, name}}, name);
    ASSERT_NE(single->port, 0) << ReadText(single->log);
    HttpClient s(static_cast<uint16_t>(single->port));
    for (const Case& c : cases) {
      const std::string body = "{\"model\": \"" + name + "\", " + c.body + "}";
      const auto want = s.Post(c.path, body);
      const auto got = m.Post(c.path, body);
      ASSERT_EQ(want.status, 200u) << name << " " << c.path << ": " << want.body;
      ASSERT_EQ(got.status, 200u) << name << " " << c.path << ": " << got.body;
      ExpectSameAnswer(got.body, want.body, name + " " + c.path);
    }
    // A single-model server takes any name, or none, as before.
    EXPECT_EQ(s.Post(cases[0].path, "{\"model\": \"anything\", " + cases[0].body + "}").status,
              200u);
    EXPECT_EQ(s.Post(cases[0].path, "{" + cases[0].body + "}").status, 200u);
  }

  // No name: the first model serving the route (minilm for /v1/score, which serves both).
  const auto by_name = m.Post("/rerank", "{\"model\": \"ce\", " + rerank + "}");
  const auto unnamed = m.Post("/rerank", "{" + rerank + "}");
  ASSERT_EQ(unnamed.status, 200u) << unnamed.body;
  EXPECT_EQ(unnamed.body, by_name.body);
  const auto score_unnamed = m.Post("/v1/score", "{" + score + "}");
  ASSERT_EQ(score_unnamed.status, 200u) << score_unnamed.body;
  ExpectSameAnswer(score_unnamed.body,
                   m.Post("/v1/score", "{\"model\": \"minilm\", " + score + "}").body,
                   "unnamed /v1/score");
  // The folder's name picks the model too.
  EXPECT_EQ(m.Post("/embed", R"({"model": "all-MiniLM-L6-v2", "inputs": "hi"})").status, 200u);

  // Errors: unknown name (404), a route the model cannot serve (400), no model for the route.
  const auto unknown = m.Post("/v1/embeddings", R"({"model": "gpt-4", "input": "hi"})");
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_NE(unknown.body.find("model 'gpt-4' is not served here; served models: minilm (embed), "
                              "ce (score), splade (sparse)"),
            std::string::npos)
      << unknown.body;
  const auto wrong = m.Post("/v1/embeddings", R"({"model": "ce", "input": "hi"})");
  EXPECT_EQ(wrong.status, 400u);
  EXPECT_NE(wrong.body.find("model 'ce' is a ranking model"), std::string::npos) << wrong.body;
  const auto wrong2 = m.Post("/rerank", "{\"model\": \"splade\", " + rerank + "}");
  EXPECT_EQ(wrong2.status, 400u) << wrong2.body;
  const auto none = m.Post("/predict", R"({"inputs": "I loved it"})");
  EXPECT_EQ(none.status, 400u);
  EXPECT_NE(none.body.find("no model served here serves /predict"), std::string::npos) << none.body;

  // /v1/models, /info?model=, /metrics.
  const auto models = m.Get("/v1/models");
  EXPECT_EQ(models.status, 200u);
  for (const char* entry : {R"("id":"minilm","object":"model")", R"("id":"ce","object":"model")",
                            R"("task":"score")", R"("task":"sparse")", R"("task":"embed")"}) {
    EXPECT_NE(models.body.find(entry), std::string::npos) << entry << " in " << models.body;
  }
  const auto info = m.Get("/info?model=ce");
  EXPECT_EQ(info.status, 200u);
  EXPECT_NE(info.body.find(R"("model_id":"ce")"), std::string::npos) << info.body;
  EXPECT_NE(info.body.find(R"("task":"score")"), std::string::npos) << info.body;
  EXPECT_EQ(m.Get("/info?model=nope").status, 404u);
  EXPECT_NE(m.Get("/info").body.find(R"("model_id":"minilm")"), std::string::npos);
  const auto metrics = m.Get("/metrics");
  EXPECT_EQ(metrics.status, 200u);
  for (const char* sample :
       {R"(petal_gateway_requests_total{model="ce",route="/rerank",status="200"})",
        R"(petal_gateway_requests_total{model="minilm",route="/v1/embeddings",status="200"})",
        R"(petal_gateway_requests_total{model="splade",route="/embed_sparse",status="200"})",
        R"(petal_gateway_requests_total{route="/v1/embeddings",status="404"})",
        R"(petal_gateway_tokens_total{model="splade"})",
        R"(petal_gateway_replica_up{model="ce",replica="local:replica-1"} 1)",
        R"(petal_gateway_max_held_tokens{model="minilm"})"}) {
    EXPECT_NE(metrics.body.find(sample), std::string::npos) << sample;
  }
}

// Each model's own limits (--max-inputs and --chunk-max-sequences once per --model, in order;
// --chunk-max-tokens once, for both): the same route answers 413 at each model's own count, with
// a message naming the field and that model's limit, /info reports each model's values and each
// model's requests are cut into chunks of its own size. A
// count that is neither one nor one per --model stops start-up with a message saying so.
TEST(GatewayMultiModel, EachModelHasItsOwnLimits) {
  std::string ce, splade;
  ASSERT_TRUE(BuildFixtures(&ce, &splade));
  auto serve = StartServe({{ce, "ce"}, {splade, "splade"}}, "limits",
                          {"--max-inputs", "2", "--max-inputs", "3", "--chunk-max-sequences", "1",
                           "--chunk-max-sequences", "7", "--chunk-max-tokens", "1000"});
  ASSERT_NE(serve->port, 0) << ReadText(serve->log);
  HttpClient c(static_cast<uint16_t>(serve->port));
  auto texts = [](size_t n) {
    std::string t = "[";
    for (size_t i = 0; i < n; ++i) t += (i ? ",\"text " : "\"text ") + std::to_string(i) + "\"";
    return t + "]";
  };
  auto too_many = [](const std::string& field, size_t n, size_t limit) {
    return "'" + field + "' has " + std::to_string(n) + " items; at most " + std::to_string(limit) +
           " are allowed";
  };
  struct Case {
    std::string name, path, field, before;  // `before`: the body's other fields
    size_t limit;
  };
  const std::vector<Case> cases = {
      {"ce", "/tokenize", "inputs", "", 2},
      {"splade", "/tokenize", "inputs", "", 3},
      {"ce", "/rerank", "texts", R"("query": "capital of France?", )", 2},
      {"splade", "/embed_sparse", "inputs", "", 3},
  };
  for (const Case& k : cases) {
    const std::string what = k.name + " " + k.path;
    auto body = [&](size_t n) {
      return "{\"model\": \"" + k.name + "\", " + k.before + "\"" + k.field + "\": " + texts(n) +
             "}";
    };
    const auto at = c.Post(k.path, body(k.limit));
    EXPECT_EQ(at.status, 200u) << what << ": " << at.body;
    const auto past = c.Post(k.path, body(k.limit + 1));
    EXPECT_EQ(past.status, 413u) << what << ": " << past.body;
    EXPECT_NE(past.body.find(too_many(k.field, k.limit + 1, k.limit)), std::string::npos)
        << what << ": " << past.body;
  }
  for (const auto& [name, inputs, seqs] :
       std::vector<std::tuple<std::string, int, int>>{{"ce", 2, 1}, {"splade", 3, 7}}) {
    const std::string info = c.Get("/info?model=" + name).body;
    EXPECT_NE(info.find("\"max_client_batch_size\":" + std::to_string(inputs) + ","),
              std::string::npos)
        << info;
    EXPECT_NE(info.find("\"chunk_max_sequences\":" + std::to_string(seqs) + ","), std::string::npos)
        << info;
    EXPECT_NE(info.find("\"chunk_max_tokens\":1000,"), std::string::npos) << info;
  }
  // The chunks each model's answered requests were cut into: ce's two pairs one per chunk
  // (--chunk-max-sequences 1), splade's three inputs in one (7); the refused requests sent none.
  const std::string metrics = c.Get("/metrics").body;
  for (const char* sample : {R"(petal_gateway_chunks_total{model="ce"} 2)",
                             R"(petal_gateway_chunks_total{model="splade"} 1)"}) {
    EXPECT_NE(metrics.find(std::string(sample) + "\n"), std::string::npos) << sample;
  }
  serve.reset();

  auto bad = StartServe({{ce, "ce"}, {splade, "splade"}}, "limits_bad",
                        {"--max-inputs", "2", "--max-inputs", "3", "--max-inputs", "4"});
  EXPECT_EQ(bad->port, 0);
  const std::string log = ReadText(bad->log);
  EXPECT_NE(log.find("petal serve: --max-inputs is given 3 times for 2 --model: give it once (for "
                     "every model) or once per --model, in the same order"),
            std::string::npos)
      << log;
}

// `petal gateway` in front of servers started elsewhere: each --server names its model. The
// servers here are never started, which the gateway allows (/ready says which models have none).
TEST(GatewayMultiModel, GatewayCommandTakesServersPerModel) {
  const std::string minilm = testing::SourceDir() + "/models/all-MiniLM-L6-v2";
  if (!FileExists(minilm + "/tokenizer.json")) GTEST_SKIP() << minilm << " is missing";
  std::string ce, splade;
  ASSERT_TRUE(BuildFixtures(&ce, &splade));
  const std::string log = ::testing::TempDir() + "/gateway_multi_model_gateway.log";
  auto g = StartPetal({"petal", "gateway", "--model", minilm, "--model", ce, "--model-name",
                       "minilm", "--model-name", "ce", "--server", "minilm=127.0.0.1:1", "--server",
                       "ce=unix:/nonexistent/ce.sock", "--server", "all-MiniLM-L6-v2=127.0.0.1:2",
                       "--listen", "127.0.0.1:0"},
                      log);
  ASSERT_NE(g->port, 0) << ReadText(log);
  HttpClient c(static_cast<uint16_t>(g->port));
  const auto models = c.Get("/v1/models");
  EXPECT_NE(models.body.find(R"("id":"minilm")"), std::string::npos) << models.body;
  EXPECT_NE(models.body.find(R"("id":"ce")"), std::string::npos) << models.body;
  const auto ready = c.Get("/ready");
  EXPECT_EQ(ready.status, 503u);
  EXPECT_NE(ready.body.find(R"("models":["minilm","ce"])"), std::string::npos) << ready.body;
  const std::string info = c.Get("/info?model=minilm").body;
  EXPECT_NE(info.find("127.0.0.1:1"), std::string::npos) << info;
  EXPECT_NE(info.find("127.0.0.1:2"), std::string::npos) << info;
  EXPECT_NE(c.Get("/info?model=ce").body.find("unix:/nonexistent/ce.sock"), std::string::npos);
  g.reset();

  // A bare address with several models, or a model without a server: exit 2, saying why.
  for (const auto& [servers, why] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--server", "127.0.0.1:1"}, "give each server as MODEL=ADDRESS"},
           {{"--server", "minilm=127.0.0.1:1"}, "model 'ce' has no server"},
           {{"--server", "minilm=127.0.0.1:1", "--server", "nope=127.0.0.1:2"},
            "no model named 'nope'"}}) {
    std::vector<std::string> args = {"petal",        "gateway", "--model",      minilm,
                                     "--model",      ce,        "--model-name", "minilm",
                                     "--model-name", "ce",      "--listen",     "127.0.0.1:0"};
    args.insert(args.end(), servers.begin(), servers.end());
    auto bad = StartPetal(args, log);
    EXPECT_EQ(bad->port, 0);
    EXPECT_NE(ReadText(log).find(why), std::string::npos) << ReadText(log);
  }
}

}  // namespace
}  // namespace petal::gateway
