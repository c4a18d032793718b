// The interactive API page, GET /docs: Swagger UI (the pinned PyPI package swagger-ui-bundle-v2,
// embedded into the binary at build time by cmake/embed_docs_assets.cmake) pointed at
// /openapi.json, with our own HTML and start-up script so that the page runs under a strict
// Content-Security-Policy (no inline script or style, nothing from another origin).
// Thread-safety: immutable.
#pragma once

#include <string_view>

namespace petal::gateway {

struct SwaggerUiFiles {
  std::string_view version;  // e.g. "swagger-ui-5.31.0"
  std::string_view bundle_js;
  std::string_view css;
};

// The embedded Swagger UI files, or null when the binary was built without them.
const SwaggerUiFiles* EmbeddedSwaggerUi();

// The Content-Security-Policy sent with /docs and its files.
inline constexpr std::string_view kDocsCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

struct DocsFile {
  std::string_view body;
  const char* content_type;
};

// The page or one of its files by request path (/docs, /docs/swagger-ui-bundle.js,
// /docs/swagger-ui.css, /docs/petal-docs.js); body empty when unknown or not embedded.
DocsFile FindDocsFile(std::string_view path);

}  // namespace petal::gateway
