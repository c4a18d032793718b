// libFuzzer target: the byte-level BPE (Qwen3) tokenizer from
// models/tokenizers/qwen3/tokenizer.json on arbitrary bytes (see tokenizer_fuzz.h for the options
// byte and the checks).
#include "tokenizer_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  petal::fuzz::FuzzTokenizer("models/tokenizers/qwen3/tokenizer.json", data, size);
  return 0;
}
