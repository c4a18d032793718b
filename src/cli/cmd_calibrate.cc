// `petal calibrate --model M --texts FILE --out DIR`: static fp8 activation scales. Runs the
// calibration texts through the model (CUDA engine on its bf16 path, or the CPU fp32 engine),
// records every fp8 GEMM input's per-token absolute maximum through the engine's activation
// observer (model/activation_observer.h), reduces them per layer and input to one amax (the
// maximum, or --percentile P of the per-token maxima) and writes DIR/fp8_scales.json
// (model/fp8_scales.h) for `--quantize fp8 --fp8-scales DIR`. Progress goes to stderr, the
// summary to stdout.
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/model_arg.h"
#include "common/file_util.h"
#include "engine/calibrate.h"
#include "engine/engine_factory.h"
#include "model/fp8_scales.h"
#include "tokenizer/prompts.h"
#include "tokenizer/tokenizer.h"

namespace petal::cli {
namespace {

struct CalibrateOptions {
  std::string model_dir;
  std::string texts_path;
  std::string out_dir;
  double percentile = 100.0;
  bool ids = false;
  int max_texts = 0;
  int max_length = 0;
  int batch_tokens = 8192;
  int batch_seqs = 256;
  std::string prompt_name;
  std::string backend = "auto";
  int device = 0;
};

// The calibration inputs as token ids: one per non-empty line of the file. A line is a JSON
// string or {"text": ...} object when the file ends in .jsonl, a JSON array of ids with --ids,
// and raw text otherwise.
StatusOr<std::vector<std::vector<int32_t>>> ReadInputs(const CalibrateOptions& o,
                                                       const ModelConfig& config) {
  std::ifstream in(o.texts_path);
  if (!in) return NotFound("--texts: cannot open " + o.texts_path);
  const bool jsonl =
      o.texts_path.size() >= 6 && o.texts_path.compare(o.texts_path.size() - 6, 6, ".jsonl") == 0;
  std::unique_ptr<Tokenizer> tok;
  std::string prefix;
  EncodeOptions eo;
  eo.max_length = o.max_length > 0 ? o.max_length : config.max_seq_length;
  if (!o.ids) {
    PETAL_ASSIGN_OR_RETURN(tok, Tokenizer::FromModelDir(config.model_dir));
    PETAL_ASSIGN_OR_RETURN(const Prompts prompts, Prompts::Load(config.model_dir));
    PETAL_ASSIGN_OR_RETURN(prefix, prompts.Prefix(o.prompt_name));
  }
  simdjson::dom::parser parser;
  std::vector<std::vector<int32_t>> seqs;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (o.max_texts > 0 && static_cast<int>(seqs.size()) >= o.max_texts) break;
    const std::string where = o.texts_path + ":" + std::to_string(line_no);
    std::vector<int32_t> ids;
    if (o.ids || jsonl) {
      simdjson::dom::element doc;
      if (parser.parse(line).get(doc) != simdjson::SUCCESS)
        return InvalidArgument(where + ": not valid JSON");
      if (o.ids) {
        simdjson::dom::array arr;
        if (doc.get_array().get(arr) != simdjson::SUCCESS)
          return InvalidArgument(where + ": expected a JSON array of token ids");
        for (auto v : arr) {
          int64_t id;
          if (v.get_int64().get(id) != simdjson::SUCCESS || id < 0 || id >= config.vocab_size)
            return InvalidArgument(where + ": token ids must be integers in [0, " +
                                   std::to_string(config.vocab_size) + ")");
          ids.push_back(static_cast<int32_t>(id));
        }
        if (eo.max_length > 0 && static_cast<int>(ids.size()) > eo.max_length)
          ids.resize(eo.max_length);
      } else {
        std::string_view s;
        if (doc.get_string().get(s) != simdjson::SUCCESS &&
            doc["text"].get_string().get(s) != simdjson::SUCCESS)
          return InvalidArgument(where + ": expected a JSON string or an object with \"text\"");
        PETAL_ASSIGN_OR_RETURN(ids, tok->Encode(prefix + std::string(s), eo));
      }
    } else {
      PETAL_ASSIGN_OR_RETURN(ids, tok->Encode(prefix + line, eo));
    }
    if (ids.empty()) return InvalidArgument(where + ": no tokens");
    seqs.push_back(std::move(ids));
  }
  if (seqs.empty()) return InvalidArgument("--texts: " + o.texts_path + " holds no texts");
  return seqs;
}

int RunCalibrate(const CalibrateOptions& o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "petal calibrate: %s\n", s.ToString().c_str());
    return 1;
  };
  auto config = LoadModelConfig(o.model_dir);
  if (!config.ok()) return fail(config.status());
  if (config->architecture != Architecture::kQwen3)
    return fail(
        InvalidArgument(std::string("fp8 calibration is implemented for Qwen3 models, not ") +
                        ArchitectureName(config->architecture)));
  auto seqs = ReadInputs(o, *config);
  if (!seqs.ok()) return fail(seqs.status());
  size_t longest = 0;
  int64_t total = 0;
  for (const auto& s : *seqs) longest = std::max(longest, s.size()), total += s.size();
  std::fprintf(stderr, "[calibrate] %zu texts, %lld tokens (longest %zu) from %s\n", seqs->size(),
               static_cast<long long>(total), longest, o.texts_path.c_str());

  Fp8Calibrator calibrator(config->num_layers, o.percentile);
  EngineOptions eo;
  eo.backend = o.backend;
  eo.observer = &calibrator;
  eo.cuda.device = o.device;
  eo.cuda.use_graphs = false;
  eo.cuda.max_tokens = std::max(o.batch_tokens, static_cast<int>(longest));
  eo.cuda.max_seqs = o.batch_seqs;
  auto engine = CreateEngine(o.model_dir, eo);
  if (!engine.ok()) return fail(engine.status());
  std::fprintf(stderr, "[calibrate] engine: %s (%s), statistic: %s\n", (*engine)->backend().c_str(),
               (*engine)->backend() == "cuda" ? "bf16 path" : "fp32 reference",
               o.percentile >= 100
                   ? "max of per-token amax"
                   : ("p" + std::to_string(o.percentile) + " of per-token amax").c_str());
  const auto t0 = std::chrono::steady_clock::now();
  auto scales = RunCalibration(
      engine->get(), &calibrator, *seqs, o.batch_tokens, o.batch_seqs, o.percentile,
      [&](const CalibrationProgress& p) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "[calibrate] batch %d/%d: %lld texts, %lld tokens (%.0f%%), %.1f s\n",
                     p.batch, p.batches, static_cast<long long>(p.texts),
                     static_cast<long long>(p.tokens),
                     100.0 * p.tokens / std::max<int64_t>(total, 1), s);
      });
  if (!scales.ok()) return fail(scales.status());
  engine->reset();
  auto store = WeightStore::Open(o.model_dir);
  if (!store.ok()) return fail(store.status());
  scales->model = FingerprintModel(*config, **store);
  Status w = WriteFp8Scales(o.out_dir, *scales);
  if (!w.ok()) return fail(w);
  std::printf("fp8 activation scales of %s (%s, %d layers), %lld texts / %lld tokens on %s:\n%s",
              o.model_dir.c_str(), scales->model.architecture.c_str(), scales->model.num_layers,
              static_cast<long long>(scales->texts), static_cast<long long>(scales->tokens),
              scales->backend.c_str(), SummarizeScales(*scales).c_str());
  std::printf("wrote %s (use: --quantize fp8 --fp8-scales %s)\n",
              JoinPath(o.out_dir, kFp8ScalesFile).c_str(), o.out_dir.c_str());
  return 0;
}

std::function<int()> SetupCalibrate(CLI::App* sub) {
  auto o = std::make_shared<CalibrateOptions>();
  sub->add_option("--model", o->model_dir,
                  "Model folder (Hugging Face layout) or hub id ORG/NAME[@REV]; Qwen3 models")
      ->required();
  sub->add_option("--texts", o->texts_path,
                  "Calibration inputs, one per line: raw text; JSON strings or {\"text\": ...} "
                  "if the name ends in .jsonl; JSON arrays of token ids with --ids")
      ->required();
  sub->add_option("--out", o->out_dir, "Folder to write fp8_scales.json into (created)")
      ->required();
  sub->add_option("--percentile", o->percentile,
                  "Per layer and input: the P-th percentile of the per-token maxima instead of "
                  "their maximum (100, the default, = the maximum; e.g. 99.99 clips rare outliers)")
      ->check(CLI::Range(50.0, 100.0))
      ->capture_default_str();
  sub->add_flag("--ids", o->ids, "Inputs are JSON arrays of token ids (special tokens included)");
  sub->add_option("--max-texts", o->max_texts, "Use only the first N inputs (0 = all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--max-length", o->max_length,
                  "Truncate inputs to N tokens (0 = the model's max_seq_length)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--batch-tokens", o->batch_tokens, "Most tokens per batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--batch-seqs", o->batch_seqs, "Most inputs per batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--prompt-name", o->prompt_name,
                  "sentence-transformers prompt to prepend (default: the model's default prompt)");
  sub->add_option("--backend", o->backend,
                  "auto (cuda if a GPU is visible: the bf16 path), cpu (the fp32 reference), cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--device", o->device, "CUDA device index")->capture_default_str();
  return [o] {
    if (!ResolveModelFlag("petal calibrate", &o->model_dir)) return 1;
    return RunCalibrate(*o);
  };
}

}  // namespace
}  // namespace petal::cli

PETAL_REGISTER_COMMAND(calibrate, "calibrate",
                       "Measure static fp8 activation scales on calibration texts",
                       petal::cli::SetupCalibrate);
