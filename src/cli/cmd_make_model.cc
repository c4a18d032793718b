// `petal make-model`: writes a random-weight Hugging Face-layout checkpoint of a named shape
// (see model/make_model.h), e.g. for benchmarks of the pplx-embed-v1 sizes and for test fixtures.
#include <chrono>
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "model/make_model.h"

namespace {

struct MakeModelArgs {
  std::string shape, out, dtype = "bf16", attention = "bidirectional", pooling, tokenizer;
  uint64_t seed = 0;
  bool attention_bias = false;
};

std::function<int()> SetupMakeModel(CLI::App* sub) {
  auto args = std::make_shared<MakeModelArgs>();
  std::string shapes;
  for (const auto& s : petal::KnownModelShapes()) shapes += (shapes.empty() ? "" : ", ") + s.name;
  sub->add_option("--shape", args->shape, "Model shape: " + shapes)->required();
  sub->add_option("--out", args->out, "Output folder (created)")->required();
  sub->add_option("--seed", args->seed, "PRNG seed (weights are a pure function of it)");
  sub->add_option("--dtype", args->dtype, "Weight dtype: bf16 or f32")
      ->check(CLI::IsMember({"bf16", "f32"}));
  sub->add_option("--attention", args->attention, "Attention mask: bidirectional or causal")
      ->check(CLI::IsMember({"bidirectional", "causal"}));
  sub->add_option("--pooling", args->pooling,
                  "Pooling: mean or last_token (default: mean if bidirectional, else last_token)")
      ->check(CLI::IsMember({"mean", "last_token"}));
  sub->add_option("--tokenizer", args->tokenizer, "tokenizer.json to copy into the folder");
  sub->add_flag("--attention-bias", args->attention_bias, "Also write q/k/v/o projection biases");
  return [args] {
    petal::MakeModelOptions o;
    o.shape = args->shape;
    o.out_dir = args->out;
    o.seed = args->seed;
    o.dtype = args->dtype == "f32" ? petal::DType::kF32 : petal::DType::kBF16;
    o.mask = args->attention == "causal" ? petal::AttentionMask::kCausal
                                         : petal::AttentionMask::kBidirectional;
    if (!args->pooling.empty()) {
      o.pooling_set = true;
      o.pooling =
          args->pooling == "mean" ? petal::PoolingMode::kMean : petal::PoolingMode::kLastToken;
    }
    o.attention_bias = args->attention_bias;
    o.tokenizer_path = args->tokenizer;
    const auto t0 = std::chrono::steady_clock::now();
    petal::Status s = petal::MakeModel(o);
    if (!s.ok()) {
      std::fprintf(stderr, "make-model: %s\n", s.ToString().c_str());
      return 1;
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("wrote %s (%s, seed %llu, %s, %s) in %.1f s\n", o.out_dir.c_str(), o.shape.c_str(),
                static_cast<unsigned long long>(o.seed), args->dtype.c_str(),
                args->attention.c_str(), secs);
    return 0;
  };
}

}  // namespace

PETAL_REGISTER_COMMAND(make_model, "make-model",
                       "Write a random-weight Hugging Face-layout checkpoint of a named shape",
                       SetupMakeModel);
