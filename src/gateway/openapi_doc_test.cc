// The OpenAPI document against the route table: every row of Gateway::kRouteTable has its
// operation (same path and method) or is a listed /docs asset, every operation has its row, and
// an operation asks for the API key exactly when its row needs it, and documents the unknown
// model's 404 exactly when its row picks a model. The document's validity
// against the OpenAPI 3.1 schema and its examples against a running gateway are checked by
// tests/e2e/openapi_test.py.
#include "gateway/openapi_doc.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <set>
#include <string>

#include "gateway/docs_page.h"
#include "gateway/gateway.h"

namespace petal::gateway {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

std::string Method(boost::beast::http::verb v) {
  std::string m(boost::beast::http::to_string(v));
  for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return m;
}

class OpenApiDoc : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(parser_.parse(OpenApiJson().data(), OpenApiJson().size()).get(doc_),
              simdjson::SUCCESS);
    ASSERT_EQ(doc_["paths"].get_object().get(paths_), simdjson::SUCCESS);
    simdjson::dom::array assets;
    ASSERT_EQ(doc_["x-petal-assets"]["paths"].get_array().get(assets), simdjson::SUCCESS);
    for (element a : assets) assets_.insert(std::string(a.get_string().value()));
  }
  simdjson::dom::parser parser_;
  element doc_;
  object paths_;
  std::set<std::string> assets_;
};

TEST_F(OpenApiDoc, IsOpenApi31) {
  EXPECT_EQ(std::string(doc_["openapi"].get_string().value()), "3.1.0");
}

TEST_F(OpenApiDoc, EveryRouteHasItsOperationWithItsAuth) {
  for (const Route& r : Gateway::Routes()) {
    const std::string path(r.path);
    if (assets_.count(path)) {
      EXPECT_EQ(r.method, boost::beast::http::verb::get) << path;
      EXPECT_FALSE(r.needs_auth) << path << ": the page's files must load without a key";
      EXPECT_EQ(paths_[path].error(), simdjson::NO_SUCH_FIELD) << path << " is an asset";
      continue;
    }
    object op;
    ASSERT_EQ(paths_[path][Method(r.method)].get_object().get(op), simdjson::SUCCESS)
        << path << " " << Method(r.method) << " has no entry in src/gateway/openapi/paths/";
    simdjson::dom::array security;
    ASSERT_EQ(op["security"].get_array().get(security), simdjson::SUCCESS)
        << path << ": every operation states its security ([] for none)";
    bool api_key = false;
    for (element s : security) api_key |= s["apiKey"].error() == simdjson::SUCCESS;
    EXPECT_EQ(api_key, r.needs_auth) << path;
    EXPECT_EQ(security.size(), r.needs_auth ? 1u : 0u) << path;
    object responses;
    ASSERT_EQ(op["responses"].get_object().get(responses), simdjson::SUCCESS) << path;
    EXPECT_EQ(responses["401"].error() == simdjson::SUCCESS, r.needs_auth)
        << path << ": 401 is documented exactly for the routes that need a key";
    EXPECT_EQ(responses["404"].error() == simdjson::SUCCESS, r.tasks != kAnyTask || r.per_model)
        << path << ": 404 (unknown model) is documented exactly for the routes that pick a model";
  }
}

TEST_F(OpenApiDoc, EveryOperationAndAssetHasItsRoute) {
  for (auto [path, item] : paths_) {
    object methods;
    ASSERT_EQ(item.get_object().get(methods), simdjson::SUCCESS);
    for (auto [method, op] : methods) {
      const Route* r = Gateway::FindRoute(path);
      ASSERT_NE(r, nullptr) << path << " is documented but not in Gateway::kRouteTable";
      EXPECT_EQ(Method(r->method), std::string(method)) << path;
    }
  }
  for (const std::string& a : assets_) {
    const Route* r = Gateway::FindRoute(a);
    ASSERT_NE(r, nullptr) << a;
    if (EmbeddedSwaggerUi() != nullptr) {
      EXPECT_FALSE(FindDocsFile(a).body.empty()) << a;
    }
  }
}

TEST(DocsPage, ServesTheEmbeddedSwaggerUi) {
  const SwaggerUiFiles* ui = EmbeddedSwaggerUi();
  if (ui == nullptr) GTEST_SKIP() << "built without the Swagger UI files";
  EXPECT_TRUE(std::string(ui->version).starts_with("swagger-ui-5."));
  EXPECT_GT(ui->bundle_js.size(), 500000u);
  EXPECT_NE(ui->bundle_js.find("SwaggerUIBundle"), std::string_view::npos);
  EXPECT_NE(ui->css.find(".swagger-ui"), std::string_view::npos);
  const DocsFile page = FindDocsFile("/docs");
  EXPECT_NE(page.body.find("/docs/petal-docs.js"), std::string_view::npos);
  EXPECT_EQ(page.body.find("<script>"), std::string_view::npos) << "no inline script (CSP)";
  EXPECT_EQ(page.body.find("http"), std::string_view::npos) << "nothing from another origin";
  EXPECT_TRUE(FindDocsFile("/docs/nope").body.empty());
}

}  // namespace
}  // namespace petal::gateway
