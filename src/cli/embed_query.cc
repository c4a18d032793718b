// `petal embed` on the query route of an inference-free SPLADE model (see embed_query.h).
#include "cli/embed_query.h"

#include <simdjson.h>
#include <unistd.h>  // STDIN_FILENO

#include <cstdio>
#include <memory>

#include "cli/embed_sparse_rows.h"
#include "cli/input_line.h"
#include "cli/line_reader.h"
#include "gateway/sparse_static.h"
#include "model/config.h"
#include "model/router_folder.h"
#include "tokenizer/prompts.h"
#include "tokenizer/tokenizer.h"

namespace petal::cli {
namespace {

class QueryEncoder {
 public:
  QueryEncoder(const QueryEmbedOptions& o, const ModelConfig& config,
               std::shared_ptr<const gateway::SparseStaticQuery> query)
      : o_(o), query_(std::move(query)) {
    // The gateway's longest input (ServedModel::MaxInputTokens).
    max_length_ =
        config.max_seq_length > 0 ? config.max_seq_length : config.max_position_embeddings;
  }

  Status Init() {
    if (o_.dimensions != 0)
      return InvalidArgument("--dimensions does not apply to sparse (SPLADE) models");
    if (o_.ids) return Status::Ok();
    PETAL_ASSIGN_OR_RETURN(tokenizer_, Tokenizer::FromModelDir(TransformerDir(o_.model_dir)));
    PETAL_ASSIGN_OR_RETURN(const Prompts prompts, Prompts::Load(o_.model_dir));
    // The "query" prompt where the model has one; none else (not the default prompt).
    if (auto it = prompts.by_name.find("query"); it != prompts.by_name.end()) prefix_ = it->second;
    return Status::Ok();
  }

  // Encodes one input (a TEXT argument, or a JSON Lines line when `json`) and prints its line.
  void Answer(const std::string& where, std::string_view input, bool json) {
    auto ids = ToIds(input, json);
    if (!ids.ok()) {
      std::fprintf(stderr, "petal embed: %s: %s\n", where.c_str(), ids.status().message().c_str());
      std::fputs("null\n", stdout);
      failed_ = true;
    } else {
      const wire::SparseRow row = query_->Encode(*ids, o_.max_active_dims);
      FormatSparseEntries(row.indices, row.values, &line_);
      std::fwrite(line_.data(), 1, line_.size(), stdout);
    }
    std::fflush(stdout);
  }

  bool failed() const { return failed_; }

 private:
  StatusOr<std::vector<int32_t>> ToIds(std::string_view input, bool json) {
    const InputFormat format = o_.ids ? InputFormat::kTokenIds
                               : json ? InputFormat::kJsonString
                                      : InputFormat::kText;
    PETAL_ASSIGN_OR_RETURN(InputLine line, ParseInputLine(&parser_, input, format, query_->size()));
    if (o_.ids) {
      if (line.ids.empty()) return InvalidArgument("empty token sequence");
      if (line.ids.size() > static_cast<size_t>(max_length_)) {
        return InvalidArgument(std::to_string(line.ids.size()) + " tokens, more than the model's " +
                               std::to_string(max_length_));
      }
      return std::move(line.ids);
    }
    const std::string& text = line.text;
    if (text.empty()) return InvalidArgument("empty text");
    EncodeOptions eo;
    eo.add_special_tokens = false;  // as SparseStaticEmbedding tokenizes
    eo.max_length = max_length_;
    return tokenizer_->Encode(prefix_.empty() ? text : prefix_ + text, eo);
  }

  const QueryEmbedOptions& o_;
  std::shared_ptr<const gateway::SparseStaticQuery> query_;
  int max_length_ = 0;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string prefix_;  // the "query" prompt, if the model has one
  simdjson::dom::parser parser_;
  std::string line_;
  bool failed_ = false;
};

}  // namespace

std::optional<int> RunQueryRoute(const QueryEmbedOptions& o) {
  if (o.prompt_name != "query") return std::nullopt;
  auto config = LoadModelConfig(o.model_dir);
  // A config the engine path cannot load either: it reports the error.
  if (!config.ok() || config->task != ModelTask::kSparse) return std::nullopt;
  auto query = gateway::SparseStaticQuery::Load(o.model_dir, config->vocab_size);
  if (!query.ok()) {
    std::fprintf(stderr, "petal embed: %s\n", query.status().ToString().c_str());
    return 1;
  }
  if (*query == nullptr) return std::nullopt;  // no static query route: the engine path
  QueryEncoder encoder(o, *config, std::move(query).value());
  if (Status st = encoder.Init(); !st.ok()) {
    std::fprintf(stderr, "petal embed: %s\n", st.ToString().c_str());
    return 1;
  }
  if (!o.texts.empty()) {
    for (size_t i = 0; i < o.texts.size(); ++i) {
      encoder.Answer("text " + std::to_string(i + 1), o.texts[i], false);
    }
    return encoder.failed() ? 1 : 0;
  }
  LineReader reader(STDIN_FILENO);
  std::string line;
  int64_t line_no = 0;
  while (reader.Next(&line, /*wait=*/true)) {
    encoder.Answer("line " + std::to_string(++line_no), line, true);
  }
  return encoder.failed() ? 1 : 0;
}

}  // namespace petal::cli
