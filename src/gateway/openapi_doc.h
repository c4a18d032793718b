// The gateway's OpenAPI 3.1 document (GET /openapi.json), assembled at build time by
// cmake/assemble_openapi.cmake from src/gateway/openapi/base.json and one file per route in
// src/gateway/openapi/paths/. To document a new route, add its file there; gateway_unit_test
// checks that the document and Gateway::kRouteTable name the same routes, methods and auth.
// Thread-safety: immutable.
#pragma once

#include <string_view>

namespace petal::gateway {

// The document as JSON text.
std::string_view OpenApiJson();

}  // namespace petal::gateway
