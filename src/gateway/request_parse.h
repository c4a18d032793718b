// Parsing of the gateway's JSON request bodies (OpenAI /v1/embeddings, TEI-style /embed,
// /tokenize, /v1/score) with simdjson into plain structs. Every error carries the HTTP status,
// a message naming the offending field, and the field (OpenAI's `param`). Only syntax and types
// are checked here; limits that need the model (lengths, dimensions) are checked by the routes.
// Thread-safety: pure functions (each thread uses its own simdjson parser).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace petal::gateway {

struct RequestError {
  unsigned http_status = 400;
  std::string message;
  std::string param;  // the offending field, e.g. "input"; may be empty
};

// Output element types offered over HTTP (see docs/api.md for their scaling).
enum class OutputType { kFloat32, kFloat16, kInt8, kUint8, kBinary, kUbinary };
const char* OutputTypeName(OutputType t);

// A request body parsed by a simdjson parser of its own, taken from a recycled list and given
// back when its holder lets go (request_json.cc): the strings of the parsed document live as long
// as the ParsedBodyHold, wherever it moves, without a copy of each.
struct ParsedBody;
struct ParsedBodyRelease {
  void operator()(ParsedBody* b) const noexcept;
};
using ParsedBodyHold = std::unique_ptr<ParsedBody, ParsedBodyRelease>;

// The inputs of one request: texts, or pre-tokenized sequences (exactly one is non-empty).
// Move-only. Parsed from a body (ParseOpenAiEmbed, ParseTeiEmbed), `texts` view the parsed
// document that `body` holds: valid while this Inputs, or the one it is moved into, lives. A
// route that fills `texts` itself keeps the viewed strings alive while it uses them; a list moved
// out of an Inputs must not outlive it (copy the texts into strings instead).
struct Inputs {
  std::vector<std::string_view> texts;
  std::vector<std::vector<int32_t>> ids;
  bool pretokenized = false;
  ParsedBodyHold body;  // what `texts` view; null when they view the route's own strings
  size_t size() const { return pretokenized ? ids.size() : texts.size(); }
};

// The first token id of `ids` (the request's `field`; ids are non-negative once parsed) that is not
// below `vocab`: a 400 naming `field[i]`, the id and the vocabulary size. The routes call it with
// the served model's vocabulary.
std::optional<RequestError> CheckVocabulary(const std::vector<std::vector<int32_t>>& ids,
                                            int64_t vocab, const std::string& field);

struct EmbedParams {
  Inputs inputs;
  std::string model;        // as sent (echoed back); may be empty
  uint32_t dimensions = 0;  // 0 = full
  bool base64 = false;      // OpenAI encoding_format
  OutputType output = OutputType::kFloat32;
  bool truncate = false;          // cut texts longer than the model's maximum instead of failing
  bool truncate_left = false;     // TEI truncation_direction "left"
  std::optional<bool> normalize;  // unset = the model's own setting
  std::string prompt_name;        // sentence-transformers prompt to prepend
  std::string input_type;  // "query" | "document": the prompt of that name, if the model has one
  // "long_input": "mean" (OpenAI route): an input past the model's length is embedded in windows
  // and their pooled vectors averaged, token-weighted (docs/api.md); default: 413.
  bool long_input_mean = false;
  // "sparse": true (OpenAI route, sparse models only): each input's non-zero entries, as
  // {"indices", "values"} (docs/api.md).
  bool sparse = false;
  // "max_active_dims" (sparse embeddings only, both routes): keep each input's largest values
  // only (sentence-transformers SparseEncoder's name); 0 = every non-zero.
  uint32_t max_active_dims = 0;
};

// The top-level "model" string of a request body, as every route's parser reads it (the first
// "model" key, unescaped); empty when the body has none, is not a JSON object, or its "model" is
// not a string (the route's own parser reports those). For a gateway serving several models,
// which must know the model before the route's parser runs: cheaper than that parse (the body is
// indexed, not built into a document).
std::string PeekModelField(std::string_view body);

// OpenAI's POST /v1/embeddings body. `max_inputs` bounds the array (beyond: 413).
std::optional<RequestError> ParseOpenAiEmbed(std::string_view body, size_t max_inputs,
                                             EmbedParams* out);
// TEI-style POST /embed body (`inputs`, `normalize`, `truncate`, ...).
std::optional<RequestError> ParseTeiEmbed(std::string_view body, size_t max_inputs,
                                          EmbedParams* out);

// POST /v1/contextualizedembeddings (late chunking): documents, each a list of chunk strings.
// Limits (docs/api.md; beyond them 413 naming the field): documents per request, chunks per
// document, chunks per request; tokens per document are checked by the route.
inline constexpr size_t kMaxContextDocuments = 512;
inline constexpr size_t kMaxChunksPerDocument = 1024;
inline constexpr size_t kMaxContextChunks = 16384;
inline constexpr int64_t kMaxDocumentTokens = 262144;
struct ContextualParams {
  std::vector<std::vector<std::string>> documents;
  std::string model;
  uint32_t dimensions = 0;
  bool base64 = false;
  OutputType output = OutputType::kFloat32;
  int overlap = -1;  // "window_overlap" tokens for documents past the model's length; -1: default
  std::string prompt_name;
  std::string input_type;
};
std::optional<RequestError> ParseContextualEmbed(std::string_view body, ContextualParams* out);

struct TokenizeParams {
  std::vector<std::string> texts;
  bool add_special_tokens = true;
  bool batch = false;  // `inputs` was an array
};
std::optional<RequestError> ParseTokenize(std::string_view body, size_t max_inputs,
                                          TokenizeParams* out);

struct ScoreParams {
  std::string model;
  std::string query;
  std::vector<std::string> documents;
  size_t top_k = 0;       // 0 = all, in document order
  bool truncate = false;  // ranking models: cut pairs over the model's length
};
std::optional<RequestError> ParseScore(std::string_view body, size_t max_inputs, ScoreParams* out);

// A rerank request, in either shape (docs/api.md):
//   TEI POST /rerank: {"query", "texts", "raw_scores", "return_text", "truncate"};
//   Cohere / Jina POST /v1/rerank: {"model", "query", "documents" (strings, or objects with a
//   "text"), "top_n", "return_documents", "truncate"}.
// Both accept "instruction" (the <Instruct> line of an LM reranker's prompt).
struct RerankParams {
  std::string model;
  std::string query;
  std::vector<std::string> documents;
  bool raw_scores = false;   // TEI: the logit itself rather than the model's activation of it
  bool return_text = false;  // TEI return_text / Cohere return_documents
  bool truncate = false;     // cut pairs over the model's length (TEI default false; Cohere true)
  size_t top_n = 0;          // 0 = every document
  std::string instruction;
};
std::optional<RequestError> ParseTeiRerank(std::string_view body, size_t max_inputs,
                                           RerankParams* out);
std::optional<RequestError> ParseCohereRerank(std::string_view body, size_t max_inputs,
                                              RerankParams* out);

// A classification request (sequence classifiers; docs/api.md), in either shape:
//   TEI POST /predict: {"inputs": "text" | ["text", "text_pair"] (one pair) |
//       [input, ...] (a batch; each "text", ["text"] or ["text", "text_pair"]),
//       "raw_scores", "truncate"};
//   vLLM POST /classify: {"model", "input": "text" | ["text", ...], "activation", "truncate"}.
// Parsed by request_parse_classify.cc.
struct ClassifyParams {
  std::vector<std::string> texts;   // one per input: the text, or a pair's first text
  std::vector<std::string> second;  // one per input when has_pairs: a pair's second text, or ""
  std::vector<uint8_t> is_pair;     // one per input when has_pairs
  bool has_pairs = false;
  bool single = false;      // /predict: `inputs` was one text or one pair (one list answers it)
  bool raw_scores = false;  // the logits themselves rather than the probabilities
  bool truncate = false;    // cut inputs over the model's length instead of a 413
  std::string model;
};
std::optional<RequestError> ParsePredict(std::string_view body, size_t max_inputs,
                                         ClassifyParams* out);
std::optional<RequestError> ParseClassify(std::string_view body, size_t max_inputs,
                                          ClassifyParams* out);

}  // namespace petal::gateway
