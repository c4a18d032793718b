// Normalizer steps (see normalizer.h).
#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include "tokenizer/unicode.h"

namespace petal::tok {
namespace {

// utf8proc normalisation of `in`, appended to *out.
void UnicodeNormalizeRun(std::string_view in, NormStep::Kind kind, std::string* out,
                         std::vector<int32_t>* buf);

// BertNormalizer, in the order tokenizers applies it: clean, CJK spacing, accents, lowercase.
// ASCII-only input: one pass (no CJK, no accents; controls dropped, whitespace to ' ', lowercase).
void BertNormalizeAscii(const NormStep& st, std::string_view in, std::string* out) {
  out->resize(in.size());
  char* w = out->data();
  for (char ch : in) {
    unsigned char b = static_cast<unsigned char>(ch);
    if (st.clean_text) {
      uint16_t f = CharFlags(b);
      if (b == 0 || (f & kFlagControl)) continue;
      if (f & kFlagWhitespace) {
        *w++ = ' ';
        continue;
      }
    }
    *w++ = static_cast<char>(st.lowercase && b >= 'A' && b <= 'Z' ? b + 32 : b);
  }
  out->resize(w - out->data());
}

void BertNormalize(const NormStep& st, std::string_view in, std::string* out, NormScratch* s) {
  if (IsAscii(in)) {
    BertNormalizeAscii(st, in, out);
    return;
  }
  out->clear();
  // Pass 1: clean text and CJK spacing (code point level, no decomposition needed).
  std::string& a = s->tmp;
  a.clear();
  size_t i = 0;
  while (i < in.size()) {
    size_t start = i;
    char32_t c = DecodeUtf8(in, &i);
    uint16_t f = CharFlags(c);
    if (st.clean_text) {
      if (c == 0 || c == 0xFFFD || (f & kFlagControl)) continue;
      if (f & kFlagWhitespace) {
        a.push_back(' ');
        continue;
      }
    }
    if (st.handle_chinese_chars && (f & kFlagCjk)) {
      a.push_back(' ');
      a.append(in.substr(start, i - start));
      a.push_back(' ');
      continue;
    }
    a.append(in.substr(start, i - start));
  }
  std::string_view cur = a;
  std::string decomposed;
  if (st.strip_accents && !IsAscii(cur)) {
    // NFD, then drop the nonspacing marks.
    std::string& d = *out;
    UnicodeNormalize(cur, NormStep::Kind::kNfd, &d, &s->codepoints);
    size_t w = 0, r = 0;
    while (r < d.size()) {
      size_t start = r;
      char32_t c = DecodeUtf8(d, &r);
      if (CharFlags(c) & kFlagMn) continue;
      for (size_t k = start; k < r; ++k) d[w++] = d[k];
    }
    d.resize(w);
    a.swap(d);
    cur = a;
  }
  out->clear();
  if (!st.lowercase) {
    out->append(cur);
    return;
  }
  for (size_t r = 0; r < cur.size();) {
    unsigned char b = static_cast<unsigned char>(cur[r]);
    if (b < 0x80) {
      out->push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
      ++r;
      continue;
    }
    char32_t c = DecodeUtf8(cur, &r);
    if (c == 0x130) {  // The one unconditional multi-code-point lowercase mapping.
      out->append("i\xCC\x87");
      continue;
    }
    AppendUtf8(ToLowerSimple(c), out);
  }
}

void Lowercase(std::string_view in, std::string* out) {
  out->clear();
  for (size_t r = 0; r < in.size();) {
    unsigned char b = static_cast<unsigned char>(in[r]);
    if (b < 0x80) {
      out->push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
      ++r;
      continue;
    }
    char32_t c = DecodeUtf8(in, &r);
    if (c == 0x130) {
      out->append("i\xCC\x87");
      continue;
    }
    AppendUtf8(ToLowerSimple(c), out);
  }
}

void ReplaceLiteral(std::string_view in, const std::string& pat, const std::string& content,
                    std::string* out) {
  out->clear();
  if (pat.empty()) {
    out->append(in);
    return;
  }
  size_t pos = 0;
  while (true) {
    size_t hit = in.find(pat, pos);
    if (hit == std::string_view::npos) break;
    out->append(in.substr(pos, hit - pos));
    out->append(content);
    pos = hit + pat.size();
  }
  out->append(in.substr(pos));
}

void Collapse(std::string_view in, char ch, int min_run, const std::string& content,
              std::string* out) {
  out->clear();
  size_t i = 0;
  while (i < in.size()) {
    if (in[i] != ch) {
      out->push_back(in[i++]);
      continue;
    }
    size_t j = i;
    while (j < in.size() && in[j] == ch) ++j;
    if (static_cast<int>(j - i) >= min_run) {
      out->append(content);
    } else {
      out->append(in.substr(i, j - i));
    }
    i = j;
  }
}

void Strip(std::string_view in, bool left, bool right, std::string* out) {
  size_t b = 0, e = in.size();
  if (left) {
    while (b < e) {
      size_t p = b;
      char32_t c = DecodeUtf8(in, &p);
      if (!(CharFlags(c) & kFlagWhitespace)) break;
      b = p;
    }
  }
  if (right) {
    while (e > b) {
      size_t p = e - 1;
      while (p > b && (static_cast<unsigned char>(in[p]) & 0xC0) == 0x80) --p;
      size_t q = p;
      char32_t c = DecodeUtf8(in, &q);
      if (!(CharFlags(c) & kFlagWhitespace)) break;
      e = p;
    }
  }
  out->assign(in.substr(b, e - b));
}

}  // namespace

void UnicodeNormalize(std::string_view in, NormStep::Kind kind, std::string* out,
                      std::vector<int32_t>* buf) {
  if (IsAscii(in)) {  // ASCII is invariant under all four forms.
    out->append(in);
    return;
  }
  // Code points tokenizers' older Unicode tables do not know have combining class 0 and no
  // (de)composition there: nothing reorders or composes across them. Normalising the text
  // between them piecewise reproduces that exactly.
  for (size_t i = 0; i < in.size();) {
    size_t start = i;
    char32_t c = DecodeUtf8(in, &i);
    if (c >= 0x7FD && (CharFlags(c) & kFlagNormInert)) {
      UnicodeNormalize(in.substr(0, start), kind, out, buf);
      out->append(in.substr(start, i - start));
      UnicodeNormalize(in.substr(i), kind, out, buf);
      return;
    }
  }
  if (kind == NormStep::Kind::kNfd) {
    // Stable code points (class 0, no decomposition) are copied: only the runs between them,
    // which hold decomposable characters or marks, go through utf8proc.
    size_t i = 0, run = std::string_view::npos;
    while (i < in.size()) {
      size_t start = i;
      char32_t c = DecodeUtf8(in, &i);
      if (CharFlags(c) & kFlagNfdStable) {
        if (run != std::string_view::npos) {
          UnicodeNormalizeRun(in.substr(run, start - run), kind, out, buf);
          run = std::string_view::npos;
        }
        out->append(in.substr(start, i - start));
      } else if (run == std::string_view::npos) {
        run = start;
      }
    }
    if (run != std::string_view::npos) UnicodeNormalizeRun(in.substr(run), kind, out, buf);
    return;
  }
  UnicodeNormalizeRun(in, kind, out, buf);
}

namespace {
void UnicodeNormalizeRun(std::string_view in, NormStep::Kind kind, std::string* out,
                         std::vector<int32_t>* buf) {
  int options = UTF8PROC_STABLE;
  switch (kind) {
    case NormStep::Kind::kNfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormStep::Kind::kNfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormStep::Kind::kNfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    default:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  const auto* src = reinterpret_cast<const utf8proc_uint8_t*>(in.data());
  auto opts = static_cast<utf8proc_option_t>(options);
  if (buf->size() < in.size() * 2 + 16) buf->resize(in.size() * 2 + 16);
  utf8proc_ssize_t n =
      utf8proc_decompose(src, static_cast<utf8proc_ssize_t>(in.size()), buf->data(),
                         static_cast<utf8proc_ssize_t>(buf->size()), opts);
  if (n > static_cast<utf8proc_ssize_t>(buf->size())) {
    buf->resize(n);
    n = utf8proc_decompose(src, static_cast<utf8proc_ssize_t>(in.size()), buf->data(), n, opts);
  }
  if (n < 0) {  // Cannot happen for valid UTF-8; keep the text rather than lose it.
    out->append(in);
    return;
  }
  n = utf8proc_normalize_utf32(buf->data(), n, opts);
  for (utf8proc_ssize_t k = 0; k < n; ++k) AppendUtf8(static_cast<char32_t>((*buf)[k]), out);
}
}  // namespace

void Normalizer::Normalize(std::string_view in, std::string* out, NormScratch* scratch) const {
  out->assign(in);
  if (steps_.empty()) return;
  std::string next;  // Swapped with *out; keeps its capacity inside `out` across steps.
  thread_local std::string spare;
  next.swap(spare);
  for (const NormStep& st : steps_) {
    next.clear();
    switch (st.kind) {
      case NormStep::Kind::kBert:
        BertNormalize(st, *out, &next, scratch);
        break;
      case NormStep::Kind::kNfc:
      case NormStep::Kind::kNfd:
      case NormStep::Kind::kNfkc:
      case NormStep::Kind::kNfkd:
        UnicodeNormalize(*out, st.kind, &next, &scratch->codepoints);
        break;
      case NormStep::Kind::kLowercase:
        Lowercase(*out, &next);
        break;
      case NormStep::Kind::kReplace:
        ReplaceLiteral(*out, st.pattern, st.content, &next);
        break;
      case NormStep::Kind::kCollapse:
        Collapse(*out, st.ch, st.min_run, st.content, &next);
        break;
      case NormStep::Kind::kStrip:
        Strip(*out, st.strip_left, st.strip_right, &next);
        break;
      case NormStep::Kind::kPrepend:
        if (!out->empty()) next = st.content;
        next.append(*out);
        break;
      case NormStep::Kind::kPrecompiled:
        st.charsmap->Normalize(*out, &next);
        break;
    }
    out->swap(next);
  }
  next.swap(spare);
}

}  // namespace petal::tok
