// Tokenizer: the encode pipeline (see tokenizer.h).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "common/file_util.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace petal {

struct EncodeScratch::Impl {
  std::vector<tok::Segment> segments, sub_segments;
  std::string normalized;
  tok::NormScratch norm;
  tok::Words words, words_tmp;
  tok::ModelScratch model;
  std::vector<int32_t> content, content_b;
};

EncodeScratch::EncodeScratch() : impl_(std::make_unique<Impl>()) {}
EncodeScratch::~EncodeScratch() = default;

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json) {
  PETAL_ASSIGN_OR_RETURN(auto impl, LoadTokenizerJson(json));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  PETAL_ASSIGN_OR_RETURN(std::string json, ReadFile(path));
  auto t = FromJson(json);
  if (!t.ok()) return t.status().WithContext(path);
  return t;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromModelDir(const std::string& dir) {
  return FromFile(JoinPath(dir, "tokenizer.json"));
}

Status Tokenizer::EncodeContent(std::string_view text, const EncodeOptions& opts,
                                EncodeScratch::Impl* s, std::vector<int32_t>* content) const {
  if (!tok::IsValidUtf8(text)) return InvalidArgument("text is not valid UTF-8");
  if (text.size() > 0xFFFFFFF0u) return InvalidArgument("text is longer than 4 GiB");
  const TokenizerImpl& t = *impl_;
  content->clear();
  // 1. Added tokens that match the raw text.
  if (t.raw_matcher.empty()) {
    s->segments.assign(1, tok::Segment{0, static_cast<uint32_t>(text.size()), -1});
  } else {
    t.raw_matcher.FindMatches(text, opts.split_special_tokens, &s->segments);
  }
  for (const tok::Segment& seg : s->segments) {
    if (seg.id >= 0) {
      content->push_back(seg.id);
      continue;
    }
    if (seg.end == seg.begin) continue;
    // 2. Normalise the piece; 3. split on normalised added tokens; 4. pre-tokenize; 5. model.
    t.normalizer.Normalize(text.substr(seg.begin, seg.end - seg.begin), &s->normalized, &s->norm);
    std::string_view norm = s->normalized;
    if (t.norm_matcher.empty()) {
      s->sub_segments.assign(1, tok::Segment{0, static_cast<uint32_t>(norm.size()), -1});
    } else {
      t.norm_matcher.FindMatches(norm, opts.split_special_tokens, &s->sub_segments);
    }
    for (const tok::Segment& sub : s->sub_segments) {
      if (sub.id >= 0) {
        content->push_back(sub.id);
        continue;
      }
      if (sub.end == sub.begin) continue;
      t.pre_tokenizer.Run(norm.substr(sub.begin, sub.end - sub.begin),
                          seg.begin == 0 && sub.begin == 0, &s->words, &s->words_tmp);
      for (size_t w = 0; w < s->words.size(); ++w) {
        t.model->TokenizeCached(s->words[w], &s->model, content);
      }
    }
  }
  return Status::Ok();
}

Status Tokenizer::EncodeInto(std::string_view text, const EncodeOptions& opts,
                             EncodeScratch* scratch, std::vector<int32_t>* ids) const {
  EncodeScratch::Impl* s = scratch->impl_.get();
  PETAL_RETURN_IF_ERROR(EncodeContent(text, opts, s, &s->content));
  std::vector<int32_t>& content = s->content;
  const int added = opts.add_special_tokens ? impl_->post.NumAdded(false) : 0;
  if (opts.max_length > 0) {
    if (opts.max_length < added) {
      return InvalidArgument("max_length " + std::to_string(opts.max_length) +
                             " is smaller than the " + std::to_string(added) +
                             " special tokens the template adds");
    }
    size_t limit = static_cast<size_t>(opts.max_length - added);
    if (content.size() > limit) {
      if (opts.truncate_left) {
        content.erase(content.begin(), content.end() - limit);
      } else {
        content.resize(limit);
      }
    }
  }
  if (opts.add_special_tokens) {
    impl_->post.Apply(content, nullptr, false, ids);
  } else {
    ids->assign(content.begin(), content.end());
  }
  return Status::Ok();
}

StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                                 const EncodeOptions& opts) const {
  thread_local EncodeScratch scratch;
  std::vector<int32_t> ids;
  PETAL_RETURN_IF_ERROR(EncodeInto(text, opts, &scratch, &ids));
  return ids;
}

StatusOr<std::vector<int32_t>> Tokenizer::EncodePair(std::string_view a, std::string_view b,
                                                     const EncodeOptions& opts) const {
  PETAL_ASSIGN_OR_RETURN(PairEncoding e, EncodePairTyped(a, b, opts));
  return std::move(e.ids);
}

StatusOr<PairEncoding> Tokenizer::EncodePairTyped(std::string_view a, std::string_view b,
                                                  const EncodeOptions& opts,
                                                  PairTruncation strategy,
                                                  EncodeScratch* scratch) const {
  EncodeScratch local;
  EncodeScratch::Impl* s = (scratch ? scratch : &local)->impl_.get();
  PETAL_RETURN_IF_ERROR(EncodeContent(a, opts, s, &s->content));
  std::vector<int32_t> first = s->content;
  PETAL_RETURN_IF_ERROR(EncodeContent(b, opts, s, &s->content_b));
  std::vector<int32_t>& second = s->content_b;
  const int added = opts.add_special_tokens ? impl_->post.NumAdded(true) : 0;
  PairEncoding out;
  auto cut = [&](std::vector<int32_t>& v, size_t n) {
    if (v.size() <= n) return;
    out.truncated = true;
    if (opts.truncate_left) {
      v.erase(v.begin(), v.end() - n);
    } else {
      v.resize(n);
    }
  };
  if (opts.max_length > 0) {
    if (opts.max_length < added) return InvalidArgument("max_length is smaller than the template");
    size_t limit = static_cast<size_t>(opts.max_length - added);
    if (first.size() + second.size() > limit) {
      if (strategy == PairTruncation::kOnlySecond) {
        if (first.size() >= limit) {
          return InvalidArgument("the first text has " + std::to_string(first.size()) +
                                 " tokens: with the template that leaves no room for the second "
                                 "within max_length " +
                                 std::to_string(opts.max_length) + " (only_second truncation)");
        }
        cut(second, limit - first.size());
      } else {
        // Longest first, as tokenizers computes it: if only the longer one must shrink, it keeps
        // what the shorter leaves; otherwise both get half, and the odd token goes to the longer
        // (to the second when they are equally long).
        size_t n1 = first.size(), n2 = second.size();
        const bool swap = n1 > n2;
        if (swap) std::swap(n1, n2);
        n2 = n1 > limit ? n1 : std::max(n1, limit - n1);
        if (n1 + n2 > limit) {
          n1 = limit / 2;
          n2 = n1 + limit % 2;
        }
        if (swap) std::swap(n1, n2);
        cut(first, n1);
        cut(second, n2);
      }
    }
  }
  if (opts.add_special_tokens) {
    impl_->post.Apply(first, &second, true, &out.ids, &out.type_ids);
  } else {
    out.ids = first;
    out.ids.insert(out.ids.end(), second.begin(), second.end());
    out.type_ids.assign(first.size(), 0);
    out.type_ids.insert(out.type_ids.end(), second.size(), 1);
  }
  return out;
}

StatusOr<std::vector<std::vector<int32_t>>> Tokenizer::EncodeBatch(
    std::span<const std::string_view> texts, const EncodeOptions& opts, int num_threads) const {
  std::vector<std::vector<int32_t>> out(texts.size());
  if (num_threads <= 0)
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads = static_cast<int>(std::min<size_t>(num_threads, texts.size()));
  std::atomic<size_t> next{0};
  std::vector<Status> errors(std::max(num_threads, 1));
  auto worker = [&](int w) {
    EncodeScratch scratch;
    // Small chunks keep threads balanced when text lengths vary a lot.
    constexpr size_t kChunk = 8;
    while (true) {
      size_t begin = next.fetch_add(kChunk);
      if (begin >= texts.size()) return;
      size_t end = std::min(texts.size(), begin + kChunk);
      for (size_t i = begin; i < end; ++i) {
        Status st = EncodeInto(texts[i], opts, &scratch, &out[i]);
        if (!st.ok() && errors[w].ok()) errors[w] = st.WithContext("text " + std::to_string(i));
      }
    }
  };
  if (num_threads <= 1) {
    worker(0);
  } else {
    std::vector<std::thread> threads;
    for (int w = 1; w < num_threads; ++w) threads.emplace_back(worker, w);
    worker(0);
    for (auto& th : threads) th.join();
  }
  for (const Status& st : errors) {
    if (!st.ok()) return st;
  }
  return out;
}

std::string_view Tokenizer::IdToToken(int32_t id) const {
  for (const auto& a : impl_->added) {
    if (a.id == id) return a.content;
  }
  return impl_->model->vocab().Token(id);
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  int32_t id = impl_->added_ids.Find(token);
  if (id < 0) id = impl_->model->vocab().Find(token);
  if (id < 0) return std::nullopt;
  return id;
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
TokenizerModel Tokenizer::model_type() const { return impl_->type; }
int Tokenizer::num_special_tokens() const { return impl_->post.NumAdded(false); }

}  // namespace petal
