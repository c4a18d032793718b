// libFuzzer target: bytes as a Parquet footer (Thrift compact FileMetaData) through
// FooterRowCount, which `petal embed` runs on any input file. It must return (no crash, no
// unbounded recursion or read past the end); an accepted count is never negative.
#include <string_view>

#include "bulk/parquet_footer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto rows =
      petal::bulk::FooterRowCount(std::string_view(reinterpret_cast<const char*>(data), size));
  if (rows.ok()) PETAL_FUZZ_CHECK(*rows >= 0);
  return 0;
}
