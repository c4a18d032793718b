// Unit tests of the gateway's pure parts: JSON writing (floats round-trip, escaping, base64),
// request parsing errors, chunk splitting, Prometheus page merging, a 429's Retry-After and
// Server-Timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gateway/chunker.h"
#include "gateway/http_bench.h"
#include "gateway/json_writer.h"
#include "gateway/metrics.h"
#include "gateway/replica_set.h"
#include "gateway/request_parse.h"
#include "gateway/server_timing.h"

namespace petal::gateway {
namespace {

TEST(JsonOut, FloatsRoundTrip) {
  const float values[] = {0.0f, -0.05609434f, 1e-30f, 3.4028235e38f, 0.1f, -1.0f / 3};
  for (float v : values) {
    JsonOut o;
    o.Float(v);
    EXPECT_EQ(std::strtof(o.str().c_str(), nullptr), v) << o.str();
  }
  JsonOut o;
  o.Float(0.1f);
  EXPECT_EQ(o.str(), "0.1");  // shortest form, not 0.100000001
}

TEST(JsonOut, FloatArraysRoundTripWithNullsForNonFinite) {
  std::vector<float> v = {-1.17549435e-38f, 3.4028235e38f, -0.05609434f, 0.1f, 1e-45f, -0.0f};
  for (int i = 0; i < 1000; ++i)
    v.push_back(std::ldexp(static_cast<float>(i * 7919 % 1000 - 500), -(i % 40)) / 3);
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  v.push_back(-std::numeric_limits<float>::infinity());
  JsonOut o;
  o.Raw("x").FloatArray(v).Raw("y");
  const std::string& s = o.str();
  ASSERT_EQ(s.front(), 'x');
  ASSERT_EQ(s.substr(s.size() - 2), "]y");
  size_t pos = 2, n = 0;  // after "x["
  while (pos < s.size() - 2) {
    const size_t comma = std::min(s.find(',', pos), s.size() - 2);
    const std::string item = s.substr(pos, comma - pos);
    ASSERT_LT(n, v.size());
    if (std::isfinite(v[n])) {
      EXPECT_EQ(std::strtof(item.c_str(), nullptr), v[n]) << item;
      JsonOut one;
      EXPECT_EQ(item, one.Float(v[n]).str());  // the same text as Float()
    } else {
      EXPECT_EQ(item, "null");
    }
    ++n;
    pos = comma + 1;
  }
  EXPECT_EQ(n, v.size());
  JsonOut empty;
  EXPECT_EQ(empty.FloatArray({}).str(), "[]");
}

TEST(JsonOut, EscapesAndBase64) {
  JsonOut o;
  o.Str("a\"b\\c\n\x01");
  EXPECT_EQ(o.str(), "\"a\\\"b\\\\c\\n\\u0001\"");
  JsonOut b;
  b.Base64("foob");
  EXPECT_EQ(b.str(), "\"Zm9vYg==\"");
  JsonOut c;
  c.Base64("fooba");
  EXPECT_EQ(c.str(), "\"Zm9vYmE=\"");
  JsonOut d;
  d.Base64("foobar");
  EXPECT_EQ(d.str(), "\"Zm9vYmFy\"");
}

TEST(ParseOpenAi, AcceptsAllInputShapes) {
  EmbedParams p;
  EXPECT_FALSE(ParseOpenAiEmbed(R"({"input":"hi","model":"m"})", 10, &p));
  EXPECT_EQ(p.inputs.texts.size(), 1u);
  EXPECT_EQ(p.model, "m");
  EmbedParams q;
  EXPECT_FALSE(ParseOpenAiEmbed(R"({"input":[101,102]})", 10, &q));
  ASSERT_TRUE(q.inputs.pretokenized);
  EXPECT_EQ(q.inputs.ids, (std::vector<std::vector<int32_t>>{{101, 102}}));
  EmbedParams r;
  EXPECT_FALSE(ParseOpenAiEmbed(
      R"({"input":[[1],[2,3]],"encoding_format":"base64","dimensions":8})", 10, &r));
  EXPECT_EQ(r.inputs.ids.size(), 2u);
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(r.dimensions, 8u);
}

TEST(ParseOpenAi, TextsStayValidWhileTheParamsHoldTheirBody) {
  auto p = std::make_unique<EmbedParams>();
  ASSERT_FALSE(ParseOpenAiEmbed(R"({"input":["caf\u00e9 one","two"]})", 10, p.get()));
  // Later parses on this thread, of the same and other routes, use other parsers.
  EmbedParams other;
  ASSERT_FALSE(ParseTeiEmbed(R"({"inputs":["zzzzzzzzzzzzzzzz","yyyyyyyy"]})", 10, &other));
  TokenizeParams tp;
  ASSERT_FALSE(ParseTokenize(R"({"inputs":["xxxxxxxxxxxxxxxxxxxx"]})", 10, &tp));
  EmbedParams moved = std::move(*p);
  p.reset();
  ASSERT_EQ(moved.inputs.texts.size(), 2u);
  EXPECT_EQ(moved.inputs.texts[0], "caf\xc3\xa9 one");  // unescaped, in the held document
  EXPECT_EQ(moved.inputs.texts[1], "two");
  EXPECT_EQ(other.inputs.texts[0], "zzzzzzzzzzzzzzzz");
  EXPECT_EQ(tp.texts, (std::vector<std::string>{"xxxxxxxxxxxxxxxxxxxx"}));
}

TEST(ParseOpenAi, ErrorsNameTheField) {
  EmbedParams p;
  auto e = ParseOpenAiEmbed("{", 10, &p);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 400u);
  EXPECT_NE(e->message.find("not valid JSON"), std::string::npos);
  e = ParseOpenAiEmbed(R"({"model":"x"})", 10, &p);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "input");
  e = ParseOpenAiEmbed(R"({"input":["a",3]})", 10, &p);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("input[1]"), std::string::npos);
  e = ParseOpenAiEmbed(R"({"input":"a","dimensions":"7"})", 10, &p);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "dimensions");
  e = ParseOpenAiEmbed(R"({"input":["a","b","c"]})", 2, &p);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 413u);
  e = ParseOpenAiEmbed(R"({"input":[[1],[-2]]})", 10, &p);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("input[1][0]"), std::string::npos);
}

TEST(CheckVocabulary, NamesTheFirstSequenceWithAnIdPastTheVocabulary) {
  EXPECT_FALSE(CheckVocabulary({{0, 9}, {5}}, 10, "input"));
  auto e = CheckVocabulary({{0, 9}, {3, 10, 11}, {12}}, 10, "inputs");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 400u);
  EXPECT_EQ(e->param, "inputs");
  EXPECT_EQ(e->message, "'inputs[1]' holds token id 10 >= vocabulary size 10");
}

TEST(SplitChunks, BoundsSequencesAndTokens) {
  std::vector<std::vector<int32_t>> seqs(10, std::vector<int32_t>(3));
  auto c = SplitChunks(seqs, {4, 1000});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], (std::pair<size_t, size_t>{0, 4}));
  EXPECT_EQ(c[2], (std::pair<size_t, size_t>{8, 10}));
  c = SplitChunks(seqs, {100, 7});  // two sequences (6 tokens) per chunk
  ASSERT_EQ(c.size(), 5u);
  std::vector<std::vector<int32_t>> big = {std::vector<int32_t>(50), {1}};
  c = SplitChunks(big, {100, 10});  // an over-long sequence gets a chunk of its own
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], (std::pair<size_t, size_t>{0, 1}));
}

TEST(RetryAfter, IsTheBacklogOverTheAnswerRateWithinOneToSixtySeconds) {
  EXPECT_EQ(RetryAfterSeconds(1000, 0), 1);         // no rate known yet
  EXPECT_EQ(RetryAfterSeconds(0, 5000), 1);         // nothing held
  EXPECT_EQ(RetryAfterSeconds(5000, 5000), 1);      // 1.0 s of work
  EXPECT_EQ(RetryAfterSeconds(5001, 5000), 2);      // rounded up
  EXPECT_EQ(RetryAfterSeconds(120000, 10000), 12);  // 12 s of work
  EXPECT_EQ(RetryAfterSeconds(int64_t{1} << 40, 1.0), 60);
}

TEST(ServerTiming, ALongValueMovesToTheHeapUnchanged) {
  ServerTiming t;
  std::string want;
  for (int i = 0; i < 12; ++i) {  // ~300 characters: past the in-object buffer
    t.Add("phase" + std::to_string(i), (i + 1) * 1e-3);
    char entry[64];
    std::snprintf(entry, sizeof(entry), "%sphase%d;dur=%.3f", i ? ", " : "", i, (i + 1) * 1.0);
    want += entry;
  }
  EXPECT_GT(want.size(), 200u);
  EXPECT_EQ(t.value(), want);
}

TEST(ServerTiming, HeaderRoundTripsThroughTheBenchParser) {
  ServerTiming t;
  t.Add("tokenize", 61e-6);
  t.Add("replica", 1.9123e-3);
  EXPECT_EQ(t.value(), "tokenize;dur=0.061, replica;dur=1.912");
  std::vector<std::pair<std::string, std::vector<double>>> phases;
  AddServerTiming(t.value(), &phases);
  AddServerTiming("replica;dur=2.5, bad-entry, gateway;desc=\"x\";dur=3", &phases);
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_EQ(phases[0].first, "tokenize");
  EXPECT_EQ(phases[1].first, "replica");
  ASSERT_EQ(phases[1].second.size(), 2u);
  EXPECT_DOUBLE_EQ(phases[1].second[0], 1.912);
  EXPECT_DOUBLE_EQ(phases[1].second[1], 2.5);
  EXPECT_EQ(phases[2].first, "gateway");
  EXPECT_DOUBLE_EQ(phases[2].second[0], 3.0);
}

}  // namespace
}  // namespace petal::gateway
