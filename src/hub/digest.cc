// sha256 / git-blob sha1 of files through OpenSSL's EVP interface (see digest.h).
#include "hub/digest.h"

#include <openssl/evp.h>

#include <cstdio>
#include <memory>
#include <vector>

namespace petal::hub {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

std::string Hex(const unsigned char* d, unsigned n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out += kHex[d[i] >> 4];
    out += kHex[d[i] & 15];
  }
  return out;
}

// Hashes `prefix` then the file's bytes with `md`.
StatusOr<std::string> DigestFile(const EVP_MD* md, const std::string& path, bool git_blob) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) return NotFound("cannot open " + path);
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), md, nullptr) != 1) return Internal("EVP init failed");
  if (git_blob) {
    if (std::fseek(f.get(), 0, SEEK_END) != 0) return Internal("cannot seek " + path);
    const long size = std::ftell(f.get());
    std::rewind(f.get());
    const std::string header = "blob " + std::to_string(size);
    EVP_DigestUpdate(ctx.get(), header.data(), header.size() + 1);  // with the '\0'
  }
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
    EVP_DigestUpdate(ctx.get(), buf.data(), n);
  }
  if (std::ferror(f.get())) return DataLoss("read error in " + path);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx.get(), out, &len);
  return Hex(out, len);
}

std::string DigestString(const EVP_MD* md, const std::string& prefix, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), md, nullptr);
  EVP_DigestUpdate(ctx.get(), prefix.data(), prefix.size());
  EVP_DigestUpdate(ctx.get(), data.data(), data.size());
  EVP_DigestFinal_ex(ctx.get(), out, &len);
  return Hex(out, len);
}

}  // namespace

StatusOr<std::string> Sha256OfFile(const std::string& path) {
  return DigestFile(EVP_sha256(), path, false);
}
StatusOr<std::string> GitBlobSha1OfFile(const std::string& path) {
  return DigestFile(EVP_sha1(), path, true);
}
std::string Sha256Hex(const std::string& data) { return DigestString(EVP_sha256(), "", data); }
std::string GitBlobSha1Hex(const std::string& data) {
  return DigestString(EVP_sha1(), "blob " + std::to_string(data.size()) + std::string(1, '\0'),
                      data);
}

}  // namespace petal::hub
