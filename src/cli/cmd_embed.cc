// `petal embed`: embeds texts (or pre-tokenized id arrays) with an engine (--backend) and prints
// one JSON array of floats per input, one per line (a sparse model: one {"indices", "values"}
// object, embed_sparse_rows.h). With no TEXT arguments it reads JSON Lines from
// stdin and answers line by line, flushing each answer, so that it can sit behind a pipe.
// Inputs that are already waiting are packed into one ragged batch; a lone interactive line is
// answered at once. A bad input line prints an error naming the line on stderr and `null` on
// stdout (so output line N still answers input line N), and the exit code is 1 at the end.
// `--prompt-name query` on an inference-free SPLADE model encodes queries without an engine
// (embed_query.h); --input/--output embed a dataset (embed_dataset_flags.h, bulk/).
#include <simdjson.h>
#include <unistd.h>  // STDIN_FILENO

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bulk/embed_dataset.h"
#include "cli/command.h"
#include "cli/embed_dataset_flags.h"
#include "cli/embed_query.h"
#include "cli/embed_sparse_rows.h"
#include "cli/engine_flags.h"
#include "cli/gpu_select.h"
#include "cli/input_line.h"
#include "cli/line_reader.h"
#include "cli/model_arg.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/engine_factory.h"
#include "gateway/task_routes.h"
#include "model/router_folder.h"
#include "tokenizer/prompts.h"
#include "tokenizer/tokenizer.h"
#include "wire/codec.h"

namespace petal::cli {
namespace {

struct EmbedOptions {
  std::string model_dir = "models/all-MiniLM-L6-v2";
  int dimensions = 0;
  int max_active_dims = 0;  // sparse models: keep each input's N largest values (0 = all)
  std::string prompt_name;  // sentence-transformers prompt; "" = the model's default prompt
  bool ids = false;
  int max_batch_texts = 64;
  int max_batch_tokens = 8192;
  std::vector<std::string> texts;
  std::string backend = "auto";
  int device = 0;
  CudaEngineOptions quant;  // only the --quantize / fp8 fields are read
  CpuEngineOptions cpu;     // --cpu-precision, --cpu-threads
};

// One input and, once run, its answer.
struct Item {
  std::string where;  // "line 3" or "text 2", for error messages
  StatusOr<std::vector<int32_t>> ids = std::vector<int32_t>{};
};

class Embedder {
 public:
  Embedder(const EmbedOptions& opts, std::unique_ptr<Engine> engine)
      : opts_(opts), engine_(std::move(engine)) {}

  Status Init() {
    const ModelConfig& c = engine_->config();
    if (c.task == ModelTask::kSparse && opts_.dimensions != 0)
      return InvalidArgument("--dimensions does not apply to sparse (SPLADE) models");
    if (opts_.dimensions < 0 || opts_.dimensions > c.hidden_size) {
      return InvalidArgument("--dimensions " + std::to_string(opts_.dimensions) +
                             " is outside [1, " + std::to_string(c.hidden_size) + "]");
    }
    if (opts_.ids) return Status::Ok();
    PETAL_ASSIGN_OR_RETURN(tokenizer_, Tokenizer::FromModelDir(TransformerDir(c.model_dir)));
    // The gateway's prompt rule (tokenizer/prompts.h), so the CLI embeds the same text as HTTP.
    PETAL_ASSIGN_OR_RETURN(const Prompts prompts, Prompts::Load(c.model_dir));
    PETAL_ASSIGN_OR_RETURN(prefix_, prompts.Prefix(opts_.prompt_name));
    return Status::Ok();
  }

  // Turns one input (a raw TEXT argument, or a JSON Lines line) into token ids.
  Item Prepare(std::string where, std::string_view input, bool json) {
    Item item;
    item.where = std::move(where);
    item.ids = ToIds(input, json);
    if (item.ids.ok()) {
      const ModelConfig& c = engine_->config();
      const auto& ids = *item.ids;
      if (ids.empty()) {
        item.ids = InvalidArgument("empty token sequence");
      } else if (static_cast<int>(ids.size()) > c.max_position_embeddings) {
        item.ids = InvalidArgument(std::to_string(ids.size()) + " tokens, more than the model's " +
                                   std::to_string(c.max_position_embeddings) + " positions");
      } else if (auto bad = std::find_if(ids.begin(), ids.end(),
                                         [&](int32_t id) { return id >= c.vocab_size; });
                 bad != ids.end()) {
        // A tokenizer may know more tokens than the model has embeddings (--ids are checked
        // when parsed); this line fails, not the batch it would join.
        item.ids =
            InvalidArgument("token id " + std::to_string(*bad) + " is outside the vocabulary [0, " +
                            std::to_string(c.vocab_size) + ")");
      }
    }
    return item;
  }

  // Runs the valid items as one ragged batch and prints one line per item, in order.
  void Run(const std::vector<Item>& items) {
    Batch batch;
    batch.cu_seqlens.push_back(0);
    for (const Item& it : items) {
      if (it.ids.ok()) batch.Add(*it.ids);
    }
    StatusOr<Embeddings> out = Embeddings{};
    SetSparseTopK(opts_.max_active_dims, &batch);
    if (batch.num_seqs() > 0) out = engine_->Embed(batch);
    int row = 0;
    std::string line;
    for (const Item& it : items) {
      const Status& st = !it.ids.ok() ? it.ids.status() : out.status();
      if (!st.ok()) {
        std::fprintf(stderr, "petal embed: %s: %s\n", it.where.c_str(), st.message().c_str());
        std::fputs("null\n", stdout);
        failed_ = true;
      } else {
        if (engine_->config().task == ModelTask::kSparse) {
          FormatSparseRow(*out, row, &line);
        } else {
          FormatRow(out->row(row), out->dim, &line);
        }
        std::fwrite(line.data(), 1, line.size(), stdout);
      }
      if (it.ids.ok()) ++row;
      std::fflush(stdout);
    }
  }

  bool failed() const { return failed_; }
  int BatchTokens(const std::vector<Item>& items) const {
    int n = 0;
    for (const Item& it : items) n += it.ids.ok() ? static_cast<int>(it.ids->size()) : 0;
    return n;
  }

 private:
  StatusOr<std::vector<int32_t>> ToIds(std::string_view input, bool json) {
    const InputFormat format = opts_.ids ? InputFormat::kTokenIds
                               : json    ? InputFormat::kJsonString
                                         : InputFormat::kText;
    PETAL_ASSIGN_OR_RETURN(InputLine line,
                           ParseInputLine(&parser_, input, format, engine_->config().vocab_size));
    if (opts_.ids) return std::move(line.ids);
    const std::string& text = line.text;
    EncodeOptions eo;
    eo.max_length = engine_->config().max_seq_length;
    return tokenizer_->Encode(prefix_.empty() ? text : prefix_ + text, eo);
  }

  // "[f0,f1,...]\n" with Matryoshka truncation, re-normalised by the server's rule
  // (wire/codec.h), so the CLI prints what the gateway returns as float32.
  void FormatRow(const float* v, int dim, std::string* line) const {
    wire::OutputFormat f;
    f.dims = opts_.dimensions > 0 ? opts_.dimensions : dim;
    f.normalize = wire::RenormalizeByDefault(engine_->config().normalize, f.dims, dim);
    row_.resize(f.dims);
    float scale;
    wire::EncodeRow(v, f, reinterpret_cast<uint8_t*>(row_.data()), &scale);
    line->assign("[");
    char num[32];
    for (int i = 0; i < f.dims; ++i) {
      const int len = std::snprintf(num, sizeof(num), i ? ",%.9g" : "%.9g", row_[i]);
      line->append(num, len);
    }
    line->append("]\n");
  }

  const EmbedOptions& opts_;
  std::unique_ptr<Engine> engine_;
  simdjson::dom::parser parser_;
  bool failed_ = false;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string prefix_;              // the prompt prepended to every text
  mutable std::vector<float> row_;  // FormatRow's scratch
};

int RunEmbed(const EmbedOptions& opts) {
  // --prompt-name query on an inference-free SPLADE model: its static query route, no engine.
  if (auto rc = RunQueryRoute({opts.model_dir, opts.prompt_name, opts.dimensions,
                               opts.max_active_dims, opts.ids, opts.texts})) {
    return *rc;
  }
  EngineOptions eo;
  eo.backend = opts.backend;
  eo.cuda.device = opts.device;
  eo.cuda.quantize = opts.quant.quantize;
  eo.cuda.fp8_min_tokens = opts.quant.fp8_min_tokens;
  eo.cuda.fp8_layers = opts.quant.fp8_layers;
  eo.cuda.fp8_gate = opts.quant.fp8_gate;
  eo.cuda.fp8_scales = opts.quant.fp8_scales;
  eo.cpu = opts.cpu;
  // A batch may end one input past --max-batch-tokens; leave room for a long last input.
  eo.cuda.max_tokens = std::max(2 * opts.max_batch_tokens, 16384);
  // ... however long that input may be: up to the model's whole context (32K for Qwen3 shapes).
  if (auto cfg = LoadModelConfig(opts.model_dir); cfg.ok()) {
    eo.cuda.max_tokens =
        std::max(eo.cuda.max_tokens, opts.max_batch_tokens + cfg->max_position_embeddings);
  }
  eo.cuda.max_seqs = opts.max_batch_texts + 1;
  auto engine = CreateEngine(opts.model_dir, eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "petal embed: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  if (const ModelTask task = (*engine)->config().task;
      task != ModelTask::kEmbed && task != ModelTask::kSparse) {
    // Not an embedder: say what it is and where it is served (the gateway's task table).
    std::fprintf(stderr, "petal embed: %s is %s, not an embedder: serve it and use %s\n",
                 opts.model_dir.c_str(), std::string(gateway::TaskNoun(task)).c_str(),
                 gateway::ServedRoutes(gateway::Gateway::Routes(), task).c_str());
    return 2;
  }
  if (opts.max_active_dims != 0 && (*engine)->config().task != ModelTask::kSparse) {
    std::fprintf(stderr, "petal embed: --max-active-dims is for sparse (SPLADE) models\n");
    return 2;
  }
  Embedder embedder(opts, std::move(engine).value());
  if (Status st = embedder.Init(); !st.ok()) {
    std::fprintf(stderr, "petal embed: %s\n", st.ToString().c_str());
    return 1;
  }
  std::vector<Item> items;
  auto full = [&] {
    return static_cast<int>(items.size()) >= opts.max_batch_texts ||
           embedder.BatchTokens(items) >= opts.max_batch_tokens;
  };
  if (!opts.texts.empty()) {
    // Arguments are raw text, or in --ids mode JSON arrays.
    for (size_t i = 0; i < opts.texts.size(); ++i) {
      items.push_back(embedder.Prepare("text " + std::to_string(i + 1), opts.texts[i], false));
      if (full()) {
        embedder.Run(items);
        items.clear();
      }
    }
    if (!items.empty()) embedder.Run(items);
    return embedder.failed() ? 1 : 0;
  }
  LineReader reader(STDIN_FILENO);
  std::string line;
  int64_t line_no = 0;
  while (reader.Next(&line, /*wait=*/true)) {
    items.push_back(embedder.Prepare("line " + std::to_string(++line_no), line, true));
    while (!full() && reader.Next(&line, /*wait=*/false)) {
      items.push_back(embedder.Prepare("line " + std::to_string(++line_no), line, true));
    }
    embedder.Run(items);
    items.clear();
  }
  return embedder.failed() ? 1 : 0;
}

std::function<int()> SetupEmbed(CLI::App* sub) {
  auto opts = std::make_shared<EmbedOptions>();
  auto data = std::make_shared<bulk::DatasetOptions>();
  auto shard = std::make_shared<std::string>();
  auto gpus = std::make_shared<std::string>();
  AddDatasetFlags(sub, data.get(), shard.get(), gpus.get());
  sub->add_option("--model", opts->model_dir,
                  "Model folder (Hugging Face layout) or hub id ORG/NAME[@REV]")
      ->capture_default_str();
  sub->add_option(
      "--dimensions", opts->dimensions,
      "Matryoshka: keep the first N dimensions (re-normalised if the model normalises)");
  sub->add_option("--max-active-dims", opts->max_active_dims,
                  "Sparse (SPLADE) models: keep each input's N largest values")
      ->check(CLI::PositiveNumber);
  sub->add_option("--prompt-name", opts->prompt_name,
                  "sentence-transformers prompt to prepend (default: the model's default prompt, "
                  "as the gateway does); `query` on an inference-free SPLADE (Router) model: "
                  "encode as queries, with its static query module (no engine)");
  sub->add_option("--backend", opts->backend,
                  "Engine backend: auto (cuda if a GPU is visible), cpu, cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--device", opts->device, "CUDA device index")->capture_default_str();
  AddQuantizeFlags(sub, &opts->quant);
  AddCpuFlags(sub, &opts->cpu);
  sub->add_flag("--ids", opts->ids,
                "Inputs are JSON arrays of token ids (pre-tokenized, special tokens included)");
  sub->add_option("--max-batch-texts", opts->max_batch_texts, "Most inputs per batch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-batch-tokens", opts->max_batch_tokens,
                  "Tokens per batch before it is run (a batch may end one input past it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  // TEXT arguments are taken from the leftovers rather than a positional option because CLI11
  // would split an argument that looks like "[1,2,3]" (an --ids input) into a list.
  sub->allow_extras();
  sub->footer(
      "TEXT...: texts to embed (--ids: JSON arrays of ids); none: read JSON Lines from stdin\n");
  return [opts, sub, data, shard, gpus] {
    if (!data->input.empty() || !data->output.empty()) {
      if (data->input.empty() || data->output.empty() || !sub->remaining().empty()) {
        std::fprintf(stderr, "petal embed: --input and --output go together, without TEXT\n");
        return 2;
      }
      if (!shard->empty() && !bulk::ParseShard(*shard, data.get())) {
        std::fprintf(stderr, "petal embed: --shard must be I/N with 0 <= I < N\n");
        return 2;
      }
      if (!gpus->empty()) {
        auto g = ResolveGpus(*gpus, CudaDeviceCount(), "");
        if (!g.ok()) {
          std::fprintf(stderr, "petal embed: %s\n", g.status().message().c_str());
          return 2;
        }
        for (const auto& d : *g) data->devices.push_back(std::stoi(d));
      }
      if (!ResolveModelFlag("petal embed", &opts->model_dir)) return 1;
      data->model_dir = opts->model_dir;
      data->dimensions = opts->dimensions;
      data->prompt_name = opts->prompt_name;
      data->engine.backend = data->devices.empty() ? opts->backend : "cuda";
      data->engine.cuda = opts->quant;
      data->engine.cpu = opts->cpu;
      data->engine.cuda.device = opts->device;
      bulk::SizeEngineBatches(data.get(),
                              sub->count("--max-batch-tokens") > 0 ? opts->max_batch_tokens : 0,
                              sub->count("--max-batch-texts") > 0 ? opts->max_batch_texts : 0);
      return bulk::RunEmbedDataset(*data);
    }
    for (const std::string& arg : sub->remaining()) {
      if (arg.size() > 1 && arg[0] == '-' && arg[1] == '-') {
        std::fprintf(stderr, "petal embed: unknown option '%s'\n", arg.c_str());
        return 2;
      }
      opts->texts.push_back(arg);
    }
    if (!ResolveModelFlag("petal embed", &opts->model_dir)) return 1;
    return RunEmbed(*opts);
  };
}

}  // namespace
}  // namespace petal::cli

PETAL_REGISTER_COMMAND(embed, "embed", "Embed texts and print one JSON array per line",
                       petal::cli::SetupEmbed);
