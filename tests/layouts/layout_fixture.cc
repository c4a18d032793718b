#include "layout_fixture.h"

#include <signal.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>

#include "common/file_util.h"
#include "model/config.h"
#include "model/factory.h"
#include "model/make_model.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"

namespace petal::testing {
namespace fs = std::filesystem;

std::string SourceDir() {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return s ? s : ".";
}

namespace {

std::string LayoutsDir() { return SourceDir() + "/tests/fixtures/layouts"; }

Status WriteText(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return NotFound("cannot create " + path);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok ? Status::Ok() : DataLoss("short write to " + path);
}

// Replaces the "post_processor" object of a tokenizer.json with a template that appends `eos`.
StatusOr<std::string> AppendEosTemplate(std::string json, const std::string& eos, int64_t eos_id) {
  const size_t key = json.find("\"post_processor\"");
  if (key == std::string::npos) return NotFound("tokenizer.json has no post_processor");
  size_t open = json.find_first_of("{n", key + 16), close = open;
  if (json[open] == 'n') {
    close = open + 3;  // null
  } else {
    for (int depth = 0; close < json.size(); ++close) {
      if (json[close] == '{') ++depth;
      if (json[close] == '}' && --depth == 0) break;
    }
  }
  const std::string id = "\"" + eos + "\"";
  json.replace(
      open, close + 1 - open,
      R"({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},)"
      R"( {"SpecialToken": {"id": )" +
          id +
          R"(, "type_id": 0}}], "pair": [{"Sequence":)"
          R"( {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": )" +
          id +
          R"(, "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken":)"
          R"( {"id": )" +
          id + R"(, "type_id": 1}}], "special_tokens": {)" + id + R"(: {"id": )" + id +
          ", \"ids\": [" + std::to_string(eos_id) + "], \"tokens\": [" + id + "]}}}");
  return json;
}

bool IsNormName(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  return lower.size() >= 11 && lower.compare(lower.size() - 11, 11, "norm.weight") == 0;
}

}  // namespace

namespace {

// The folders LayoutTempDir named in this process, removed when it exits normally: every run
// rebuilds them from the seed, and left behind they filled the disk (86 MB for a Qwen3 reranker
// fixture, ~35 GB after some hundred test runs). A forked child (a death test, a spawned server)
// exits with a copy of this list; only the process that made the list removes the folders.
class TempDirs {
 public:
  // A process that crashed or was killed removed nothing: its folders (named by its pid) go when
  // the next process makes its first one, if no process of that pid is alive.
  TempDirs() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(kPrefix, 0) != 0) continue;
      const long pid = std::strtol(name.c_str() + kPrefix.size(), nullptr, 10);
      if (pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 &&
          errno == ESRCH) {
        fs::remove_all(e.path(), ec);
      }
    }
  }
  static constexpr std::string_view kPrefix = "petal_layout_";

  void Add(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.insert(dir);
  }
  ~TempDirs() {
    if (::getpid() != owner_) return;
    for (const auto& d : dirs_) {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  }

 private:
  const pid_t owner_ = ::getpid();
  std::mutex mu_;
  std::set<std::string> dirs_;
};

TempDirs& MadeTempDirs() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

std::string LayoutTempDir(const std::string& name) {
  std::string dir = (fs::temp_directory_path() /
                     (std::string(TempDirs::kPrefix) + std::to_string(::getpid()) + "_" + name))
                        .string();
  MadeTempDirs().Add(dir);
  return dir;
}

StatusOr<std::vector<LayoutSpec>> LoadLayouts(uint64_t* seed) {
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(LayoutsDir() + "/layouts.json"));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return InvalidArgument("layouts.json is not JSON");
  uint64_t s = 0;
  if (doc["seed"].get_uint64().get(s)) return InvalidArgument("layouts.json: no seed");
  if (seed) *seed = s;
  std::vector<LayoutSpec> out;
  simdjson::dom::array layouts;
  if (doc["layouts"].get_array().get(layouts)) return InvalidArgument("layouts.json: no layouts");
  for (auto l : layouts) {
    LayoutSpec spec;
    std::string_view v;
    if (!l["name"].get_string().get(v)) spec.name = v;
    if (!l["tokenizer"].get_string().get(v)) spec.tokenizer_dir = v;
    if (!l["append_eos"].get_string().get(v)) spec.append_eos = v;
    if (!l["dtype"].get_string().get(v)) spec.dtype = v;
    out.push_back(spec);
  }
  return out;
}

StatusOr<Golden> LoadGolden(const std::string& name, const std::string& suffix,
                            const std::string& dir) {
  const std::string path =
      (dir.empty() ? LayoutsDir() : dir) + "/golden_" + name + suffix + ".json";
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return InvalidArgument(path + " is not JSON");
  Golden g;
  simdjson::dom::object sums;
  if (!doc["tensor_sums"].get_object().get(sums)) {
    for (auto [k, v] : sums) g.tensor_sums[std::string(k)] = v.get_double().value_unsafe();
  }
  simdjson::dom::array cases;
  if (doc["cases"].get_array().get(cases)) return InvalidArgument(path + ": no cases");
  for (auto c : cases) {
    GoldenCase gc;
    std::string_view v;
    if (!c["text"].get_string().get(v)) gc.text = v;
    if (!c["prompt_name"].get_string().get(v)) gc.prompt_name = v;
    if (!c["input"].get_string().get(v)) gc.input = v;
    simdjson::dom::array ids, emb;
    if (c["ids"].get_array().get(ids) || c["embedding"].get_array().get(emb)) {
      return InvalidArgument(path + ": a case without ids or embedding");
    }
    for (auto id : ids) {
      gc.ids.push_back(static_cast<int32_t>(id.get_int64().value_unsafe()));
    }
    for (auto x : emb) {
      double d = 0;
      if (x.get_double().get(d)) d = static_cast<double>(x.get_int64().value_unsafe());
      gc.embedding.push_back(static_cast<float>(d));
    }
    g.cases.push_back(std::move(gc));
  }
  return g;
}

Status CheckTensorSums(const std::string& name, const std::map<std::string, double>& written,
                       const std::map<std::string, double>& golden) {
  for (const auto& [tensor, sum] : written) {
    auto g = golden.find(tensor);
    if (g == golden.end()) return NotFound(name + ": golden has no tensor " + tensor);
    if (std::abs(sum - g->second) > 1e-9 * (1 + std::abs(sum))) {
      return DataLoss(name + ": tensor " + tensor + " sums to " + std::to_string(sum) +
                      ", the golden's to " + std::to_string(g->second));
    }
  }
  if (written.size() != golden.size()) {
    return DataLoss(name + ": " + std::to_string(written.size()) +
                    " tensors written, the golden has " + std::to_string(golden.size()));
  }
  return Status::Ok();
}

Status BuildLayoutFolder(const LayoutSpec& layout, uint64_t seed, const std::string& out_dir,
                         const std::string& config_override, std::map<std::string, double>* sums) {
  std::error_code ec;
  fs::remove_all(out_dir, ec);
  const std::string src =
      layout.fixtures_dir.empty() ? LayoutsDir() : SourceDir() + "/" + layout.fixtures_dir;
  fs::copy(src + "/" + layout.name, out_dir, fs::copy_options::recursive, ec);
  if (ec) return NotFound("cannot copy layout " + layout.name + ": " + ec.message());
  if (!config_override.empty()) {
    PETAL_RETURN_IF_ERROR(WriteText(JoinPath(out_dir, "config.json"), config_override));
  }
  // The tokenizer is copied when the source tree has it (scripts/setup.sh fetches models/);
  // the engines need only config and weights, and the goldens carry the token ids.
  const std::string tok_src = SourceDir() + "/" + layout.tokenizer_dir + "/tokenizer.json";
  std::string tok;
  if (FileExists(tok_src)) {
    PETAL_ASSIGN_OR_RETURN(tok, ReadFile(tok_src));
  }
  if (!tok.empty() && !layout.append_eos.empty()) {
    // The token's id, from the added_tokens list.
    const std::string needle = "\"content\": \"" + layout.append_eos + "\"";
    size_t at = tok.find(needle);
    if (at == std::string::npos) return NotFound(tok_src + " has no token " + layout.append_eos);
    const size_t id_at = tok.rfind("\"id\":", at);
    const int64_t id = std::strtoll(tok.c_str() + id_at + 5, nullptr, 10);
    PETAL_ASSIGN_OR_RETURN(tok, AppendEosTemplate(std::move(tok), layout.append_eos, id));
  }
  if (!tok.empty()) PETAL_RETURN_IF_ERROR(WriteText(JoinPath(out_dir, "tokenizer.json"), tok));

  PETAL_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(out_dir));
  const bool bf16 = layout.dtype == "bfloat16";
  std::vector<TensorToWrite> tensors;
  for (const CheckpointTensor& spec : FindFactory(config.architecture).checkpoint_tensors(config)) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    // As scripts/gpu/golden_layouts.py: chunk c of tensor `name` is the stream "name#c".
    std::vector<float> values(n);
    constexpr int64_t kChunk = int64_t{1} << 16;
    const bool norm = IsNormName(spec.name);
    for (int64_t begin = 0; begin < n; begin += kChunk) {
      SeededNormal(seed, spec.name + "#" + std::to_string(begin / kChunk), norm ? 1.0 : 0.0,
                   norm ? 0.1 : layout.weight_std, values.data() + begin,
                   std::min(kChunk, n - begin));
    }
    double sum = 0;
    TensorToWrite t;
    t.name = spec.name;
    t.shape = spec.shape;
    t.dtype = bf16 ? DType::kBF16 : DType::kF32;
    if (bf16) {
      auto raw = std::make_shared<std::vector<uint16_t>>(n);
      for (int64_t i = 0; i < n; ++i) {
        (*raw)[i] = FloatToBFloat16(values[i]);
        uint32_t bits = uint32_t{(*raw)[i]} << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        sum += f;
      }
      t.fill = [raw](uint8_t* dst) { std::memcpy(dst, raw->data(), raw->size() * 2); };
    } else {
      for (float v : values) sum += v;
      auto raw = std::make_shared<std::vector<float>>(std::move(values));
      t.fill = [raw](uint8_t* dst) { std::memcpy(dst, raw->data(), raw->size() * 4); };
    }
    if (sums) (*sums)[spec.name] = sum;
    tensors.push_back(std::move(t));
  }
  return WriteSafetensors(JoinPath(out_dir, "model.safetensors"), tensors);
}

double Cosine(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) {
    ab += double{a[i]} * b[i];
    aa += double{a[i]} * a[i];
    bb += double{b[i]} * b[i];
  }
  return ab / std::sqrt(aa * bb + 1e-300);
}

std::vector<std::string> PublishedLayoutNames() {
  return {"pplx-embed-v1", "qwen3-embedding", "bge", "e5", "gte", "bge-m3", "multilingual-e5"};
}

std::string LayoutTestName(std::string layout_name) {
  std::replace(layout_name.begin(), layout_name.end(), '-', '_');
  return layout_name;
}

StatusOr<BuiltLayout> BuildPublishedLayout(const std::string& name, const std::string& prefix,
                                           std::map<std::string, double>* sums) {
  uint64_t seed = 0;
  PETAL_ASSIGN_OR_RETURN(auto layouts, LoadLayouts(&seed));
  BuiltLayout b;
  for (const LayoutSpec& s : layouts) {
    if (s.name == name) b.spec = s;
  }
  if (b.spec.name != name) return NotFound("no layout " + name + " in layouts.json");
  b.dir = LayoutTempDir(prefix + name);
  PETAL_RETURN_IF_ERROR(BuildLayoutFolder(b.spec, seed, b.dir, "", sums));
  PETAL_ASSIGN_OR_RETURN(b.golden, LoadGolden(name));
  return b;
}

StatusOr<std::vector<double>> GoldenCosines(const Embeddings& e, const Golden& golden) {
  if (e.rows != static_cast<int>(golden.cases.size())) {
    return Internal(std::to_string(e.rows) + " rows for " + std::to_string(golden.cases.size()) +
                    " golden cases");
  }
  std::vector<double> cos;
  for (size_t i = 0; i < golden.cases.size(); ++i) {
    const std::vector<float>& want = golden.cases[i].embedding;
    if (e.dim != static_cast<int>(want.size())) {
      return Internal("case " + std::to_string(i) + ": dimension " + std::to_string(e.dim) +
                      ", golden " + std::to_string(want.size()));
    }
    cos.push_back(Cosine(e.row(static_cast<int>(i)), want.data(), e.dim));
  }
  return cos;
}

}  // namespace petal::testing
