// Where an engine's output rows land in a request's result (the engine loop's completion thread):
// dense rows encoded per the request's output format (wire/codec.h), or, for sparse (SPLADE)
// requests, kept as each row's non-zero entries, taken from the engine's sparse form as they
// are (no scan of vocabulary-sized rows) or from dense rows of an engine that answers those.
// Thread-safety: pure functions over the caller's result.
#pragma once

#include "engine/engine.h"
#include "server/engine_loop.h"

namespace petal::server {

// Sizes `result` for `rows` rows of result->format (set by the caller).
void SizeResult(int rows, EmbedResult* result);

// Stores output row `out_row` of `out` as row `row` of `result`.
void StoreRow(const Embeddings& out, int out_row, int row, EmbedResult* result);

// StoreRow for `count` consecutive rows; float32 rows that need no change are copied at once.
void StoreRows(const Embeddings& out, int out_row, int row, int count, EmbedResult* result);

}  // namespace petal::server
