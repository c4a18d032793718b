// The row count of a Parquet file, read from its footer without Arrow: `petal embed` needs it
// before anything else (shards, the manifest, the reader's range), and asking the pyarrow helper
// cost one more Python start-up (0.2-0.5 s) on the critical path. The footer is a Thrift
// compact-protocol FileMetaData struct; only its top level is walked, every other field skipped.
// Thread-safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace petal::bulk {

// num_rows (field 3) of a serialised FileMetaData. Errors name what is malformed.
StatusOr<int64_t> FooterRowCount(std::string_view footer);

// The row count of the Parquet file at `path`: checks the PAR1 magic at both ends and reads the
// footer. An encrypted footer (PARE) is refused with a clear message.
StatusOr<int64_t> ParquetRowCount(const std::string& path);

}  // namespace petal::bulk
