#include "model/make_model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/file_util.h"
#include "model/qwen3/qwen3.h"
#include "model/safetensors_writer.h"

namespace petal {

const std::vector<ModelShape>& KnownModelShapes() {
  // {name, layers, hidden, q heads, kv heads, head_dim, mlp, vocab, max positions, theta, eps}
  static const std::vector<ModelShape> shapes = {
      {"pplx-embed-v1-0.6b", 28, 1024, 16, 8, 128, 3072, 151669, 32768, 1e6, 1e-6},
      {"pplx-embed-v1-4b", 36, 2560, 32, 8, 128, 9728, 151669, 32768, 1e6, 1e-6},
      // Tiny shapes for tests. Like the real ones, q heads * head_dim != hidden (o_proj is not
      // square) and q heads share kv heads (GQA groups of 2 and 3); vocab small enough to commit.
      {"qwen3-tiny", 2, 64, 4, 2, 32, 128, 1000, 512, 1e6, 1e-6},
      {"qwen3-tiny-gqa3", 3, 48, 6, 2, 16, 96, 1000, 512, 1e4, 1e-6},
      // Small, but with a head_dim the CUDA forward's folded norms take (64; qwen3_cuda.cc).
      {"qwen3-small-d64", 2, 256, 4, 2, 64, 512, 1000, 2048, 1e6, 1e-6},
  };
  return shapes;
}

StatusOr<ModelShape> FindModelShape(const std::string& name) {
  std::string known;
  for (const ModelShape& s : KnownModelShapes()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  return NotFound("unknown model shape '" + name + "' (known: " + known + ")");
}

ModelConfig ConfigForShape(const ModelShape& s) {
  ModelConfig c;
  c.architecture = Architecture::kQwen3;
  c.hf_architecture = "Qwen3Model";
  c.hidden_size = s.hidden_size;
  c.num_layers = s.num_layers;
  c.num_heads = s.num_heads;
  c.num_kv_heads = s.num_kv_heads;
  c.head_dim = s.head_dim;
  c.intermediate_size = s.intermediate_size;
  c.vocab_size = s.vocab_size;
  c.max_position_embeddings = s.max_position_embeddings;
  c.norm_eps = static_cast<float>(s.rms_norm_eps);
  c.rope_theta = s.rope_theta;
  c.activation = Activation::kSilu;
  c.max_seq_length = s.max_position_embeddings;
  return c;
}

namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// FNV-1a: keys each tensor's stream by its name, so tensors are independent of write order.
uint64_t HashKey(const std::string& key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : key) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

std::string Num(double v) {
  std::ostringstream os;
  os.precision(12);  // enough for the decimal constants in the shape table
  os << v;
  return os.str();
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return NotFound("cannot create " + path);
  f << text;
  f.close();
  if (!f) return DataLoss("short write to " + path);
  return Status::Ok();
}

std::string ConfigJson(const ModelShape& s, const MakeModelOptions& o) {
  const bool causal = o.mask == AttentionMask::kCausal;
  const std::string dtype = o.dtype == DType::kF32 ? "float32" : "bfloat16";
  const std::string theta = Num(s.rope_theta);
  std::ostringstream j;
  j << "{\n"
    << "  \"architectures\": [\"Qwen3Model\"],\n"
    << "  \"model_type\": \"qwen3\",\n"
    << "  \"hidden_size\": " << s.hidden_size << ",\n"
    << "  \"intermediate_size\": " << s.intermediate_size << ",\n"
    << "  \"num_hidden_layers\": " << s.num_layers << ",\n"
    << "  \"num_attention_heads\": " << s.num_heads << ",\n"
    << "  \"num_key_value_heads\": " << s.num_kv_heads << ",\n"
    << "  \"head_dim\": " << s.head_dim << ",\n"
    << "  \"vocab_size\": " << s.vocab_size << ",\n"
    << "  \"max_position_embeddings\": " << s.max_position_embeddings << ",\n"
    << "  \"rms_norm_eps\": " << Num(s.rms_norm_eps)
    << ",\n"
    // Both spellings: rope_theta (transformers 4.x, Petal) and rope_parameters (transformers 5).
    << "  \"rope_theta\": " << theta << ",\n"
    << "  \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": " << theta << "},\n"
    << "  \"hidden_act\": \"silu\",\n"
    << "  \"attention_bias\": " << (o.attention_bias ? "true" : "false") << ",\n"
    << "  \"attention_dropout\": 0.0,\n"
    << "  \"initializer_range\": 0.02,\n"
    << "  \"tie_word_embeddings\": false,\n"
    << "  \"use_cache\": false,\n"
    << "  \"use_sliding_window\": false,\n"
    << "  \"sliding_window\": null,\n"
    << "  \"max_window_layers\": " << s.num_layers << ",\n"
    << "  \"is_causal\": " << (causal ? "true" : "false") << ",\n"
    << "  \"torch_dtype\": \"" << dtype << "\",\n"
    << "  \"dtype\": \"" << dtype << "\"\n"
    << "}\n";
  return j.str();
}

Status WriteSidecarFiles(const std::string& dir, const ModelShape& s, const MakeModelOptions& o,
                         PoolingMode pooling) {
  namespace fs = std::filesystem;
  PETAL_RETURN_IF_ERROR(WriteText(JoinPath(dir, "config.json"), ConfigJson(s, o)));
  PETAL_RETURN_IF_ERROR(WriteText(
      JoinPath(dir, "petal_config.json"),
      std::string("{\n  \"attention_mask\": \"") + AttentionMaskName(o.mask) +
          "\",\n  \"pooling\": \"" + PoolingModeName(pooling) + "\",\n  \"normalize\": true\n}\n"));
  PETAL_RETURN_IF_ERROR(
      WriteText(JoinPath(dir, "modules.json"),
                "[\n"
                "  {\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": "
                "\"sentence_transformers.models.Transformer\"},\n"
                "  {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": "
                "\"sentence_transformers.models.Pooling\"},\n"
                "  {\"idx\": 2, \"name\": \"2\", \"path\": \"2_Normalize\", \"type\": "
                "\"sentence_transformers.models.Normalize\"}\n"
                "]\n"));
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "1_Pooling", ec);
  if (ec) return NotFound("cannot create folders under " + dir + ": " + ec.message());
  auto flag = [](bool b) { return b ? "true" : "false"; };
  std::ostringstream p;
  p << "{\n  \"word_embedding_dimension\": " << s.hidden_size << ",\n"
    << "  \"pooling_mode_cls_token\": " << flag(pooling == PoolingMode::kCls) << ",\n"
    << "  \"pooling_mode_mean_tokens\": " << flag(pooling == PoolingMode::kMean) << ",\n"
    << "  \"pooling_mode_max_tokens\": false,\n"
    << "  \"pooling_mode_mean_sqrt_len_tokens\": false,\n"
    << "  \"pooling_mode_weightedmean_tokens\": false,\n"
    << "  \"pooling_mode_lasttoken\": " << flag(pooling == PoolingMode::kLastToken) << ",\n"
    << "  \"include_prompt\": true\n}\n";
  PETAL_RETURN_IF_ERROR(WriteText(JoinPath(dir, "1_Pooling/config.json"), p.str()));
  PETAL_RETURN_IF_ERROR(
      WriteText(JoinPath(dir, "sentence_bert_config.json"),
                "{\n  \"max_seq_length\": " + std::to_string(s.max_position_embeddings) +
                    ",\n  \"do_lower_case\": false\n}\n"));
  if (!o.tokenizer_path.empty()) {
    fs::copy_file(o.tokenizer_path, fs::path(dir) / "tokenizer.json",
                  fs::copy_options::overwrite_existing, ec);
    if (ec) return NotFound("cannot copy tokenizer " + o.tokenizer_path + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace

void SeededNormal(uint64_t seed, const std::string& key, double mean, double std, float* out,
                  int64_t n) {
  uint64_t state = seed ^ HashKey(key);
  SplitMix64(state);  // decorrelate nearby seeds
  // Four 24-bit uniforms: their sum has mean 2^25 and variance 4 * 2^48 / 12 = 2^48 / 3.
  const double k = std * 1.7320508075688772 / double(1 << 24);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t a = SplitMix64(state), b = SplitMix64(state);
    const int64_t sum = static_cast<int64_t>((a >> 40) + ((a >> 16) & 0xffffff) + (b >> 40) +
                                             ((b >> 16) & 0xffffff)) -
                        (int64_t{1} << 25);
    out[i] = static_cast<float>(mean + static_cast<double>(sum) * k);
  }
}

Status MakeModel(const MakeModelOptions& o) {
  PETAL_ASSIGN_OR_RETURN(ModelShape s, FindModelShape(o.shape));
  if (o.out_dir.empty()) return InvalidArgument("make-model: --out is required");
  if (o.dtype != DType::kBF16 && o.dtype != DType::kF32) {
    return InvalidArgument("make-model: dtype must be bf16 or f32");
  }
  const PoolingMode pooling = o.pooling_set                      ? o.pooling
                              : o.mask == AttentionMask::kCausal ? PoolingMode::kLastToken
                                                                 : PoolingMode::kMean;
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return NotFound("cannot create " + o.out_dir + ": " + ec.message());
  PETAL_RETURN_IF_ERROR(WriteSidecarFiles(o.out_dir, s, o, pooling));

  const std::vector<Qwen3TensorSpec> specs =
      Qwen3CheckpointTensors(ConfigForShape(s), o.attention_bias);
  std::vector<TensorToWrite> tensors;
  tensors.reserve(specs.size());
  for (const Qwen3TensorSpec& spec : specs) {
    TensorToWrite t;
    t.name = spec.name;
    t.dtype = o.dtype;
    t.shape = spec.shape;
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    // HF's initializer_range (0.02) for matrices; norms near 1 but not exactly, so that a
    // loader which skipped a norm weight would be caught.
    const double mean = spec.kind == Qwen3TensorKind::kNorm ? 1.0 : 0.0;
    const double std = spec.kind == Qwen3TensorKind::kNorm ? 0.1 : 0.02;
    const DType dtype = o.dtype;
    const uint64_t seed = o.seed;
    const std::string key = spec.name;
    t.fill = [=](uint8_t* dst) {
      // Chunk c of tensor `key` is the stream keyed "key#c", so the values do not depend on the
      // dtype: a bf16 checkpoint is exactly the f32 one rounded to nearest even.
      constexpr int64_t kChunk = int64_t{1} << 16;
      std::vector<float> chunk(dtype == DType::kF32 ? 0 : kChunk);
      for (int64_t begin = 0; begin < n; begin += kChunk) {
        const int64_t m = std::min(kChunk, n - begin);
        const std::string chunk_key = key + "#" + std::to_string(begin / kChunk);
        if (dtype == DType::kF32) {
          SeededNormal(seed, chunk_key, mean, std, reinterpret_cast<float*>(dst) + begin, m);
        } else {
          SeededNormal(seed, chunk_key, mean, std, chunk.data(), m);
          uint16_t* out = reinterpret_cast<uint16_t*>(dst) + begin;
          for (int64_t i = 0; i < m; ++i) out[i] = FloatToBFloat16(chunk[i]);
        }
      }
    };
    tensors.push_back(std::move(t));
  }
  return WriteSafetensors(JoinPath(o.out_dir, "model.safetensors"), tensors);
}

}  // namespace petal
