#include "gateway/docs_page.h"

namespace petal::gateway {
namespace {

// No inline script or style anywhere: the CSP allows files from this origin only.
constexpr std::string_view kIndexHtml = R"(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Petal API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/petal-docs.js"></script>
</body>
</html>
)";

// Starts Swagger UI on this gateway's document. No validator badge (it would call out to another
// origin); "Authorize" takes the --api-key value and try-it-out sends it as a Bearer token.
constexpr std::string_view kStartJs = R"(// Petal: starts Swagger UI on /openapi.json.
window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
    displayRequestDuration: true,
    defaultModelsExpandDepth: 0
  });
});
)";

}  // namespace

DocsFile FindDocsFile(std::string_view path) {
  const SwaggerUiFiles* ui = EmbeddedSwaggerUi();
  if (path == "/docs/petal-docs.js") return {kStartJs, "text/javascript; charset=utf-8"};
  if (ui == nullptr) return {{}, "text/plain; charset=utf-8"};
  if (path == "/docs") return {kIndexHtml, "text/html; charset=utf-8"};
  if (path == "/docs/swagger-ui-bundle.js") {
    return {ui->bundle_js, "text/javascript; charset=utf-8"};
  }
  if (path == "/docs/swagger-ui.css") return {ui->css, "text/css; charset=utf-8"};
  return {{}, "text/plain; charset=utf-8"};
}

}  // namespace petal::gateway
