// Developer tool: prints, for every Unicode scalar value, what Petal's BERT normaliser steps and
// pre-tokenizer do with it, in the format scripts/tokenizer/unicode_probe.py writes for Hugging
// Face `tokenizers`, so that the two can be diffed code point by code point.
#include <cstdio>
#include <string>
#include <vector>

#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace {
std::string Hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h.push_back(d[c >> 4]);
    h.push_back(d[c & 15]);
  }
  return h;
}
petal::tok::Normalizer Bert(bool clean, bool chinese, bool strip, bool lower) {
  petal::tok::NormStep st;
  st.kind = petal::tok::NormStep::Kind::kBert;
  st.clean_text = clean;
  st.handle_chinese_chars = chinese;
  st.strip_accents = strip;
  st.lowercase = lower;
  return petal::tok::Normalizer({st});
}
}  // namespace

int main(int argc, char** argv) {
  using namespace petal::tok;
  if (argc > 1 && std::string(argv[1]) == "--nf") {  // NFD NFC NFKD NFKC of each code point.
    std::vector<int32_t> buf;
    std::string ch, o;
    const NormStep::Kind kinds[] = {NormStep::Kind::kNfd, NormStep::Kind::kNfc,
                                    NormStep::Kind::kNfkd, NormStep::Kind::kNfkc};
    for (char32_t c = 0; c <= 0x10FFFF; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      ch.clear();
      AppendUtf8(c, &ch);
      std::printf("%x", unsigned(c));
      for (auto k : kinds) {
        o.clear();
        UnicodeNormalize(ch, k, &o, &buf);
        std::printf("\t%s", Hex(o).c_str());
      }
      std::printf("\n");
    }
    return 0;
  }
  Normalizer clean = Bert(true, false, false, false), strip = Bert(false, false, true, false),
             lower = Bert(false, false, false, true), chin = Bert(false, true, false, false);
  PreTokStep bert;
  bert.kind = PreTokStep::Kind::kBert;
  PreTokenizer pre({bert});
  NormScratch ns;
  Words w, tmp;
  std::string ch, a, b, l, z;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    ch.clear();
    AppendUtf8(c, &ch);
    clean.Normalize(ch, &a, &ns);
    strip.Normalize(ch, &b, &ns);
    lower.Normalize(ch, &l, &ns);
    chin.Normalize(ch, &z, &ns);
    pre.Run("a" + ch + "a", true, &w, &tmp);
    const char* kind = w.size() == 2 ? "ws" : (w.size() == 3 ? "punct" : "other");
    std::printf("%x\t%s\t%s\t%s\t%d\t%s\n", unsigned(c), Hex(a).c_str(), Hex(b).c_str(),
                Hex(l).c_str(), int(z != ch), kind);
  }
  return 0;
}
