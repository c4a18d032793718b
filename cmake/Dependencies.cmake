# Third-party dependencies, all from Debian packages (see docs/dependencies.md for why each).
find_package(Threads REQUIRED)
find_package(simdjson REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
find_package(CLI11 QUIET)
# Inference server: Debian packages libgrpc++-dev, protobuf-compiler-grpc, libprotobuf-dev
# (protobuf-compiler comes with them). Debian's gRPC ships a CMake config in lib/cmake/grpc.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
# Models by hub id (src/hub): libcurl (Debian libcurl4-openssl-dev) for HTTP(S), OpenSSL's
# libcrypto (libssl-dev) for sha256 / sha1.
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)
# HTTP gateway: Boost.Beast/Asio, header-only (Debian libboost-dev).
find_package(Boost REQUIRED)
if(PETAL_TESTS)
  find_package(GTest REQUIRED)
endif()
if(PETAL_BENCH)
  find_package(benchmark REQUIRED)
endif()
