// libFuzzer target: the Unigram (multilingual-e5-small) tokenizer from
// models/tokenizers/multilingual-e5-small/tokenizer.json on arbitrary bytes (see tokenizer_fuzz.h
// for the options byte and the checks).
#include "tokenizer_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  petal::fuzz::FuzzTokenizer("models/tokenizers/multilingual-e5-small/tokenizer.json", data, size);
  return 0;
}
