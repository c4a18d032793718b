// `petal tokenize`: prints token ids (and token strings) for texts given as arguments, or for
// JSON Lines read from stdin (one JSON string per line, one output line per input line).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/model_arg.h"
#include "tokenizer/json_text.h"
#include "tokenizer/tokenizer.h"

namespace {

struct TokenizeArgs {
  std::string model = "models/all-MiniLM-L6-v2";
  std::vector<std::string> texts;
  bool ids_only = false;
  bool no_special = false;
  bool split_special = false;
  bool truncate_left = false;
  int truncate = 0;
};

std::string FormatResult(const petal::Tokenizer& tok, const std::vector<int32_t>& ids,
                         bool ids_only) {
  std::string line = ids_only ? "[" : "{\"ids\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line.push_back(',');
    line += std::to_string(ids[i]);
  }
  line.push_back(']');
  if (!ids_only) {
    line += ",\"tokens\":[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) line.push_back(',');
      petal::AppendJsonString(tok.IdToToken(ids[i]), &line);
    }
    line += "]}";
  }
  return line;
}

int RunTokenize(const TokenizeArgs& a) {
  const bool is_file = a.model.size() >= 5 && a.model.compare(a.model.size() - 5, 5, ".json") == 0;
  auto tok =
      is_file ? petal::Tokenizer::FromFile(a.model) : petal::Tokenizer::FromModelDir(a.model);
  if (!tok.ok()) {
    std::fprintf(stderr, "petal tokenize: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  petal::EncodeOptions opts;
  opts.add_special_tokens = !a.no_special;
  opts.max_length = a.truncate;
  opts.truncate_left = a.truncate_left;
  opts.split_special_tokens = a.split_special;
  petal::EncodeScratch scratch;
  std::vector<int32_t> ids;
  auto encode_one = [&](std::string_view text) -> bool {
    petal::Status st = (*tok)->EncodeInto(text, opts, &scratch, &ids);
    if (!st.ok()) {
      std::fprintf(stderr, "petal tokenize: %s\n", st.ToString().c_str());
      return false;
    }
    std::string line = FormatResult(**tok, ids, a.ids_only);
    line.push_back('\n');
    std::fwrite(line.data(), 1, line.size(), stdout);
    return true;
  };
  if (!a.texts.empty()) {
    for (const std::string& t : a.texts) {
      if (!encode_one(t)) return 1;
    }
    return 0;
  }
  std::ios::sync_with_stdio(false);
  std::string line, text;
  size_t lineno = 0;
  while (std::getline(std::cin, line)) {
    ++lineno;
    if (line.empty()) continue;
    petal::Status st = petal::DecodeJsonStringLine(line, &text);
    if (!st.ok()) {
      std::fprintf(stderr, "petal tokenize: stdin line %zu: %s\n", lineno, st.ToString().c_str());
      return 1;
    }
    if (!encode_one(text)) return 1;
    std::fflush(stdout);  // One answer per line, so it can drive a pipe interactively.
  }
  return 0;
}

std::function<int()> SetupTokenize(CLI::App* sub) {
  auto args = std::make_shared<TokenizeArgs>();
  sub->add_option("--model", args->model,
                  "Model folder holding tokenizer.json (or the file), or hub id ORG/NAME[@REV]");
  sub->add_option("text", args->texts, "Texts; with none, JSON Lines are read from stdin");
  sub->add_flag("--ids-only", args->ids_only, "Print one JSON array of ids per text");
  sub->add_flag("--no-special", args->no_special, "Leave out the post-processor's special tokens");
  sub->add_option("--truncate", args->truncate, "Truncate to N ids, special tokens included");
  sub->add_flag("--truncate-left", args->truncate_left, "Truncate from the left");
  sub->add_flag("--split-special-tokens", args->split_special,
                "Treat special-token strings in the text as plain text");
  return [args] {
    if (!petal::cli::ResolveModelFlag("petal tokenize", &args->model)) return 1;
    return RunTokenize(*args);
  };
}

}  // namespace

PETAL_REGISTER_COMMAND(tokenize, "tokenize", "Print the token ids of texts", SetupTokenize);
